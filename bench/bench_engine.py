"""Engine benchmark: what replay, loading, fresh durable steps and recovery cost.

    .venv/bin/python bench/bench_engine.py            # N=1000 steps, 10,000 events, 7 repeats
    .venv/bin/python bench/bench_engine.py --quick    # CI: small sizes, 1 repeat, a few seconds

Machines are shared and noisy, so every figure is also printed as a ratio to a baseline
measured in the same run: one plain in-memory call of the activity function `step(i)` (a
loop of direct calls, no engine). The baseline is measured again right before each
measurement, and each ratio is taken within one repeat, so a slow patch of the machine
moves both. The table shows the median over repeats and the min and max. Nothing here
asserts a time: the asserts only check that each measurement did what it claims (the run
replayed every step, the history loaded every event, the recovered run is waiting again).

Figures:
  1. replay cost per event from a loaded history (pure replay from memory);
  2. history load time for 10,000 events (Engine(path), and its parts);
  3. a fresh durable step in each durability mode, on a file and in memory;
  4. cold recovery of a 1,000-step run: Engine(path) -> run_until_idle() -> waiting again;
  5. the determinism guard on the wake-up path: a whole wake-up (the engine's own call of
     the workflow, which figure 1 bypasses) with the guard on and off, in the same run.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

import durablelab as dl
from durablelab import history as h
from durablelab.context import Context
from durablelab.store import Store, encoded, event_row

perf_counter = time.perf_counter


# --- the workload ---------------------------------------------------------------------------
def step(i):
    """The activity every workflow here calls: a small dict, like a tiny service answer."""
    return {"i": i, "ok": True}


def steps(ctx, n):
    """An n-step workflow that completes."""
    for i in range(n):
        ctx.activity("step", step, i)
    return n


def steps_then_wait(ctx, n):
    """n steps, then a wait for a signal that never comes: the run stays unfinished, with
    n + 1 events in its history (n activities and the wait's start)."""
    for i in range(n):
        ctx.activity("step", step, i)
    return ctx.wait_signal("go")


# --- measuring ------------------------------------------------------------------------------
BASELINE_CALLS = 20_000   # plain calls per timing (~2 ms on an idle machine)


def baseline_per_call(n: int) -> float:
    """Seconds per plain call of `step(i)`: the same function called n times in a loop,
    repeated until at least BASELINE_CALLS calls were timed. The best of three such timings,
    so one time slice lost to another process does not skew the ratio it divides."""
    rounds = max(1, -(-BASELINE_CALLS // n))
    gc.collect()
    best = float("inf")
    for _ in range(3):
        t0 = perf_counter()
        for _ in range(rounds):
            for i in range(n):
                step(i)
        best = min(best, perf_counter() - t0)
    return best / (rounds * n)


class Table:
    """Rows of per-repeat samples: (figure, label, unit) -> seconds per unit, and the
    matching per-repeat baselines."""

    def __init__(self):
        self.rows: dict[tuple, dict] = {}

    def add(self, figure: str, label: str, unit: str, seconds: float, base: float | None):
        row = self.rows.setdefault((figure, label, unit), {"values": [], "ratios": []})
        row["values"].append(seconds)
        if base is not None:
            row["ratios"].append(seconds / base)

    def values(self, figure: str, label: str, unit: str) -> list[float]:
        return self.rows[(figure, label, unit)]["values"]


def fmt_time(seconds: float) -> str:
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
        if seconds >= scale or unit == "ns":
            value = seconds / scale
            return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"
    raise AssertionError


def fmt_ratio(x: float) -> str:
    if x >= 1000:
        return f"{x:,.0f}"
    if x >= 100:
        return f"{x:.0f}"
    return f"{x:.3g}"


def spread(samples: list[float], fmt) -> tuple[str, str, str]:
    return fmt(statistics.median(samples)), fmt(min(samples)), fmt(max(samples))


# --- figure 1: replay from a loaded history ------------------------------------------------
def bench_replay(table: Table, tmp: Path, n: int, repeats: int) -> None:
    # Pure replay from memory, without touching the engine's internals beyond reading the
    # loaded run: the run completes once on a file, a fresh Engine opens that file and
    # loads the ended run's history (engine.run() does that: one query, Events built from
    # rows exactly as recovery builds them), and then we call the workflow function from
    # the top with a fresh Cursor + Context on that in-memory history, as Engine._wake
    # does. No SQL runs while timed: engine.crash() + run_until_idle() would also time the
    # crash row's INSERT, the reload queries and the wake-up's telemetry write.
    #
    # Two figures: "first replay after a load" compares each call's arguments by digest
    # (canonical JSON + blake2b; Event.matched_args is None, as it is right after a load or
    # a crash); "warm replay" is every later wake-up of the same run in this process, where
    # the arguments are compared to the ones that matched last time.
    path = tmp / "replay.duckdb"
    with dl.Engine(path, durability="batch") as engine:
        run_id = engine.start(steps, n, run_id="replay")
        engine.run_until_idle()
    engine = dl.Engine(path)
    try:
        assert engine.run(run_id).status == "completed"
        state = engine._runs[run_id]          # read-only: the loaded history lives here
        assert len(state.history) == n

        def replay() -> float:
            gc.collect()
            t0 = perf_counter()
            cursor = h.Cursor(state.history, state.run_id, state.workflow)
            result = steps(Context(engine._port, state, cursor), n)
            ended_early = cursor.expect_end()
            elapsed = perf_counter() - t0
            assert result == n and cursor.replayed == n and ended_early is None
            return elapsed / n

        for _ in range(repeats):
            for event in state.history:
                event.matched_args = None     # as right after a load: digest comparison
            base = baseline_per_call(n)
            table.add("1", "replay, first after a load", "per event", replay(), base)
            base = baseline_per_call(n)
            table.add("1", "replay, warm (later wake-ups)", "per event", replay(), base)
    finally:
        engine.close()


# --- figure 2: loading 10,000 events -------------------------------------------------------
def bench_load(table: Table, tmp: Path, events: int, repeats: int) -> None:
    # One unfinished run holding exactly `events` events (events - 1 activities and a
    # signal wait), written in bulk ("batch" mode commits once per wake-up).
    path = tmp / "load.duckdb"
    with dl.Engine(path, durability="batch") as engine:
        run_id = engine.start(steps_then_wait, events - 1, run_id="load")
        engine.run_until_idle()
    with dl.Engine(path) as engine:
        assert len(engine.run(run_id).history) == events

    for _ in range(repeats):
        # The whole open, as a worker sees it: connect, schema check, latest instant, the
        # ended runs' rows, every unfinished run's rows (6 queries), Events and run states.
        base = baseline_per_call(1000)
        gc.collect()
        t0 = perf_counter()
        engine = dl.Engine(path)
        elapsed = perf_counter() - t0
        engine.close()
        table.add("2", f"Engine(path) open + load, {events:,} events", "per open",
                  elapsed, base)
        table.add("2", "· the same, per event", "per event", elapsed / events, base)

        # Its parts, each on a fresh connection.
        base = baseline_per_call(1000)
        gc.collect()
        t0 = perf_counter()
        con = duckdb.connect(str(path))
        connect = perf_counter() - t0
        con.close()
        table.add("2", "· duckdb.connect(path) alone", "per open", connect, base)

        base = baseline_per_call(1000)
        gc.collect()
        t0 = perf_counter()
        store = Store(path)
        t1 = perf_counter()
        store.latest_instant()
        t2 = perf_counter()
        store.fetch("SELECT * FROM runs")          # as an engine opens: every run's row,
        loaded = store.load("status IN ('running', 'waiting')")   # then the unfinished ones'
        t3 = perf_counter()
        built = [h.Event(*row[1:]) for row in loaded["events"]]
        t4 = perf_counter()
        store.close()
        assert len(built) == events
        table.add("2", "· Store(path): connect + schema check", "per open", t1 - t0, base)
        table.add("2", "· latest_instant() query", "per open", t2 - t1, base)
        table.add("2", "· load queries (6 tables)", "per open", t3 - t2, base)
        table.add("2", "· load queries, per event", "per event", (t3 - t2) / events, base)
        table.add("2", "· Event objects from rows", "per event", (t4 - t3) / events, base)


# --- figure 3: a fresh durable step, per durability mode ----------------------------------
MODES = (("sync", True), ("batch", True), ("exit", True), ("sync", False))


def mode_label(durability: str, on_file: bool) -> str:
    return f"fresh step, {durability}, {'file' if on_file else 'in memory'}"


def time_fresh_run(path, durability: str, n: int) -> tuple[float, float]:
    """(seconds for a fresh n-step run to complete on a new engine, the baseline per call
    measured right before it). Shared with peers.py, so both time the same thing."""
    engine = dl.Engine(path, durability=durability)
    try:
        base = baseline_per_call(n)
        gc.collect()
        t0 = perf_counter()
        run_id = engine.start(steps, n)
        engine.run_until_idle()
        elapsed = perf_counter() - t0
        assert engine.run(run_id).status == "completed"
    finally:
        engine.close()
    return elapsed, base


def bench_fresh(table: Table, tmp: Path, n: int, repeats: int) -> None:
    # Start an n-step run and run it to completion on a new engine (opened before the
    # clock starts, on a new file each time); time per step. Included: every write the mode
    # makes (sync: one INSERT per step; batch/exit: one bulk write), plus the run's start
    # row, its end and the wake-up row, spread over n steps.
    floor_rows = max(20, min(200, n // 5))
    for r in range(repeats):
        for durability, on_file in MODES:
            path = tmp / f"fresh-{durability}-{r}.duckdb" if on_file else None
            elapsed, base = time_fresh_run(path, durability, n)
            table.add("3", mode_label(durability, on_file), "per step", elapsed / n, base)
            if path is not None:
                path.unlink()

        # The floor under sync mode on a file: the one INSERT a durable step costs, straight
        # through the store (same statement, same table), with no engine around it. (An
        # in-memory store queues rows and writes them in bulk, so it has no such floor.)
        path = tmp / f"floor-{r}.duckdb"
        store = Store(path)
        try:
            base = baseline_per_call(n)
            gc.collect()
            t0 = perf_counter()
            for i in range(floor_rows):
                store.insert("event_log", event_row("floor", h.Event(
                    i + 1, "activity", "step", "0" * 16, True, '{"i":0,"ok":true}', 0.0, 1,
                    0.0, "ok", call_site="bench_engine.py:1")))
            elapsed = perf_counter() - t0
        finally:
            store.close()
        table.add("3", "· floor: one INSERT, file", "per row", elapsed / floor_rows, base)
        path.unlink()

        # Why the stored row is narrow: the same event as one INSERT + commit into the
        # 3-column event_log and into a table with a column per fact (schema 2's layout),
        # side by side in one file, straight through DuckDB (no checkpoints in either).
        path = tmp / f"width-{r}.duckdb"
        con = duckdb.connect(str(path))
        try:
            con.execute(f"CREATE TABLE wide ({', '.join(f'{c} {t}' for c, t in WIDE)})")
            con.execute("CREATE TABLE narrow (run_id VARCHAR, position INTEGER, body VARCHAR)")
            event = h.Event(1, "activity", "step", "0" * 16, True, '{"i":0,"ok":true}', 0.0, 1,
                            0.0, "ok", call_site="bench_engine.py:1")
            for name, row in (("narrow", encoded(event_row("w", event))),
                              ("wide", ("w", *(getattr(event, c) for c, _ in WIDE[1:])))):
                sql = f"INSERT INTO {name} VALUES ({', '.join('?' * len(row))})"
                base = baseline_per_call(n)
                gc.collect()
                t0 = perf_counter()
                for i in range(floor_rows):
                    con.execute(sql, row)
                elapsed = perf_counter() - t0
                table.add("3", f"· one INSERT of an event, {len(row)} columns", "per row",
                          elapsed / floor_rows, base)
        finally:
            con.close()
        for p in path.parent.glob(path.name + "*"):
            p.unlink()


# Schema 2's events table: a column per fact of an event.
WIDE = (("run_id", "VARCHAR"), ("position", "INTEGER"), ("kind", "VARCHAR"), ("name", "VARCHAR"),
        ("digest", "VARCHAR"), ("ok", "BOOLEAN"), ("value", "VARCHAR"), ("recorded_at", "DOUBLE"),
        ("attempt", "INTEGER"), ("started_at", "DOUBLE"), ("outcome", "VARCHAR"),
        ("error_class", "VARCHAR"), ("error", "VARCHAR"), ("call_site", "VARCHAR"))


# --- figure 4: cold recovery ---------------------------------------------------------------
def bench_recovery(table: Table, tmp: Path, n: int, repeats: int) -> None:
    # A file whose run has n committed steps and waits on a signal: what a dead worker
    # leaves behind. Each repeat recovers a fresh copy of it (copied outside the clock, so
    # the OS file cache is warm, as for a worker restarted on the same machine), from a new
    # Engine with nothing in memory: open + load + replay of all n steps (digest comparison,
    # as after any load) until the run is back to waiting, including the wake-up row it
    # writes when it goes idle.
    source = tmp / "recover-source.duckdb"
    with dl.Engine(source, durability="batch") as engine:
        run_id = engine.start(steps_then_wait, n, run_id="recover")
        engine.run_until_idle()
    for r in range(repeats):
        path = tmp / f"recover-{r}.duckdb"
        shutil.copyfile(source, path)
        base = baseline_per_call(n)
        gc.collect()
        t0 = perf_counter()
        engine = dl.Engine(path, workflows=[steps_then_wait])
        t1 = perf_counter()
        engine.run_until_idle()
        t2 = perf_counter()
        try:
            run = engine.run(run_id)
            woke = run.wakeups.iloc[-1]
            assert run.status == "waiting" and woke["reason"] == "recovery"
            assert woke["replayed"] == n + 1 and woke["recorded"] == 0
        finally:
            engine.close()
        path.unlink()
        table.add("4", f"recovery of a {n:,}-step run", "per run", t2 - t0, base)
        table.add("4", "· the same, per step", "per step", (t2 - t0) / n, base)
        table.add("4", "· Engine(path): open + load", "per step", (t1 - t0) / n, base)
        table.add("4", "· run_until_idle(): replay to waiting", "per step", (t2 - t1) / n,
                  base)


# --- figure 5: the determinism guard on the wake-up path -----------------------------------
GUARD = {True: "wake-up replay, guard on (default)",
         False: "wake-up replay, Engine(guard=False)"}
WAKES = 20


def bench_guard(table: Table, n: int, repeats: int) -> None:
    # Figure 1 calls the workflow function itself, so it cannot see the guard, which the
    # engine switches on around its own call (durablelab/guard.py). Here: one run of n steps
    # waiting on a signal in each of two in-memory engines, one guarded and one not, woken
    # again and again exactly as a signal or a timer wakes it (Engine._wake: a fresh Context,
    # the workflow from the top through the guard, replay of n steps, the suspend, the
    # wake-up's row). Warm replay (the arguments matched before). Each repeat takes the best
    # of WAKES wake-ups of each, alternating on and off, so both see the same machine and a
    # time slice lost to another process does not decide the ratio.
    engines = {guard: dl.Engine(guard=guard) for guard in GUARD}
    try:
        states = {}
        for guard, engine in engines.items():
            run_id = engine.start(steps_then_wait, n, run_id="guard")
            engine.run_until_idle()
            states[guard] = engine._runs[run_id]
            assert states[guard].status == "waiting" and len(states[guard].history) == n + 1

        def wake(guard: bool) -> float:
            engine, state = engines[guard], states[guard]
            gc.collect()
            t0 = perf_counter()
            engine._wake(state, "signal")
            elapsed = perf_counter() - t0
            row = state.wakeups[-1]
            assert state.status == "waiting" and row[3] == n + 1 and row[4] == 0
            engine._telemetry.clear()
            return elapsed / (n + 1)

        for guard in GUARD:
            wake(guard)               # warm: the arguments have matched once
        for _ in range(repeats):
            base = baseline_per_call(n)
            samples = {False: float("inf"), True: float("inf")}
            for _ in range(WAKES):
                for guard in (False, True):
                    samples[guard] = min(samples[guard], wake(guard))
            for guard in (False, True):
                table.add("5", GUARD[guard], "per event", samples[guard], base)
            table.add("5", "· guard on ÷ guard off", "ratio", samples[True] / samples[False],
                      None)
    finally:
        for engine in engines.values():
            engine.close()


# --- reporting -----------------------------------------------------------------------------
def machine() -> list[str]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    commit = "?"
    try:
        root = Path(__file__).resolve().parent.parent
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                "durablelab"], capture_output=True, text=True, timeout=5)
        if out.returncode == 0:
            commit = out.stdout.strip() + ("+uncommitted" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        load = "load average %.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        load = "load average ?"
    return [f"machine   {platform.platform()}, {os.cpu_count()} CPUs ({cpu}), {load}",
            f"software  python {platform.python_version()}, duckdb {duckdb.__version__}, "
            f"durablelab {dl.__version__} (git {commit})"]


def render(table: Table) -> list[str]:
    header = ("#", "measurement", "unit", "median", "min", "max", "× baseline [min–max]")
    lines = []
    for (figure, label, unit), row in table.rows.items():
        ratios = row["ratios"]
        ratio = (f"{fmt_ratio(statistics.median(ratios))}  "
                 f"[{fmt_ratio(min(ratios))}–{fmt_ratio(max(ratios))}]") if ratios else ""
        fmt = fmt_time if unit != "ratio" else (lambda x: f"{x:.3f}")
        lines.append((figure, label, unit, *spread(row["values"], fmt), ratio))
    widths = [max(len(str(x[i])) for x in [header, *lines]) for i in range(len(header))]
    align = ("<", "<", "<", ">", ">", ">", "<")
    out = ["  ".join(f"{c:{a}{w}}" for c, a, w in zip(header, align, widths))]
    out.append("  ".join("-" * w for w in widths))
    previous = None
    for line in lines:
        if previous is not None and line[0] != previous:
            out.append("")
        previous = line[0]
        out.append("  ".join(f"{c:{a}{w}}" for c, a, w in zip(line, align, widths)).rstrip())
    return out


def relative_to_sync(table: Table) -> list[str]:
    sync = table.values("3", mode_label("sync", True), "per step")
    out = ["fresh step relative to sync on a file (per-repeat ratios, median [min–max]):"]
    for durability, on_file in MODES[1:]:
        other = table.values("3", mode_label(durability, on_file), "per step")
        ratios = [o / s for o, s in zip(other, sync)]
        out.append(f"  {durability + (' on a file' if on_file else ' in memory'):<15}"
                   f"{statistics.median(ratios):8.3f} × sync  "
                   f"[{min(ratios):.3f}–{max(ratios):.3f}]")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and 1 repeat (CI smoke run; a few seconds)")
    parser.add_argument("--steps", type=int, help="N, steps per workflow (default 1000)")
    parser.add_argument("--events", type=int, help="events to load in figure 2 (10000)")
    parser.add_argument("--repeats", type=int, help="repeats per measurement (7)")
    args = parser.parse_args(argv)
    n = args.steps or (50 if args.quick else 1000)
    events = args.events or (1000 if args.quick else 10_000)
    repeats = args.repeats or (1 if args.quick else 7)
    if n < 1 or events < 2 or repeats < 1:
        parser.error("--steps >= 1, --events >= 2, --repeats >= 1")

    print("durablelab engine benchmark" + (" (--quick)" if args.quick else ""))
    for line in machine():
        print(line)
    print(f"sizes     N={n:,} steps per workflow, {events:,} events loaded, "
          f"{repeats} repeat{'s' if repeats > 1 else ''}; baseline: one plain call of step(i), measured before each "
          f"sample", flush=True)

    started = perf_counter()
    table = Table()
    with tempfile.TemporaryDirectory(prefix="durablelab-bench-") as tmp:
        tmp = Path(tmp)
        for _ in range(repeats):
            table.add("0", "plain call step(i) (baseline)", "per call",
                      baseline_per_call(n), None)
        bench_replay(table, tmp, n, repeats)
        bench_load(table, tmp, events, repeats)
        bench_fresh(table, tmp, n, repeats)
        bench_recovery(table, tmp, n, repeats)
        bench_guard(table, n, repeats)
    base = table.rows[("0", "plain call step(i) (baseline)", "per call")]
    base["ratios"] = [1.0] * len(base["values"])

    print()
    for line in render(table):
        print(line)
    print()
    for line in relative_to_sync(table):
        print(line)
    print(f"\ntook {perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
