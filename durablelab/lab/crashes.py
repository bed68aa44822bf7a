"""Crash exploration: kill the worker at every point it can die, and check what still holds.

This is deterministic simulation testing in the small. FoundationDB, TigerBeetle and
Antithesis test a distributed system by running it inside a simulator whose clock, network
and disks they own, injecting every fault they can think of, and checking invariants after
each run; because the simulation is deterministic, a failure found once is found again.
durablelab already owns the clock (virtual time), the disk (the DuckDB store) and the faults
(a `FaultPlan`), so the same idea fits in a few lines of a notebook:

1. run the workflow once without any crash (the *baseline*) and check the invariant;
2. read the crash points the fault model knows off the baseline's history: an activity at
   position *p* can die ``before_activity``, ``after_effect`` (its effect happened, its
   record did not) or ``after_record``; a timer, a signal wait or a retry backoff at *p* can
   die ``during_wait``;
3. for each point (with ``pairs=True``, each pair of points too) run the workflow again in a
   fresh engine with a fresh world and a plan of ``Crash(name, point=..., position=p,
   times=1)`` rules, let it recover, and check the invariant again.

Every run is serial, in-process and on a virtual clock, so exploring every single and
double crash of the onboarding workflow takes seconds, and the same code, input and world
give the same report every time. A row whose crash did not fire (the run took another path,
or a signal that had already arrived meant no wait) says so in ``fired``: a point that was
never reached has proved nothing.

What breaks is the lesson. Without idempotency keys, the ``after_effect`` points of the
activities that change the world break "each effect exactly once" and nothing else does:
that is the crash window keys exist for. In ``batch`` or ``exit`` durability more points
break, because a crash loses what was done but not yet committed, and it is done again.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable

import pandas as pd

from ..faults import CRASH_POINTS, Crash, FaultPlan
from ..run import Run
from ..errors import BadType, BadValue

COLUMNS = ["position", "activity", "point", "position2", "activity2", "point2", "fired",
           "holds", "status", "detail", "run_id", "run"]

#: history kinds at which the worker can die during a wait (see `faults.CRASH_POINTS`).
WAIT_KINDS = ("sleep", "wait_signal")


@dataclass(frozen=True)
class CrashPoint:
    """One place the worker can die: the history position, the name a `Crash` rule matches
    there (the activity, ``"sleep"`` or the signal's name) and the point."""

    position: int
    activity: str
    point: str

    def rule(self) -> Crash:
        return Crash(self.activity, point=self.point, position=self.position, times=1)

    def label(self) -> str:
        return f"p{self.position}-{self.point}"


def crash_points(run) -> list[CrashPoint]:
    """The crash points a run passed, in the order it passed them, read off its history
    (and its retried attempts, whose backoffs are waits too)."""
    found = []
    retried = set()
    if len(run.attempts):
        failed = run.attempts[run.attempts.outcome != "ok"]
        retried = set(zip(failed.position.astype(int), failed.activity))
    for event in run.history.itertuples():
        position = int(event.position)
        handle = getattr(event, "handle", None)
        if handle is not None and not pd.isna(handle):   # a started activity's end: its
            position = int(handle)                         # points are its start's position
        if event.kind == "activity":
            found += [CrashPoint(position, event.name, p) for p in CRASH_POINTS[:3]]
            if (position, event.name) in retried:
                found.append(CrashPoint(position, event.name, "during_wait"))
        elif event.kind == "start_child":   # either side of the child run's start
            found += [CrashPoint(position, event.name, p) for p in CRASH_POINTS[:2]]
        elif event.kind in WAIT_KINDS:
            found.append(CrashPoint(position, event.name, "during_wait"))
    return found


@dataclass
class CrashReport:
    """What `explore_crashes` found: a row per run, the baseline first.

    `frame` columns: ``position, activity, point`` (the crash; ``point`` is ``"none"`` for
    the baseline), ``position2, activity2, point2`` (the second crash of a pair, else
    None), ``fired`` (every crash of the row really happened; False for the baseline), ``holds`` (the invariant
    held after the run), ``status`` (the run's), ``detail`` (why the invariant failed, or
    why a crash did not fire), ``run_id``, and ``run``: the `Run` of a broken row (None
    elsewhere, to keep the report small), so ``report.timeline(i)`` can draw it.
    """

    workflow: str
    durability: str
    frame: pd.DataFrame
    baseline: Any
    points: list = field(default_factory=list)

    @property
    def broken(self) -> pd.DataFrame:
        """The rows where the invariant does not hold."""
        return self.frame[~self.frame.holds]

    @property
    def ok(self) -> bool:
        """True when the invariant held after every run, the baseline included."""
        return bool(self.frame.holds.all())

    def timeline(self, row=None):
        """The timeline Figure of a broken row (its index in `frame`; default: the first
        broken row)."""
        broken = self.broken
        if row is None:
            if broken.empty:
                raise BadValue("CrashReport.timeline(): no row is broken, so no run was "
                                 "kept; every crash point held")
            row = broken.index[0]
        run = self.frame.loc[row, "run"]
        if run is None:
            raise BadValue(f"CrashReport.timeline({row!r}): row {row} holds, so its run "
                             f"was not kept; pass the index of a row in report.broken")
        return run.timeline(title=f"{self.frame.loc[row, 'run_id']}: "
                                  f"{self.frame.loc[row, 'detail']}")

    def plot(self, **options):
        """A map of the single crash points: positions down, points across, each cell
        held, broken, or did not fire. See `durablelab.viz.crash_map`."""
        from ..viz.crashes import crash_map
        return crash_map(self, **options)

    def __str__(self) -> str:
        crashed = self.frame[self.frame.point != "none"]
        lines = [f"explore_crashes({self.workflow}, durability={self.durability!r}): "
                 f"{len(crashed)} crash runs over {len(self.points)} crash points, "
                 f"{int(crashed.fired.sum())} fired, {len(self.broken)} broken"]
        for row in self.broken.itertuples():
            where = "baseline (no crash)" if row.point == "none" else (
                f"p{row.position} {row.activity} {row.point}" + (
                    f" + p{row.position2} {row.activity2} {row.point2}"
                    if isinstance(row.point2, str) else ""))
            lines.append(f"  broken: {where}: {row.detail}")
        return "\n".join(lines)

    __repr__ = __str__


def _check(invariant, run, world) -> tuple[bool, str]:
    """(holds, why not). False or an AssertionError's message is a failure; so is any other
    exception, named, since an invariant that cannot be evaluated has not held."""
    try:
        verdict = invariant(run, world)
    except AssertionError as exc:
        return False, str(exc) or "assertion failed"
    except Exception as exc:
        return False, f"the invariant raised {type(exc).__name__}: {exc}"
    if verdict is False:
        return False, "the invariant returned False"
    return True, ""


class _RunView:
    """What the invariant gets: a `Run` whose frames are built only when read.

    Building a Run's DataFrames costs more than a short run itself, and most invariants
    read only ``status`` and ``result`` (and the world); so those come straight from the
    run's `Engine.snapshot`, and ``history``, ``attempts``, ``crashes``, ``timeline()`` and
    the rest from the `Run` built from that snapshot on first use."""

    def __init__(self, engine, run_id: str):
        snapshot = self._snapshot = engine.snapshot(run_id)
        self._full = None
        self.run_id, self.workflow, self.status = run_id, snapshot.workflow, snapshot.status
        self.result, self.input = snapshot.result, snapshot.input
        self.error, self.seed = snapshot.error, snapshot.seed
        self.started_at, self.ended_at = snapshot.started_at, snapshot.ended_at
        self.crashes_fired = len(snapshot.crash_faults)

    def full(self):
        """The `Run` itself (built once)."""
        if self._full is None:
            self._full = Run.from_snapshot(self._snapshot)
        return self._full

    def __getattr__(self, name):     # history, attempts, wakeups, crashes, timeline, ...
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.full(), name)

    def __repr__(self) -> str:
        return repr(self.full())


class _Runner:
    """Runs the rows one after another. Opening an in-memory engine costs far more than a
    short run (its DuckDB schema), so the rows share one engine, emptied after each row
    whose run ended (as the sweep's isolated runs are): a crash then reloads only the row's
    own run, as a fresh worker would, and nothing else (without emptying, every recovery
    read every earlier row's run again, so a row cost more the more rows came before it). The
    world the row's code reaches (``engine.world``) is the row's own. A row whose run does
    not end (it hangs, or waits for a signal that never comes) gets the next rows a new
    engine, so nothing of it can run again in a later row's crash recovery; so does a row
    that left circuit-breaker state behind (breakers are shared by every run of an engine,
    and one row's failures must not open the next row's breaker; a new engine also starts
    the next row's clock at 0, as the breaker's time windows expect)."""

    def __init__(self, workflow, input, invariant, world, durability, signals):
        self.workflow, self.input, self.invariant = workflow, input, invariant
        self.world, self.durability, self.signals = world, durability, signals
        self.engine = None

    def run(self, run_id: str, rules: list, keep: bool = False):
        """(run, holds, why not, crashes that fired) for one row; the `Run` itself when
        `keep` or when the invariant broke, else a view that keeps only status and result."""
        from ..engine import Engine
        from ..runstate import FINAL
        if self.engine is None:
            self.engine = Engine(durability=self.durability)
        engine = self.engine
        here = self.world(engine.clock) if self.world is not None else None
        engine.world = here
        engine.start(self.workflow, self.input, run_id=run_id,
                     faults=FaultPlan(rules) if rules else None)
        for i, (name, value) in enumerate(self.signals):
            engine.signal(run_id, name, value, signal_id=f"explore-{i}")
        engine.run_until_idle()
        view = _RunView(engine, run_id)
        holds, why = _check(self.invariant, view, here)
        run = view if holds and not keep else view.full()    # a broken row keeps its Run
        if view.status not in FINAL or engine.breakers:
            run = view.full()
            self.close()
        else:
            engine.forget()
        return run, holds, why, view.crashes_fired

    def close(self):
        if self.engine is not None:
            self.engine.close()
            self.engine = None


def explore_crashes(workflow: Callable, input: Any, invariant: Callable, world=None,
                    pairs: bool = False, durability: str = "sync", signals=None) -> CrashReport:
    """Crash the worker at every point the fault model knows, one run per point, and check
    `invariant` after each: deterministic simulation testing in the small.

    Runs are serial and in-process. The first is a crash-free baseline; its history gives
    the crash points (each activity's ``before_activity``, ``after_effect`` and
    ``after_record``, each child run's start's ``before_activity`` and ``after_effect``, each
    wait's and each retry backoff's ``during_wait``). Then one run per
    point, and with ``pairs=True`` also one per pair of points (both crashes in one run,
    each firing once), each with a fresh world, in an in-memory `Engine` where no other run
    is left unfinished, so no run sees another's effects.

    Args:
        workflow, input: what to run, as for `Engine.start` (seed 0, fixed run ids, so the
            report is the same every time).
        invariant: ``invariant(run, world)`` after each run, the baseline included: return
            True or None when it holds, False (or raise AssertionError with a message) when
            it does not, e.g. ``assert world.erp.duplicate_effects == 0``.
        world: a factory ``world(clock)`` returning the simulated world a run's workflow code
            reaches as ``ctx.world``; called once per run. None: no world.
        pairs: also crash at every pair of points (the double crashes).
        durability: the engine's mode: "sync", "batch" or "exit".
        signals: signals to send each run right after it starts, ``{name: value}`` or a list
            of ``(name, value)``: an approval that arrives early is buffered, so the run
            goes through without waiting.

    Returns a `CrashReport`: ``report.frame`` a row per run, ``report.broken`` the rows
    where the invariant failed (each with its `Run`, for ``report.timeline(i)``).
    """
    if not callable(invariant):
        raise BadType(f"explore_crashes(invariant={invariant!r}): the invariant is a "
                        f"function invariant(run, world) -> bool")
    if world is not None and not callable(world):
        raise BadType(f"explore_crashes(world={world!r}): world is a factory world(clock) "
                        f"returning the simulated world, or None")
    if isinstance(signals, dict):
        signals = list(signals.items())
    signals = list(signals or ())

    from ..registry import workflow_name
    name = workflow_name(workflow)
    rows = []

    def add(points, run, holds, why, fired):
        first = points[0] if points else None
        second = points[1] if len(points) > 1 else None
        if points and fired < len(points):
            labels = " + ".join(p.label() for p in points)
            why = why or (f"did not fire ({labels}): the run never reached that point"
                          if len(points) == 1 else f"only {fired} of {len(points)} crashes "
                          f"fired ({labels}): the run never reached the other point")
        rows.append((first.position if first else None, first.activity if first else None,
                     first.point if first else "none",
                     second.position if second else None, second.activity if second else None,
                     second.point if second else None,
                     bool(points) and fired == len(points), holds, run.status, why,
                     run.run_id,
                     None if holds else run))

    runner = _Runner(workflow, input, invariant, world, durability, signals)
    try:
        baseline, holds, why, _ = runner.run("baseline", [], keep=True)
        add([], baseline, holds, why, 0)
        points = crash_points(baseline)
        combos = [(p,) for p in points]
        if pairs:
            combos += list(itertools.combinations(points, 2))
        for combo in combos:
            run, holds, why, fired = runner.run("+".join(p.label() for p in combo),
                                                [p.rule() for p in combo])
            add(list(combo), run, holds, why, fired)
    finally:
        runner.close()
    frame = pd.DataFrame(rows, columns=COLUMNS).astype(
        {"position": "Int64", "position2": "Int64", "fired": bool, "holds": bool})
    return CrashReport(name, durability, frame, baseline, points)


__all__ = ["explore_crashes", "CrashReport", "CrashPoint", "crash_points"]
