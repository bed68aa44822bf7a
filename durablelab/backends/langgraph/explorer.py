"""Crash exploration for a LangGraph graph: `dl.explore_crashes`, recovering as a user would.

Each row runs the graph in process over its own SQLite file. The worker "dies" at a crash
point: LangGraph sees an exception it cannot catch (a BaseException), and `_Saver`, the
checkpointer, saves nothing more, as after kill -9 (a real kill leaves no ``__error__``
write, which an in-process exception would). Recovery is what a user would do: a freshly
built graph over the same file calls ``invoke(None, config)``.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import pandas as pd
from langgraph.checkpoint.sqlite import SqliteSaver

from ...activities import WorkerCrash
from ...errors import BadValue, bad_type, bad_value
from ...faults import FaultPlan
from .injector import OBSERVED_NOTE, _Tracker, exploring

class _Saver(SqliteSaver):
    """A SqliteSaver that dies with its worker: after a crash it saves nothing more (a
    process killed mid-step writes nothing, and leaves no ``__error__`` write), and after
    it saves a task's writes, that task's ``after_record`` point is reached."""

    def __init__(self, conn, tracker: _Tracker):
        super().__init__(conn)
        self._tracker, self._life = tracker, tracker.life

    def _alive(self) -> bool:
        return not self._tracker.dead and self._tracker.life == self._life

    def put(self, config, checkpoint, metadata, new_versions):
        if not self._alive():
            conf = config["configurable"]
            return {"configurable": {"thread_id": conf["thread_id"],
                                     "checkpoint_ns": conf.get("checkpoint_ns", ""),
                                     "checkpoint_id": checkpoint["id"]}}
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config, writes, task_id, task_path=""):
        if not self._alive():
            return
        super().put_writes(config, writes, task_id, task_path)
        self._tracker.saved(task_id)


LOST = ("LangGraph saved nothing for this thread before the crash (durability='exit' saves "
        "only when the graph ends), so invoke(None, config) found nothing to resume: the run "
        "is lost. Starting it again with its input repeats every effect it had made.")


def _life(build, saver, world, payload, config, durability):
    """One worker's life: build the graph over `saver` and invoke it. Returns the error the
    graph raised (None if it ended or the worker died)."""
    params = [p for p in inspect.signature(build).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    graph = build(saver, world) if len(params) >= 2 else build(saver)
    if not hasattr(graph, "invoke"):
        raise bad_type("langgraph.explore_crashes", "build",
                       f"build(checkpointer) returned {graph!r}, not a compiled graph: return "
                       f"graph.compile(checkpointer=checkpointer) (or an @entrypoint "
                       f"built with it)")
    try:
        graph.invoke(payload, config, durability=durability)
    except WorkerCrash:
        return None
    except Exception as exc:    # the graph failed: LangGraph recorded it (or lost the run)
        return exc
    return None


def _row(build, input, invariant, world, durability, folder, run_id, rule):
    """(Run, holds, why not, crashes fired, tracker) of one run: until the graph ends or
    fails, a crash is followed by a fresh worker resuming the thread."""
    from ...clock import WallClock
    from ...importers.langgraph import read
    from ...lab.crashes import _check
    tracker = _Tracker(plan=FaultPlan([rule]) if rule is not None else None, exploring=True)
    here = world(WallClock()) if world is not None else None
    path = Path(folder) / f"{len(os.listdir(folder))}.sqlite"
    config = {"configurable": {"thread_id": run_id}}
    payload, error, began = input, None, time.time()
    with exploring(tracker):
        for _ in range(4):       # a crash rule fires once: one recovery is enough, and a
            con = sqlite3.connect(path, check_same_thread=False)   # bug cannot loop
            try:
                error = _life(build, _Saver(con, tracker), here, payload, config, durability)
            finally:
                con.close()
            if not tracker.dead:
                break
            tracker.recover()
            payload = None
    run, _ = read(path, run_id, missing_ok=True, origin=began)
    if run is None:         # nothing saved: durability="exit" and a crash
        run = _lost(run_id, LOST if error is not None else "nothing was saved")
    attempts, crashes = tracker.frames(began, run_id)
    run = dataclasses.replace(run, attempts=attempts, crashes=crashes,
                              notes=run.notes + (OBSERVED_NOTE,))
    holds, why = _check(invariant, run, here)
    return run, holds, why, len(tracker.crashes), tracker


def _lost(run_id: str, message: str):
    from ...errors import WorkflowError
    from ...run import ATTEMPT_COLUMNS, CRASH_COLUMNS, HISTORY_COLUMNS, WAKEUP_COLUMNS, Run
    return Run(run_id=run_id, workflow="graph", status="failed", input=None, result=None,
               error=WorkflowError(message, run_id=run_id, cause_class="EmptyInputError"),
               seed=0, started_at=0.0, ended_at=None, parent_run_id=None,
               history=pd.DataFrame([], columns=HISTORY_COLUMNS),
               attempts=pd.DataFrame([], columns=ATTEMPT_COLUMNS),
               wakeups=pd.DataFrame([], columns=WAKEUP_COLUMNS),
               crashes=pd.DataFrame([], columns=CRASH_COLUMNS), source="langgraph",
               notes=(message,))


def explore_crashes(build: Callable, input: Any, invariant: Callable, world=None,
                    durability: str = "sync"):
    """Crash a LangGraph graph at every point its wrapped units can die, recover it as a
    user would, and check `invariant` after each run: `dl.explore_crashes` for LangGraph.

    First a crash-free baseline; the units its injectors met (`faults(...).wrap` and
    ``.call``) give the crash points: each unit's ``before_activity`` and ``after_effect``,
    and, for a node or @task whose writes LangGraph saved, ``after_record``. Then one run
    per point, each with a fresh world and a fresh SQLite file: the worker dies there (in
    process: LangGraph sees an exception it cannot catch, and the checkpointer saves
    nothing more, as after kill -9), then a freshly built graph over the same file calls
    ``invoke(None, config)``. A row's `Run` is `dl.from_langgraph` of the file, with the
    attempts and crashes the injectors saw. The rows show the graph API running a whole
    node again (its earlier calls repeat), the functional API running only the unfinished
    @task, and ``durability="exit"`` losing the run.

    Args:
        build: ``build(checkpointer)`` (or ``build(checkpointer, world)``) returning the
            compiled graph; called again for each recovery, as a new process would.
        input: the graph's input.
        invariant: ``invariant(run, world)``, True/None when it holds, False or an
            AssertionError when not.
        world: a factory ``world(clock)`` (a `dl.WallClock`) of the world the graph acts
            on, fresh for each run; the invariant gets it. None: no world.
        durability: LangGraph's ``"sync"``, ``"async"`` or ``"exit"``.

    Returns a `dl.CrashReport`. Nodes that run in parallel in one super-step take
    positions in the order they start, which can vary between runs.
    """
    from ...lab.crashes import COLUMNS, CrashPoint, CrashReport
    for name, value in (("build", build), ("invariant", invariant)):
        if not callable(value):
            raise bad_type("langgraph.explore_crashes", name, f"{name}={value!r} is not "
                           f"callable: give build(checkpointer) -> compiled graph and "
                           f"invariant(run, world) -> bool")
    if world is not None and not callable(world):
        raise bad_type("langgraph.explore_crashes", "world", f"world={world!r} is a factory "
                       f"world(clock) returning the world, or None")
    if durability not in ("sync", "async", "exit"):
        raise bad_value("langgraph.explore_crashes", "durability", f"durability="
                        f"{durability!r} is not one of LangGraph's: 'sync', 'async', 'exit'")
    rows = []

    def add(point, run, holds, why, fired):
        if point is not None and not fired:
            why = why or f"did not fire ({point.label()}): the run never reached that point"
        rows.append((point.position if point else None, point.activity if point else None,
                     point.point if point else "none", None, None, None,
                     bool(point) and fired > 0, holds, run.status, why, run.run_id,
                     None if holds else run))

    with tempfile.TemporaryDirectory(prefix="durablelab-langgraph-") as folder:
        baseline, holds, why, _, tracker = _row(build, input, invariant, world, durability,
                                                folder, "baseline", None)
        add(None, baseline, holds, why, 0)
        kinds = {u.position: u.task is not None for u in tracker.units}
        points = []
        for position, name in sorted({(u.position, u.name) for u in tracker.units}):
            points += [CrashPoint(position, name, p) for p in ("before_activity",
                                                               "after_effect")]
            if kinds[position] and position in tracker.recorded:
                points.append(CrashPoint(position, name, "after_record"))
        if not points:
            raise BadValue("langgraph.explore_crashes: the graph ran no unit that an injector "
                           "wraps, so there is nowhere to crash. Wrap its nodes or @task "
                           "functions with durablelab.backends.langgraph.faults().wrap(fn), "
                           "or calls inside a node with .call(name, fn, ...)")
        for point in points:
            run, holds, why, fired, _ = _row(build, input, invariant, world, durability,
                                             folder, point.label(), point.rule())
            add(point, run, holds, why, fired)
    frame = pd.DataFrame(rows, columns=COLUMNS).astype(
        {"position": "Int64", "position2": "Int64", "fired": bool, "holds": bool})
    name = getattr(build, "__name__", "graph")
    return CrashReport(f"{name} (LangGraph)", durability, frame, baseline, points)


__all__ = ["explore_crashes"]
