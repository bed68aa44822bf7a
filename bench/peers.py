"""Peers benchmark: durablelab side by side with DBOS, LangGraph and Temporal, in one run.

    .venv/bin/pip install -e ".[bench]"            # the peers (an optional extra)
    .venv/bin/python bench/peers.py                 # N=100 and 1,000 steps, 5 repeats: minutes
    .venv/bin/python bench/peers.py --quick         # CI: N=20, 1 repeat, seconds; missing peers
                                                    # are skipped and said so

Every system runs the same workflow: N steps, each a durable step that returns a small dict
(`step(i) -> {"i": i, "ok": True}`, the activity of bench_engine.py), on the same machine, in
the same process, interleaved repeat by repeat, so a slow patch of a shared machine moves
everyone. Each figure is printed as the median over repeats with min and max, as a ratio to a
plain in-memory call of `step(i)` measured right before it (bench_engine.py's baseline), and
each durablelab figure as a ratio to each peer's, taken within one repeat.

Systems:
  durablelab  Engine(path) in "sync", "batch" and "exit" durability on a DuckDB file, and
              "sync" in memory (Engine()).
  DBOS        DBOS Transact, @DBOS.workflow / @DBOS.step, SQLite system database in WAL mode.
  LangGraph   the functional API (@entrypoint / @task: the workflow re-runs from the top and
              finished tasks hand back their saved writes) with SqliteSaver, durability="sync".
  Temporal    temporalio.worker.Replayer (offline, no server) on a history the benchmark
              generates in Temporal's history JSON: per step an activity scheduled, started and
              completed, and a workflow task scheduled, started and completed. Sandboxed (the
              default runner) and unsandboxed. Temporal has no fresh-step figure here: a fresh
              step needs a server.

Figures:
  1. fresh durable step: an N-step run from start to completed, per step;
  2. replay per completed step, warm: the history is already in memory (durablelab: a
     loaded run's later wake-ups; DBOS: its recovery loop in a launched process, which reads
     each step's output from SQLite; LangGraph: the entrypoint re-running over the writes its
     checkpoint load brought in; Temporal: the Replayer on a parsed history);
  3. replay per completed step, cold: open the store, load, replay, after a real crash
     (a child process ran the N steps and died with os._exit before a final step): durablelab
     Engine(path) + run_until_idle(); DBOS DBOS(config) + launch() + its recovery of the
     pending workflow (the wait for DBOS's queue poll, up to ~1 s, is shown apart, not
     counted); LangGraph connect + SqliteSaver + invoke(None) resuming the thread; Temporal
     read the JSON file + WorkflowHistory.from_json + Replayer. Each recovery also runs the
     one final step the crash cut off; each checks that no completed step ran again;
  4. recovery of the largest run (1,000 steps by default) after a crash: figure 3, per run;
  5. bytes of storage per step: (file size after the run - size of an empty store) / N, with
     SQLite's WAL checkpointed and DuckDB's file closed. DuckDB grows its file in 256 KiB
     blocks, so its figure is coarse at small N. Temporal: the JSON file, and the same
     history as protobuf (the server's encoding);
  6. fan-out: the same N steps started at once and gathered, as a run from start to
     completed, per activity, and against the same system's sequential step (figure 1):
     durablelab ctx.start_activity x N + ctx.gather (every mode) and ctx.map (sync, file),
     checked to have had all N in flight at once; DBOS an async workflow gathering N async
     steps (asyncio.gather: DBOS's concurrent steps), checked to overlap by DBOS's own step
     timestamps; LangGraph N Send branches of one node in one super-step (checked), results
     gathered by a reducer, and N @task calls before waiting on their futures. Temporal has
     no fan-out figure: a fresh run needs a server.

Nothing here asserts a time. The asserts check that each measurement did what it claims.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))

import durablelab as dl  # noqa: E402
from durablelab.store import CHECKPOINT_EVERY  # noqa: E402
from bench_engine import (MODES, Table, baseline_per_call, bench_replay, fmt_ratio,  # noqa: E402
                          fmt_time, machine, render, step, steps, time_fresh_run)

perf_counter = time.perf_counter

DL = "durablelab"
DBOS_LABEL = "DBOS (SQLite WAL)"
LG_LABELS = {"graph": "LangGraph graph (SqliteSaver, sync)",
             "task": "LangGraph @task (SqliteSaver, sync)"}
TEMPORAL_LABELS = {False: "Temporal Replayer (unsandboxed)",
                   True: "Temporal Replayer (sandboxed)"}
# Figure 6, the fan-out: N activities started at once and gathered, per system.
DL_FANOUT = {(d, f): f"{DL} start_activity + gather, {d}, {'file' if f else 'in memory'}"
             for d, f in MODES}
DL_MAP = f"{DL} ctx.map, sync, file"
DBOS_FANOUT = f"{DBOS_LABEL}, asyncio.gather of async steps"
LG_FANOUT = {"graph": "LangGraph graph, Send (SqliteSaver, sync)",
             "task": "LangGraph @task futures (SqliteSaver, sync)"}
INSTALL_HINT = 'install the peers with: .venv/bin/pip install -e ".[bench]"'

# Set in a crash child: the final step kills the process (os._exit: no cleanup, no flush,
# like kill -9 from the store's point of view) after the N steps before it completed.
_CRASH = {"now": False}
# Step executions, to check that a recovery replayed every completed step and ran none again.
CALLS = {"step": 0, "final": 0}
# Timestamps taken inside a workflow body during a recovery (DBOS and LangGraph).
PROBE: dict[str, float] = {}


def counted_step(i):
    CALLS["step"] += 1
    return step(i)


def final_step(n):
    """The step after the N completed ones: where the crash child dies."""
    if _CRASH["now"]:
        engine = _CRASH.get("engine")
        if engine is not None:   # what durablelab's recovery will find in the WAL
            print(f"wal_commits {engine.store.uncheckpointed}")
        sys.stdout.flush()
        os._exit(0)
    CALLS["final"] += 1
    return n


# --- durablelab ------------------------------------------------------------------------------
def dl_crashing(ctx, n):
    """N steps, then the final step (where a crash child dies)."""
    for i in range(n):
        ctx.activity("step", counted_step, i)
    return ctx.activity("final", final_step, n)


def dl_store_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def dl_fresh(results, tmp: Path, n: int, r: int, storage: dict | None) -> None:
    """Figure 1 for every durablelab mode (as bench_engine's figure 3), plus storage."""
    for durability, on_file in MODES:
        path = tmp / f"dl-fresh-{durability}-{n}-{r}.duckdb" if on_file else None
        elapsed, base = time_fresh_run(path, durability, n)
        label = f"{DL} {durability}, {'file' if on_file else 'in memory'}"
        results.add("1", n, label, elapsed / n, base)
        if path is not None:
            if storage is not None:
                empty = tmp / f"dl-empty-{durability}-{n}.duckdb"
                dl.Engine(empty).close()
                storage[(n, f"{DL} {durability}, file")] = (dl_store_size(path)
                                                             - dl_store_size(empty))
                empty.unlink()
            for p in path.parent.glob(path.name + "*"):
                p.unlink()


def dl_marginal_storage(tmp: Path, small: int, big: int) -> float:
    """Bytes a DuckDB store grows by per extra step, between a small and a big run (batch
    mode writes the same rows as sync, in bulk): finer than one run's size, since DuckDB
    allocates its file in 256 KiB blocks."""
    sizes = []
    for n in (small, big):
        path = tmp / f"dl-marginal-{n}.duckdb"
        with dl.Engine(path, durability="batch") as engine:
            engine.start(steps, n)
            engine.run_until_idle()
        sizes.append(dl_store_size(path))
        remove_store(path)
    return (sizes[1] - sizes[0]) / (big - small)


def dl_replay(results, tmp: Path, n: int) -> None:
    """Figure 2 for durablelab, by bench_engine's own replay measurement (one repeat)."""
    scratch = Table()
    sub = tmp / "dl-replay"
    sub.mkdir()
    try:
        bench_replay(scratch, sub, n, 1)
    finally:
        shutil.rmtree(sub, ignore_errors=True)
    for (figure, label, unit), row in scratch.rows.items():
        tag = "warm (later wake-ups)" if "warm" in label else "first replay after a load"
        value, ratio = row["values"][0], row["ratios"][0]
        results.add("2", n, f"{DL} {tag}", value, value / ratio)


def dl_recover(results, crashed: Path, work: Path, n: int, notes: set) -> None:
    """Figures 3 and 4 for durablelab: a fresh Engine on the crashed file."""
    said = (crashed / "child.out").read_text().split()
    left = int(said[said.index("wal_commits") + 1])
    notes.add(f"{DL}, N={n:,}: the crash left {left} commits in DuckDB's WAL (a file store "
              f"checkpoints every {CHECKPOINT_EVERY} commits, so at most "
              f"{CHECKPOINT_EVERY - 1}); opening the file replays them (figures 3-4 include it)")
    path, base = fresh_copy(crashed, work, "crash.duckdb", n)
    t0 = perf_counter()
    engine = dl.Engine(path, workflows=[dl_crashing])
    t1 = perf_counter()
    try:
        engine.run_until_idle()
        t2 = perf_counter()
        run = engine.run("crash")
        assert run.status == "completed" and run.result == n, (run.status, run.error)
    finally:
        engine.close()
    assert CALLS == {"step": 0, "final": 1}, f"recovery re-ran completed steps: {CALLS}"
    results.add("3", n, DL, (t2 - t0) / n, base)
    results.add("3", n, f"· {DL}: Engine(path), open + load", (t1 - t0) / n, base)
    results.add("3", n, f"· {DL}: run_until_idle(), replay + final step", (t2 - t1) / n, base)
    results.add("4", n, DL, t2 - t0, base)
    results.add("4", n, f"· {DL}: Engine(path), open + load", t1 - t0, base)
    results.add("4", n, f"· {DL}: run_until_idle(), replay + final step", t2 - t1, base)


def dl_fanout_gather(ctx, n):
    """Figure 6: N activities started at once (each takes its position at the call), then
    one wait for all of them."""
    return len(ctx.gather(*[ctx.start_activity("step", step, i) for i in range(n)]))


def dl_fanout_map(ctx, n):
    """Figure 6 again, written as a fan-out over a list: ctx.map, no limit."""
    return len(ctx.map("step", step, range(n)))


def all_started_before_any_ended(history, n: int) -> bool:
    """True when a run's history holds N started activities and their N ends, every start
    before the first end: all N were in flight at once."""
    starts = history.position[history.kind == "start_activity"]
    ends = history.position[(history.kind == "activity") & history.handle.notna()]
    return len(starts) == n and len(ends) == n and starts.max() < ends.min()


def dl_fanout(results, tmp: Path, n: int, r: int) -> None:
    """Figure 6 for durablelab: start_activity + gather in every mode, ctx.map in sync on a
    file; per activity, from start to completed on a new engine (as figure 1)."""
    cases = [(DL_FANOUT[mode], dl_fanout_gather, *mode) for mode in MODES]
    cases.append((DL_MAP, dl_fanout_map, "sync", True))
    for label, workflow, durability, on_file in cases:
        path = tmp / f"dl-fanout-{durability}-{n}-{r}.duckdb" if on_file else None
        engine = dl.Engine(path, durability=durability)
        try:
            base = baseline_per_call(n)
            gc.collect()
            t0 = perf_counter()
            run_id = engine.start(workflow, n)
            engine.run_until_idle()
            elapsed = perf_counter() - t0
            run = engine.run(run_id)
            assert run.status == "completed" and run.result == n, (run.status, run.error)
            assert all_started_before_any_ended(run.history, n), "the activities did not overlap"
        finally:
            engine.close()
        results.add("6", n, label, elapsed / n, base)
        if path is not None:
            remove_store(path)


# --- DBOS ------------------------------------------------------------------------------------
_DBOS = None


def dbos_api() -> SimpleNamespace:
    """Import DBOS and register this benchmark's workflows (once per process)."""
    global _DBOS
    if _DBOS is None:
        from dbos import DBOS, SetWorkflowID

        @DBOS.step()
        def dbos_step(i):
            return step(i)

        @DBOS.step()
        def dbos_counted_step(i):
            return counted_step(i)

        @DBOS.step()
        def dbos_final_step(n):
            return final_step(n)

        @DBOS.workflow()
        def dbos_steps(n):
            for i in range(n):
                dbos_step(i)
            return n

        @DBOS.workflow()
        def dbos_crashing(n):
            PROBE["entered"] = perf_counter()
            for i in range(n):
                dbos_counted_step(i)
            PROBE["replayed"] = perf_counter()
            result = dbos_final_step(n)
            PROBE["ended"] = perf_counter()
            return result

        # Figure 6. DBOS runs steps concurrently in an async workflow: each async step takes
        # its step number when its task first runs, and asyncio starts tasks in the order
        # they were created, so the numbers follow the code (DBOS's documented pattern).
        @DBOS.step()
        async def dbos_async_step(i):
            return step(i)

        @DBOS.workflow()
        async def dbos_fanout(n):
            return len(await asyncio.gather(*[dbos_async_step(i) for i in range(n)]))

        from importlib.metadata import version
        _DBOS = SimpleNamespace(DBOS=DBOS, SetWorkflowID=SetWorkflowID, steps=dbos_steps,
                                crashing=dbos_crashing, fanout=dbos_fanout,
                                version=version("dbos"))
    return _DBOS


def sqlite_wal(path: Path) -> None:
    """Put a new SQLite file in WAL mode (persistent in the file) before DBOS opens it."""
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    finally:
        con.close()


def sqlite_size(path: Path) -> int:
    """File size with the WAL folded in (a TRUNCATE checkpoint)."""
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        con.close()
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def dbos_launch(path: Path):
    api = dbos_api()
    api.DBOS(config={"name": "durablelab-bench", "system_database_url": f"sqlite:///{path}",
                     "log_level": "WARNING", "run_admin_server": False,
                     "application_version": "durablelab-bench", "executor_id": "local"})
    api.DBOS.launch()
    return api


def dbos_destroy() -> None:
    if _DBOS is not None:
        _DBOS.DBOS.destroy(destroy_registry=False)


def dbos_fresh(results, tmp: Path, n: int, r: int, storage: dict | None) -> None:
    path = tmp / f"dbos-fresh-{n}-{r}.sqlite"
    sqlite_wal(path)
    api = dbos_launch(path)
    try:
        base = baseline_per_call(n)
        gc.collect()
        t0 = perf_counter()
        result = api.steps(n)
        elapsed = perf_counter() - t0
        assert result == n
    finally:
        dbos_destroy()
    results.add("1", n, DBOS_LABEL, elapsed / n, base)
    if storage is not None:
        empty = tmp / f"dbos-empty-{n}.sqlite"
        sqlite_wal(empty)
        dbos_launch(empty)
        dbos_destroy()
        storage[(n, DBOS_LABEL)] = sqlite_size(path) - sqlite_size(empty)
    remove_store(path)
    remove_store(tmp / f"dbos-empty-{n}.sqlite")


def most_in_flight(intervals) -> int:
    """The most (start, end) intervals open at one instant, each half-open, so one that ends
    as another starts does not overlap it (an empty one, start == end, overlaps nothing)."""
    edges = sorted([(end, -1) for start, end in intervals if end > start]
                   + [(start, 1) for start, end in intervals if end > start])
    most = now = 0
    for _, change in edges:
        now += change
        most = max(most, now)
    return most


def dbos_fanout(results, tmp: Path, n: int, r: int, notes: set) -> None:
    """Figure 6 for DBOS: an async workflow gathering N async steps, on a new SQLite file."""
    path = tmp / f"dbos-fanout-{n}-{r}.sqlite"
    sqlite_wal(path)
    api = dbos_launch(path)
    try:
        base = baseline_per_call(n)
        gc.collect()
        t0 = perf_counter()
        with api.SetWorkflowID("fanout"):
            result = asyncio.run(api.fanout(n))
        elapsed = perf_counter() - t0
        assert result == n, result
        recorded = api.DBOS.list_workflow_steps("fanout")
    finally:
        dbos_destroy()
    assert [s["output"] for s in recorded] == [step(i) for i in range(n)], "steps missing"
    # DBOS's own step timestamps (ms): the steps really overlapped.
    most = most_in_flight([(s["started_at_epoch_ms"], s["completed_at_epoch_ms"])
                           for s in recorded])
    assert most >= 2, "DBOS ran the async steps one after another"
    if r == 0:
        notes.add(f"{DBOS_FANOUT}, N={n:,}: up to {most:,} of the {n:,} steps in flight at "
                  f"once in the first repeat (DBOS's step timestamps, in ms)")
    results.add("6", n, DBOS_FANOUT, elapsed / n, base)
    remove_store(path)


def dbos_recover(results, crashed: Path, work: Path, n: int) -> None:
    path, base = fresh_copy(crashed, work, "crash.sqlite", n)
    t0 = perf_counter()
    api = dbos_launch(path)
    t1 = perf_counter()
    try:
        handle = api.DBOS.retrieve_workflow("crash")
        result = handle.get_result(polling_interval_sec=0.005)
        assert result == n
    finally:
        dbos_destroy()
    assert CALLS == {"step": 0, "final": 1}, f"recovery re-ran completed steps: {CALLS}"
    replay = PROBE["ended"] - PROBE["entered"]
    # DBOS re-enqueues a recovered workflow; its queue thread picks it up on its next poll
    # (every ~1 s by default). That wait is DBOS's scheduling, not replay work: shown apart.
    results.add("2", n, DBOS_LABEL, (PROBE["replayed"] - PROBE["entered"]) / n, base)
    results.add("3", n, DBOS_LABEL, (t1 - t0 + replay) / n, base)
    results.add("3", n, f"· {DBOS_LABEL}: DBOS() + launch()", (t1 - t0) / n, base)
    results.add("3", n, f"· {DBOS_LABEL}: replay + final step", replay / n, base)
    results.add("4", n, DBOS_LABEL, t1 - t0 + replay, base)
    results.add("4", n, f"· {DBOS_LABEL}: queue wait before recovery (not counted)",
                PROBE["entered"] - t1, base)


# --- LangGraph -------------------------------------------------------------------------------
# Two shapes, because LangGraph persists them differently:
#  graph: a StateGraph whose node "step" runs once per super-step (a conditional edge loops it
#         N times); with durability="sync" each super-step's checkpoint is written before the
#         next one starts. Recovery loads the latest checkpoint and carries on: nothing replays.
#  @task: the functional API, the same programming model as durablelab, DBOS and Temporal: the
#         entrypoint re-runs from the top and each finished task hands back its saved write.
#         Task writes are handed to a background executor even with durability="sync" (only
#         super-step checkpoints are waited for), so a crash can lose the last few.
_LG = None


def lg_api() -> SimpleNamespace:
    global _LG
    if _LG is None:
        import operator
        from typing import Annotated, TypedDict

        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.func import entrypoint, task
        from langgraph.graph import END, START, StateGraph
        from langgraph.types import Send

        @task
        def lg_step(i):
            return step(i)

        @task
        def lg_counted_step(i):
            return counted_step(i)

        @task
        def lg_final_step(n):
            return final_step(n)

        def task_steps(n):
            for i in range(n):
                lg_step(i).result()
            return n

        def task_crashing(n):
            PROBE["entered"] = perf_counter()
            for i in range(n):
                lg_counted_step(i).result()
            PROBE["replayed"] = perf_counter()
            result = lg_final_step(n).result()
            PROBE["ended"] = perf_counter()
            return result

        class State(TypedDict):
            n: int
            i: int
            result: dict

        def graph(fn, then):
            def node_step(state):
                return {"i": state["i"] + 1, "result": fn(state["i"])}

            def node_final(state):
                return {"result": {"final": final_step(state["n"])}}

            def route(state):
                return "step" if state["i"] < state["n"] else then

            builder = StateGraph(State)
            builder.add_node("step", node_step)
            builder.add_node("final", node_final)
            builder.add_conditional_edges(START, route, ["step", then])
            builder.add_conditional_edges("step", route, ["step", then])
            builder.add_edge("final", END)
            return builder

        # Figure 6. The functional API runs a task when it is called and hands back a
        # future: call N, then wait for them all. The graph API fans out with Send: the
        # edge out of START sends one item to each of N copies of a node, which run in one
        # super-step; a reducer (operator.add) gathers their results into the state.
        def task_fanout(n):
            futures = [lg_step(i) for i in range(n)]
            return len([f.result() for f in futures])

        # Built by call: this file's annotations are strings (from __future__), and these
        # names are local, where LangGraph could not resolve the reducer from a string.
        FanState = TypedDict("FanState", {"n": int, "results": Annotated[list, operator.add]})

        def send_all(state):
            return [Send("step", i) for i in range(state["n"])]

        def fan_step(i):
            return {"results": [step(i)]}

        fanout = StateGraph(FanState)
        fanout.add_node("step", fan_step)
        fanout.add_conditional_edges(START, send_all, ["step"])
        fanout.add_edge("step", END)

        from importlib.metadata import version
        _LG = SimpleNamespace(SqliteSaver=SqliteSaver, entrypoint=entrypoint,
                              task_steps=task_steps, task_crashing=task_crashing,
                              task_fanout=task_fanout, graph_steps=graph(step, END),
                              graph_crashing=graph(counted_step, "final"),
                              graph_fanout=fanout, version=version("langgraph"))
    return _LG


def lg_open(path: Path, kind: str, crashing: bool, setup: bool = False):
    """A connection and a runnable: kind 'task' (functional API) or 'graph'."""
    api = lg_api()
    con = sqlite3.connect(path, check_same_thread=False)
    saver = api.SqliteSaver(con)
    if setup:
        saver.setup()
    if kind == "task":
        runnable = api.entrypoint(checkpointer=saver)(
            api.task_crashing if crashing else api.task_steps)
    else:
        runnable = (api.graph_crashing if crashing else api.graph_steps).compile(
            checkpointer=saver)
    return con, runnable


def lg_input(kind: str, n: int):
    return n if kind == "task" else {"n": n, "i": 0, "result": {}}


def lg_config(kind: str, thread: str, n: int) -> dict:
    config = {"configurable": {"thread_id": thread}}
    if kind == "graph":
        config["recursion_limit"] = n + 10   # one super-step per step
    return config


def lg_result(kind: str, result, n: int) -> bool:
    if kind == "task":
        return result == n
    return result["i"] == n


def lg_fresh(results, tmp: Path, n: int, r: int, storage: dict | None, kind: str) -> None:
    label = LG_LABELS[kind]
    path = tmp / f"lg-{kind}-fresh-{n}-{r}.sqlite"
    con, runnable = lg_open(path, kind, crashing=False, setup=True)
    try:
        base = baseline_per_call(n)
        gc.collect()
        t0 = perf_counter()
        result = runnable.invoke(lg_input(kind, n), lg_config(kind, "fresh", n),
                                 durability="sync")
        elapsed = perf_counter() - t0
        assert lg_result(kind, result, n), result
    finally:
        con.close()
    results.add("1", n, label, elapsed / n, base)
    if storage is not None:
        empty = tmp / f"lg-empty-{n}.sqlite"
        con, _ = lg_open(empty, kind, crashing=False, setup=True)
        con.close()
        storage[(n, label)] = sqlite_size(path) - sqlite_size(empty)
        remove_store(empty)
    remove_store(path)


def lg_recover(results, crashed: Path, work: Path, n: int, kind: str, notes: set) -> None:
    label = LG_LABELS[kind]
    path, base = fresh_copy(crashed, work, "crash.sqlite", n)
    t0 = perf_counter()
    con, runnable = lg_open(path, kind, crashing=True)
    try:
        t1 = perf_counter()
        result = runnable.invoke(None, lg_config(kind, "crash", n), durability="sync")
        t2 = perf_counter()
    finally:
        con.close()
    if kind == "task":
        assert result == n, result
    else:
        assert result["result"] == {"final": n}, result
    assert CALLS["final"] == 1, CALLS
    if CALLS["step"]:
        notes.add(f"{label}, N={n:,}: the resume ran {CALLS['step']} of the {n:,} completed "
                  f"steps again: the crash came before their writes, queued in the "
                  f"background, reached SQLite (figures 3-4 include re-running them)")
    if kind == "task":
        # The entrypoint re-runs over the writes the checkpoint load brought into memory.
        results.add("2", n, label, (PROBE["replayed"] - PROBE["entered"]) / n, base)
        results.add("3", n, label, (t2 - t0) / n, base)
        results.add("3", n, f"· {label}: connect + SqliteSaver + entrypoint", (t1 - t0) / n,
                    base)
        results.add("3", n, f"· {label}: invoke(None): load + replay + final step",
                    (t2 - t1) / n, base)
        results.add("4", n, label, t2 - t0, base)
    else:
        # Nothing replays: the latest checkpoint holds the state. No per-step figure 3.
        results.add("4", n, label, t2 - t0, base)
        results.add("4", n, f"· {label}: connect + SqliteSaver + compile", t1 - t0, base)
        results.add("4", n, f"· {label}: invoke(None): load checkpoint + final step",
                    t2 - t1, base)


def lg_fanout(results, tmp: Path, n: int, r: int, kind: str) -> None:
    """Figure 6 for LangGraph: N tasks called before any is waited for ('task'), or N Send
    branches in one super-step ('graph'), with SqliteSaver and durability="sync"."""
    api = lg_api()
    label = LG_FANOUT[kind]
    path = tmp / f"lg-{kind}-fanout-{n}-{r}.sqlite"
    con = sqlite3.connect(path, check_same_thread=False)
    try:
        saver = api.SqliteSaver(con)
        saver.setup()
        if kind == "task":
            runnable, given = api.entrypoint(checkpointer=saver)(api.task_fanout), n
        else:
            runnable, given = api.graph_fanout.compile(checkpointer=saver), {"n": n,
                                                                             "results": []}
        config = {"configurable": {"thread_id": "fanout"}}
        base = baseline_per_call(n)
        gc.collect()
        t0 = perf_counter()
        result = runnable.invoke(given, config, durability="sync")
        elapsed = perf_counter() - t0
        if kind == "task":
            assert result == n, result
        else:
            assert result["results"] == [step(i) for i in range(n)], "branches missing"
            step_no = runnable.get_state(config).metadata["step"]
            assert step_no == 1, f"the N branches took {step_no} super-steps, not one"
    finally:
        con.close()
    results.add("6", n, label, elapsed / n, base)
    remove_store(path)


# --- Temporal --------------------------------------------------------------------------------
# The workflow lives in a module of its own, written to the temp dir at run time: Temporal's
# sandbox re-imports a workflow's module for every run, and this file's top level (durablelab,
# DuckDB) is not sandbox-safe.
TEMPORAL_MODULE = "durablelab_bench_temporal_workflow"
TEMPORAL_SOURCE = '''
from datetime import timedelta

from temporalio import workflow


@workflow.defn(name="Steps")
class Steps:
    @workflow.run
    async def run(self, n: int) -> int:
        for i in range(n):
            await workflow.execute_activity("step", i,
                                            start_to_close_timeout=timedelta(seconds=10))
        return n
'''


def temporal_history(n: int) -> dict:
    """A completed run of Steps(n) in Temporal's history JSON (the CLI / web UI export
    shape): N activities scheduled, started and completed, each after a workflow task."""
    import base64
    from datetime import datetime, timedelta, timezone

    encoding = base64.b64encode(b"json/plain").decode()

    def payloads(value) -> dict:
        data = json.dumps(value, separators=(",", ":")).encode()
        return {"payloads": [{"metadata": {"encoding": encoding},
                              "data": base64.b64encode(data).decode()}]}

    events: list[dict] = []
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    queue = {"name": "durablelab-bench", "kind": "TASK_QUEUE_KIND_NORMAL"}

    def add(kind: str, attributes: dict) -> str:
        event_id = len(events) + 1
        words = kind.split("_")
        key = words[0] + "".join(w.capitalize() for w in words[1:]) + "EventAttributes"
        when = t0 + timedelta(milliseconds=event_id)
        events.append({"eventId": str(event_id),
                       "eventTime": when.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                       "eventType": "EVENT_TYPE_" + kind.upper(),
                       "taskId": str(1_048_576 + event_id), key: attributes})
        return str(event_id)

    def workflow_task() -> str:
        scheduled = add("workflow_task_scheduled",
                        {"taskQueue": queue, "startToCloseTimeout": "10s", "attempt": 1})
        started = add("workflow_task_started",
                      {"scheduledEventId": scheduled, "identity": "bench@localhost",
                       "requestId": f"wft-{scheduled}"})
        return add("workflow_task_completed",
                   {"scheduledEventId": scheduled, "startedEventId": started,
                    "identity": "bench@localhost"})

    add("workflow_execution_started",
        {"workflowType": {"name": "Steps"}, "taskQueue": queue, "input": payloads(n),
         "workflowTaskTimeout": "10s", "originalExecutionRunId": "bench-run",
         "identity": "bench@localhost", "firstExecutionRunId": "bench-run", "attempt": 1,
         "firstWorkflowTaskBackoff": "0s", "workflowId": "bench-steps"})
    completed = workflow_task()
    for i in range(n):
        scheduled = add("activity_task_scheduled", {
            "activityId": str(i + 1), "activityType": {"name": "step"}, "taskQueue": queue,
            "header": {}, "input": payloads(i), "scheduleToCloseTimeout": "0s",
            "scheduleToStartTimeout": "0s", "startToCloseTimeout": "10s",
            "heartbeatTimeout": "0s", "workflowTaskCompletedEventId": completed,
            "retryPolicy": {"initialInterval": "1s", "backoffCoefficient": 2,
                            "maximumInterval": "100s", "maximumAttempts": 0}})
        started = add("activity_task_started",
                      {"scheduledEventId": scheduled, "identity": "bench@localhost",
                       "requestId": f"act-{scheduled}", "attempt": 1})
        add("activity_task_completed",
            {"result": payloads(step(i)), "scheduledEventId": scheduled,
             "startedEventId": started, "identity": "bench@localhost"})
        completed = workflow_task()
    add("workflow_execution_completed",
        {"result": payloads(n), "workflowTaskCompletedEventId": completed})
    return {"events": events}


class TemporalPeer:
    """Temporal's Replayer, set up once: the workflow module, an event loop, an executor."""

    def __init__(self, tmp: Path, sizes):
        import concurrent.futures

        import temporalio
        from temporalio.client import WorkflowHistory
        from temporalio.worker import Replayer, UnsandboxedWorkflowRunner

        self.version = getattr(temporalio, "__version__", None)
        self.WorkflowHistory, self.Replayer = WorkflowHistory, Replayer
        self.Unsandboxed = UnsandboxedWorkflowRunner
        self.dir = tmp / "temporal"
        self.dir.mkdir()
        (self.dir / f"{TEMPORAL_MODULE}.py").write_text(TEMPORAL_SOURCE)
        sys.path.insert(0, str(self.dir))
        import importlib
        self.workflow = importlib.import_module(TEMPORAL_MODULE).Steps
        self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=2)
        self.loop = asyncio.new_event_loop()
        self.files, self.histories, self.proto_bytes = {}, {}, {}
        for n in sizes:
            path = self.dir / f"history-{n}.json"
            path.write_text(json.dumps(temporal_history(n), separators=(",", ":")))
            self.files[n] = path
            self.histories[n] = WorkflowHistory.from_json("bench-steps", path.read_text())
            self.proto_bytes[n] = sum(e.ByteSize() for e in self.histories[n].events)

    def replayer(self, sandboxed: bool, runtime=None):
        kwargs = {} if sandboxed else {"workflow_runner": self.Unsandboxed()}
        if runtime is not None:
            kwargs["runtime"] = runtime
        return self.Replayer(workflows=[self.workflow], workflow_task_executor=self.executor,
                             **kwargs)

    def replay(self, replayer, history) -> None:
        result = self.loop.run_until_complete(replayer.replay_workflow(history))
        assert result.replay_failure is None, result.replay_failure

    def measure(self, results, n: int) -> None:
        for sandboxed in (False, True):
            label = TEMPORAL_LABELS[sandboxed]
            replayer = self.replayer(sandboxed)
            base = baseline_per_call(n)
            gc.collect()
            t0 = perf_counter()
            self.replay(replayer, self.histories[n])
            results.add("2", n, label, (perf_counter() - t0) / n, base)

            base = baseline_per_call(n)
            gc.collect()
            t0 = perf_counter()
            text = self.files[n].read_text()
            history = self.WorkflowHistory.from_json("bench-steps", text)
            t1 = perf_counter()
            self.replay(self.replayer(sandboxed), history)
            t2 = perf_counter()
            results.add("3", n, label, (t2 - t0) / n, base)
            results.add("3", n, f"· {label}: read + WorkflowHistory.from_json",
                        (t1 - t0) / n, base)
            results.add("3", n, f"· {label}: Replayer", (t2 - t1) / n, base)
            results.add("4", n, label, t2 - t0, base)

    def check_nondeterminism_is_caught(self) -> None:
        """The Replayer really compares: a history recorded for 3 steps, replayed by code
        that asks for 4, must fail."""
        history = temporal_history(3)
        history["events"][0]["workflowExecutionStartedEventAttributes"]["input"] = \
            temporal_history(4)["events"][0]["workflowExecutionStartedEventAttributes"]["input"]
        from temporalio.runtime import Runtime, TelemetryConfig
        quiet = Runtime(telemetry=TelemetryConfig(logging=None))  # no WARN for the expected
        replayer = self.replayer(False, quiet)                     # failure
        result = self.loop.run_until_complete(replayer.replay_workflow(
            self.WorkflowHistory.from_json("bench-check", history),
            raise_on_replay_failure=False))
        assert result.replay_failure is not None, "Temporal replayed a mismatching history"

    def close(self) -> None:
        try:
            # Replayer.replay_workflow leaves its history iterator (an async generator) to the
            # garbage collector; finalise those on this loop before closing it.
            gc.collect()
            self.loop.run_until_complete(asyncio.sleep(0))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        finally:
            self.loop.close()
            self.executor.shutdown(wait=True)
            if str(self.dir) in sys.path:
                sys.path.remove(str(self.dir))
            sys.modules.pop(TEMPORAL_MODULE, None)


# --- crashing a run in a child process -------------------------------------------------------
def crash_child(system: str, path: str, n: int) -> int:
    """Run N steps of the crashing workflow in this (child) process and die in the final
    step. Returns only if it did not die, which is an error."""
    _CRASH["now"] = True
    path = Path(path)
    if system == "durablelab":
        engine = _CRASH["engine"] = dl.Engine(path, durability="sync")
        # The worst case for recovery: the store checkpoints every CHECKPOINT_EVERY commits,
        # so the crash should leave CHECKPOINT_EVERY - 1 of them in the WAL. A finished run
        # of f steps first (f + 2 commits: its start, its steps, its end with its wake-up
        # row) lines that up; recovery does not load a finished run. Then the crashing run
        # commits its start and n steps. final_step prints what is left.
        every = CHECKPOINT_EVERY
        f = (every - 1 - (engine.store.uncheckpointed + 2 + 1 + n)) % every
        engine.start(steps, f, run_id="filler")
        engine.run_until_idle()
        engine.start(dl_crashing, n, run_id="crash")
        engine.run_until_idle()
    elif system == "dbos":
        sqlite_wal(path)
        api = dbos_launch(path)
        with api.SetWorkflowID("crash"):
            api.crashing(n)
    elif system.startswith("langgraph-"):
        kind = system.split("-", 1)[1]
        _, runnable = lg_open(path, kind, crashing=True, setup=True)
        runnable.invoke(lg_input(kind, n), lg_config(kind, "crash", n), durability="sync")
    else:
        raise SystemExit(f"unknown system {system!r}")
    print(f"crash child for {system} finished without crashing", file=sys.stderr)
    return 3


def make_crashed(system: str, folder: Path, n: int) -> Path:
    """A folder holding the store a crashed worker left after N completed steps."""
    folder.mkdir(parents=True)
    name = "crash.duckdb" if system == "durablelab" else "crash.sqlite"
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--crash-child",
                           system, str(folder / name), str(n)],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 or not (folder / name).exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"the crash child exited {proc.returncode}: {' / '.join(tail)}")
    (folder / "child.out").write_text(proc.stdout)
    return folder


def copy_dir(source: Path, target: Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target)


def fresh_copy(crashed: Path, work: Path, name: str, n: int) -> tuple[Path, float]:
    """Before a recovery is timed: a fresh copy of what the crash left (outside the clock,
    so the OS file cache is warm, as for a worker restarted on the same machine), the step
    counters and probes reset, the baseline measured and the garbage collected. Returns
    (the copied store, the baseline per call)."""
    copy_dir(crashed, work)
    CALLS.update(step=0, final=0)
    PROBE.clear()
    base = baseline_per_call(n)
    gc.collect()
    return work / name, base


def remove_store(path: Path) -> None:
    for p in path.parent.glob(path.name + "*"):
        p.unlink()


# --- collecting --------------------------------------------------------------------------------
FIGURES = {
    "0": "plain call of step(i), no engine (the baseline every × baseline divides by)",
    "1": "fresh durable step (start to completed, per step)",
    "2": "replay per completed step, warm (history in memory)",
    "3": "replay per completed step, cold (open + load + replay after a crash)",
    "4": "recovery of the largest run after a crash, per run (open + load + replay + final)",
    "6": "fan-out: N activities started at once and gathered (start to completed, per "
         "activity)",
}
UNITS = {"0": "per call", "1": "per step", "2": "per step", "3": "per step", "4": "per run",
         "6": "per activity"}
# Figure 6's rows beside the same system's sequential step (figure 1).
SEQUENTIAL = {**{DL_FANOUT[(d, f)]: f"{DL} {d}, {'file' if f else 'in memory'}"
                 for d, f in MODES},
              DL_MAP: f"{DL} sync, file", DBOS_FANOUT: DBOS_LABEL,
              LG_FANOUT["graph"]: LG_LABELS["graph"], LG_FANOUT["task"]: LG_LABELS["task"]}


class Results:
    """Samples by (figure, N, system label), one slot per repeat, so ratios pair samples
    taken in the same repeat."""

    def __init__(self, repeats: int, largest: int):
        self.repeats, self.largest = repeats, largest
        self.repeat = 0
        self.values: dict[tuple, list] = {}
        self.bases: dict[tuple, list] = {}

    def add(self, figure: str, n: int, label: str, seconds: float, base: float) -> None:
        if figure == "4" and n != self.largest:
            return   # figure 4 is the largest run's recovery; figure 3 has every N
        key = (figure, n, label)
        self.values.setdefault(key, [None] * self.repeats)[self.repeat] = seconds
        self.bases.setdefault(key, [None] * self.repeats)[self.repeat] = base

    def table(self, order) -> Table:
        table = Table()
        for key in sorted(self.values, key=order):
            figure, n, label = key
            for value, base in zip(self.values[key], self.bases[key]):
                if value is not None:
                    table.add(f"{figure}", f"N={n:,}  {label}", UNITS[figure], value, base)
        return table

    def ratios(self, figure: str, n: int, mine: str, peer: str,
               peer_figure: str | None = None) -> list[float]:
        a = self.values.get((figure, n, mine), [])
        b = self.values.get((peer_figure or figure, n, peer), [])
        return [x / y for x, y in zip(a, b) if x is not None and y]

    def median(self, figure: str, n: int, label: str) -> float | None:
        samples = [v for v in self.values.get((figure, n, label), []) if v is not None]
        return statistics.median(samples) if samples else None


class Peers:
    """Which peers run, and why the others do not. A peer that fails is reported once per
    phase and the benchmark carries on without that measurement."""

    def __init__(self):
        self.available: dict[str, str] = {}   # name -> version
        self.skipped: dict[str, str] = {}     # name -> reason
        self.errors: list[str] = []

    def probe(self, name: str, load) -> None:
        try:
            self.available[name] = load() or "?"
        except ImportError as exc:
            self.skipped[name] = f"{type(exc).__name__}: {exc} ({INSTALL_HINT})"
        except Exception as exc:  # a peer that imports but cannot set up
            self.skipped[name] = f"{type(exc).__name__}: {exc}"

    def run(self, name: str, what: str, fn, *args) -> bool:
        if name not in self.available:
            return False
        try:
            fn(*args)
            return True
        except Exception as exc:
            message = f"{name}: {what} failed ({type(exc).__name__}: {exc})"
            if message not in self.errors:
                self.errors.append(message)
                print(f"  ! {message}; carrying on without it", flush=True)
                if os.environ.get("BENCH_TRACEBACK"):
                    traceback.print_exc()
            return False

    def fail(self, name: str, reason: str) -> None:
        self.available.pop(name, None)
        self.skipped[name] = reason
        print(f"  ! skipping {name}: {reason}", flush=True)


# --- reporting ---------------------------------------------------------------------------------
def fmt_bytes(x: float) -> str:
    return f"{x:,.0f} B"


def figure_order(labels_first):
    def key(k):
        figure, n, label = k
        plain = label.lstrip("· ")
        system = next((i for i, s in enumerate(labels_first) if plain.startswith(s)),
                      len(labels_first))
        return (figure, n, system, label.startswith("·"), label)
    return key


def comparison(results: Results, sizes, dl_labels: dict, peers: list[str]) -> list[str]:
    """durablelab ÷ peer, per figure and N: per-repeat ratios, median [min–max]."""
    out = ["durablelab ÷ peer, same figure, same N, within each repeat: median [min–max].",
           "Below 1: durablelab is cheaper (0.01 = 100× cheaper); above 1: dearer."]
    for figure, mine_labels in dl_labels.items():
        for n in sizes:
            present = [p for p in peers if results.median(figure, n, p) is not None]
            mine = [m for m in mine_labels if results.median(figure, n, m) is not None]
            if not present or not mine:
                continue
            out.append("")
            out.append(f"{figure}. {FIGURES[figure]}, N={n:,}")
            cells = [["", *present]]
            for m in mine:
                row = [m]
                for p in present:
                    ratios = results.ratios(figure, n, m, p)
                    row.append(f"{fmt_ratio(statistics.median(ratios))} "
                               f"[{fmt_ratio(min(ratios))}–{fmt_ratio(max(ratios))}]"
                               if ratios else "–")
                cells.append(row)
            widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
            for r in cells:
                out.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return out


def fanout_vs_sequential(results: Results, sizes) -> list[str]:
    """Figure 6 ÷ figure 1 for each system: what an activity costs in a fan-out against
    the same system's sequential step, within each repeat."""
    out = ["fan-out ÷ sequential, the same system: an activity of figure 6 against a step of "
           "figure 1, within each repeat: median [min–max]."]
    for n in sizes:
        rows = []
        for fan, seq in SEQUENTIAL.items():
            ratios = results.ratios("6", n, fan, seq, peer_figure="1")
            if ratios:
                rows.append(f"  {fan:<58} {fmt_ratio(statistics.median(ratios))} "
                            f"[{fmt_ratio(min(ratios))}–{fmt_ratio(max(ratios))}]")
        if rows:
            out += ["", f"N={n:,}", *rows]
    return out


def targets(results: Results, sizes, sweep_note: str) -> list[str]:
    """The issue's targets, checked against this run's medians."""
    big = max(sizes)
    out = [f"targets (issue 5), medians at N={big:,}:"]

    def line(ok, text):
        out.append(f"  [{'met' if ok else 'MISSED' if ok is not None else 'n/a'}] {text}")

    warm = results.median("2", big, f"{DL} warm (later wake-ups)")
    line(warm is not None and warm <= 10e-6,
         f"replay of a completed step from memory <= 10 µs: "
         f"{f'{warm * 1e6:.2f} µs' if warm else '?'}")
    for peer, factor in ((DBOS_LABEL, 50), (TEMPORAL_LABELS[False], 100)):
        other = results.median("2", big, peer)
        if other is None or warm is None:
            line(None, f"replay >= {factor}× cheaper than {peer}: peer not measured")
        else:
            line(other / warm >= factor, f"replay >= {factor}× cheaper than {peer} "
                 f"({fmt_time(other)} per step): {other / warm:,.0f}×")
    cold = results.median("4", big, DL)
    line(None if cold is None or big < 1000 else cold < 0.060,
         f"cold recovery of a {big:,}-step run < 60 ms including opening the file: "
         f"{fmt_time(cold) if cold else '?'}" + ("" if big >= 1000 else " (needs N=1,000)"))
    sync = results.median("1", big, f"{DL} sync, file")
    for peer in (*LG_LABELS.values(), DBOS_LABEL):
        other = results.median("1", big, peer)
        if other is None or sync is None:
            line(None, f"sync durable step no dearer than {peer}: peer not measured")
        else:
            line(sync <= other, f"sync durable step no dearer than {peer}: "
                 f"{fmt_time(sync)} vs {fmt_time(other)}")
    for mode in ("batch", "exit"):
        fast = results.median("1", big, f"{DL} {mode}, file")
        if fast and sync:
            line(sync / fast >= 10, f"{mode} >= 10× cheaper than sync (file): "
                 f"{sync / fast:.1f}× ({fmt_time(fast)} vs {fmt_time(sync)})")
    out.append(f"  [see bench/sweep.py] {sweep_note}")
    return out


# --- main --------------------------------------------------------------------------------------
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="N=20, 1 repeat (CI smoke run; seconds; never asserts a time)")
    parser.add_argument("--steps", type=int, nargs="+",
                        help="N, steps per workflow (default 100 1000)")
    parser.add_argument("--repeats", type=int, help="repeats per measurement (default 5)")
    parser.add_argument("--only", nargs="+", choices=("dbos", "langgraph", "temporal"),
                        help="run only these peers (durablelab always runs)")
    parser.add_argument("--crash-child", nargs=3, metavar=("SYSTEM", "PATH", "N"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.crash_child:
        system, path, n = args.crash_child
        return crash_child(system, path, int(n))
    sizes = tuple(sorted(set(args.steps))) if args.steps else ((20,) if args.quick
                                                               else (100, 1000))
    repeats = args.repeats or (1 if args.quick else 5)
    if min(sizes) < 1 or repeats < 1:
        parser.error("--steps >= 1, --repeats >= 1")

    print("durablelab vs peers benchmark" + (" (--quick)" if args.quick else ""))
    for line in machine():
        print(line)
    print(f"sizes     N={', '.join(f'{n:,}' for n in sizes)} steps per workflow, "
          f"{repeats} repeat{'s' if repeats > 1 else ''}; baseline: one plain call of "
          f"step(i), measured before each sample", flush=True)

    wanted = set(args.only or ("dbos", "langgraph", "temporal"))
    peers = Peers()
    if "dbos" in wanted:
        peers.probe("dbos", lambda: dbos_api().version)
    if "langgraph" in wanted:
        peers.probe("langgraph", lambda: lg_api().version)
    if "temporal" in wanted:
        def load_temporal():
            import temporalio
            return getattr(temporalio, "__version__", None)
        peers.probe("temporal", load_temporal)
    for name, version in peers.available.items():
        print(f"peer      {name} {version}")
    for name, reason in peers.skipped.items():
        print(f"SKIPPED   {name}: {reason}")
    print(flush=True)

    started = perf_counter()
    results = Results(repeats, max(sizes))
    storage: dict[tuple, float] = {}
    notes: set[str] = set()
    marginal = None
    temporal = None
    try:
        with tempfile.TemporaryDirectory(prefix="durablelab-peers-") as tmp:
            tmp = Path(tmp)
            crashed: dict[tuple, Path] = {}
            print("setting up: crashing an N-step run of each system in a child process",
                  flush=True)
            for system in ("durablelab", "dbos", "langgraph-graph", "langgraph-task"):
                peer = system.split("-")[0]
                if peer != "durablelab" and peer not in peers.available:
                    continue
                for n in sizes:
                    try:
                        crashed[(system, n)] = make_crashed(system, tmp / f"crashed-{system}-{n}", n)
                    except Exception as exc:
                        if system == "durablelab":
                            raise
                        peers.fail(peer, f"could not crash a {system} run "
                                         f"({type(exc).__name__}: {exc})")
                        break
            if "temporal" in peers.available:
                try:
                    temporal = TemporalPeer(tmp, sizes)
                    temporal.check_nondeterminism_is_caught()
                except Exception as exc:
                    peers.fail("temporal", f"{type(exc).__name__}: {exc}")

            small, big = (100, 2_100) if args.quick else (1_000, 101_000)
            marginal = (small, big, dl_marginal_storage(tmp, small, big))
            for r in range(repeats):
                results.repeat = r
                print(f"repeat {r + 1}/{repeats}", flush=True)
                keep = storage if r == 0 else None
                work = tmp / "work"
                for n in sizes:
                    base = baseline_per_call(n)
                    results.add("0", n, "plain call step(i) (baseline)", base, base)
                    dl_fresh(results, tmp, n, r, keep)
                    dl_replay(results, tmp, n)
                    dl_recover(results, crashed[("durablelab", n)], work, n, notes)
                    dl_fanout(results, tmp, n, r)
                    peers.run("dbos", f"fresh steps, N={n}", dbos_fresh, results, tmp, n, r, keep)
                    peers.run("dbos", f"fan-out, N={n}", dbos_fanout, results, tmp, n, r, notes)
                    if ("dbos", n) in crashed:
                        peers.run("dbos", f"recovery, N={n}", dbos_recover, results,
                                  crashed[("dbos", n)], work, n)
                    for kind in LG_LABELS:
                        peers.run("langgraph", f"{kind}: fresh steps, N={n}", lg_fresh,
                                  results, tmp, n, r, keep, kind)
                        peers.run("langgraph", f"{kind}: fan-out, N={n}", lg_fanout,
                                  results, tmp, n, r, kind)
                        if (f"langgraph-{kind}", n) in crashed:
                            peers.run("langgraph", f"{kind}: resume, N={n}", lg_recover,
                                      results, crashed[(f"langgraph-{kind}", n)], work, n,
                                      kind, notes)
                    if temporal is not None:
                        peers.run("temporal", f"replay, N={n}", temporal.measure, results, n)
                    if r == 0 and temporal is not None:
                        storage[(n, "Temporal history JSON (export)")] = \
                            temporal.files[n].stat().st_size
                        storage[(n, "Temporal history protobuf")] = temporal.proto_bytes[n]
                    if work.exists():
                        shutil.rmtree(work)
    finally:
        if temporal is not None:
            temporal.close()
        dbos_destroy_quietly()

    # --- print -----------------------------------------------------------------------------
    systems = [DL, DBOS_LABEL, LG_LABELS["graph"], LG_FANOUT["graph"], LG_LABELS["task"],
               LG_FANOUT["task"], *TEMPORAL_LABELS.values()]
    print()
    for figure, title in FIGURES.items():
        print(f"{figure}. {title}")
    print("   (· rows: the parts of the row above; the queue wait is DBOS's poll interval)")
    print()
    table = results.table(figure_order(systems))
    for line in render(table):
        print(line)
    print()
    print("5. storage per step: (file size after the run - empty store) / N, and the marginal"
          " bytes per extra step")
    labels = sorted({label for _, label in storage}, key=lambda x: (not x.startswith(DL), x))
    head = [f"N={n:,}" for n in sizes] + ([f"marginal {sizes[0]:,}→{sizes[-1]:,}"]
                                           if len(sizes) > 1 else [])
    print(f"   {'':<38}" + "".join(f"{h:>22}" for h in head))
    for label in labels:
        cells = [fmt_bytes(storage[(n, label)] / n) if (n, label) in storage else "–"
                 for n in sizes]
        if len(sizes) > 1:
            a, b = storage.get((sizes[0], label)), storage.get((sizes[-1], label))
            cells.append("(below)" if label.startswith(DL) else
                         fmt_bytes((b - a) / (sizes[-1] - sizes[0]))
                         if a is not None and b is not None else "–")
        print(f"   {label:<38}" + "".join(f"{c:>22}" for c in cells))
    if marginal is not None:
        print(f"   {DL + ' (DuckDB), marginal ' + f'{marginal[0]:,}→{marginal[1]:,} steps':<38}"
              f"{fmt_bytes(marginal[2]):>22}   (batch; finer than the 256 KiB blocks above)")
    print()

    dl_labels = {
        "1": [f"{DL} {d}, {'file' if f else 'in memory'}" for d, f in MODES],
        "2": [f"{DL} warm (later wake-ups)", f"{DL} first replay after a load"],
        "3": [DL],
        "4": [DL],
        "6": [DL_FANOUT[("sync", True)], DL_MAP],
    }
    peer_labels = [DBOS_LABEL, *LG_LABELS.values(), *TEMPORAL_LABELS.values(), DBOS_FANOUT,
                   *LG_FANOUT.values()]
    for line in comparison(results, sizes, dl_labels, peer_labels):
        print(line)
    print()
    for line in fanout_vs_sequential(results, sizes):
        print(line)
    print()
    for line in targets(results, sizes, "10,000 sweep runs under 10 s: "
                        "run bench/sweep.py"):
        print(line)
    print()
    for note in sorted(notes):
        print(f"note      {note}")
    for name, reason in peers.skipped.items():
        print(f"SKIPPED   {name}: {reason}")
    for message in peers.errors:
        print(f"FAILED    {message}")
    left = [t.name for t in threading.enumerate()
            if t is not threading.main_thread() and t.is_alive() and not t.daemon]
    if left:
        print(f"threads still running: {', '.join(left)}")
    print(f"\ntook {perf_counter() - started:.1f} s")
    return 0


def dbos_destroy_quietly() -> None:
    try:
        dbos_destroy()
    except Exception:
        pass


if __name__ == "__main__":
    sys.exit(main())
