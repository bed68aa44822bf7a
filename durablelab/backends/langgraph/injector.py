"""The injector: a fault plan applied to LangGraph's units, and `retry_on`.

LangGraph has no activities; its units are nodes, ``@task`` calls, and whatever a node calls.
`faults(plan)` returns an `Injector` whose ``wrap`` and ``call`` make each of them a unit a
`dl.FaultPlan` can name. Positions and attempts follow the engine's meaning: the same
LangGraph task run again (its RetryPolicy, or a recovery after a crash) keeps its position
and takes the next attempt, so a plan and a seed fail the same attempts here as on
`dl.Engine`. `_Tracker` holds what one run went through; `explore_crashes` (explorer.py)
shares one between every injector of a row.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import os
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable

import pandas as pd

from ...activities import WorkerCrash, outcome_of
from ...draws import Draws, first
from ...errors import Transient, bad_type, bad_value, check_seed
from ...faults import Crash, FaultPlan, Hang, Latency, Malformed, Timeout, draw_key
from ...retry import classify

#: rules that need durablelab's virtual clock; LangGraph runs on the wall clock.
TIMING_RULES = (Latency, Timeout, Hang)
OBSERVED_NOTE = (
    "Attempts and crashes: seen by durablelab's injector, not recorded by LangGraph; their "
    "positions count wrapped units (nodes, tasks, calls) in the order first called.")


# --- what one run went through, as the injector saw it --------------------------------

@dataclass
class _Unit:
    """One attempt of a wrapped unit: a node, a @task call, or a call inside a node."""
    name: str
    position: int
    attempt: int
    task: str | None
    thread: str | None
    started_at: float
    plans: tuple = ()
    ended_at: float | None = None
    outcome: str = "in_flight"
    error_class: str | None = None
    error: str | None = None


@dataclass
class _Tracker:
    """Positions, attempts, firings and crashes of one run. An injector keeps its own; under
    `explore_crashes` every injector shares the row's, which outlives the crashes (as fault
    firings are facts about the world, not the worker)."""
    plan: FaultPlan | None = None        # the explorer's crash rule for this row
    exploring: bool = False
    positions: dict = field(default_factory=dict)
    tries: dict = field(default_factory=dict)
    calls: dict = field(default_factory=dict)      # task -> {name: calls so far}
    node_attempts: dict = field(default_factory=dict)
    task_units: dict = field(default_factory=dict)  # LangGraph task id -> its _Unit
    recorded: set = field(default_factory=set)      # positions whose writes were saved
    fired: list = field(default_factory=list)       # (plan key, rule, position, attempt)
    units: list = field(default_factory=list)
    crashes: list = field(default_factory=list)
    met: set = field(default_factory=set)
    dead: bool = False
    life: int = 0
    lock: threading.RLock = field(default_factory=threading.RLock)
    # task id -> set once LangGraph saved the writes of a unit that may crash after_record
    unsaved: dict = field(default_factory=dict)

    def enter(self, name: str, kind: str, plans: tuple) -> _Unit:
        """A new attempt of unit `name`: its position is that of the same unit before (the
        same LangGraph task retried or run again after a crash), else the next one."""
        conf = _configurable()
        task, thread = _task_id(conf), conf.get("thread_id")
        attempt_now = _node_attempt(conf)
        # LangGraph saves a task's writes on a background thread while the next task may
        # already start: a crash right after the save must come first, as in a real crash
        # timed there, or the explorer's rows would change from one run to the next.
        for event in list(self.unsaved.values()):
            event.wait(timeout=5.0)
        with self.lock:
            if self.dead:     # a dead worker runs nothing more
                raise WorkerCrash("the worker died earlier in this run")
            if kind == "unit":
                if task is not None:
                    identity = ("unit", task, name)
                    self.calls[task], self.node_attempts[task] = {}, attempt_now
                else:         # called outside a graph: each call its own unit
                    identity = ("unit", None, name, len(self.positions))
            else:
                if self.node_attempts.get(task) != attempt_now:  # LangGraph retried the node
                    self.calls[task], self.node_attempts[task] = {}, attempt_now
                counts = self.calls.setdefault(task, {})
                counts[name] = counts.get(name, 0) + 1
                identity = ("call", task, name, counts[name])
            position = self.positions.setdefault(identity, len(self.positions) + 1)
            attempt = self.tries[identity] = self.tries.get(identity, 0) + 1
            unit = _Unit(name, position, attempt, task if kind == "unit" else None, thread,
                         time.time(), plans)
            if unit.task is not None:
                self.task_units[unit.task] = unit
            self.met.add(name)
            self.units.append(unit)
            return unit

    def end(self, unit: _Unit, error: BaseException | None, outcome: str | None = None):
        unit.ended_at = time.time()
        if error is None:
            unit.outcome = outcome or "ok"
            if unit.task is not None and outcome is None and any(
                    plan.applicable(unit.name, unit.attempt, "after_record", unit.position)
                    for _, plan, _ in unit.plans):
                self.unsaved[unit.task] = threading.Event()
        else:
            classified = classify(error) if isinstance(error, Exception) else None
            unit.outcome = outcome or (outcome_of(classified) if classified else "crashed")
            unit.error_class = type(error).__name__ if classified is None else \
                classified.error_class
            unit.error = str(error)

    def fires(self, key: str, plan: FaultPlan, seed: int, index: int, rule, unit: _Unit):
        """The rule's draws if it fires on this attempt, else None: as the engine decides
        (`faults.draw`; ``times=`` over the run; a crash once per position and attempt)."""
        with self.lock:
            crash = isinstance(rule, Crash)
            if rule.times is not None or crash:
                rows = [f for f in self.fired if f[0] == key and f[1] == index]
                if rule.times is not None and len(rows) >= rule.times:
                    return None
                if crash and any(f[2:] == (unit.position, unit.attempt) for f in rows):
                    return None
            drawn = draw_key(seed, index, unit.position, unit.attempt,
                             (unit.thread or "") if plan.per_run else None)
            if first(drawn) >= rule.p:
                return None
            self.fired.append((key, index, unit.position, unit.attempt))
            return Draws(drawn, drawn=1)

    def crash_point(self, unit: _Unit, point: str) -> None:
        """Die at `point` if a crash rule of the unit's plans fires there."""
        for key, plan, seed in unit.plans:
            for index, rule in plan.applicable(unit.name, unit.attempt, point, unit.position):
                if self.fires(key, plan, seed, index, rule, unit) is not None:
                    self.die(unit, point, f"Crash rule {index} ({rule.activity!r} at {point})")

    def die(self, unit: _Unit, point: str, cause: str) -> None:
        with self.lock:
            self.crashes.append((time.time(), unit.thread, unit.position, point, cause))
            for lost in self.units:    # this one, the node around it, any beside it
                if lost.outcome == "in_flight":
                    self.end(lost, None, "crashed")
                    lost.error = f"worker crashed at {point} of {unit.name!r}"
            if not self.exploring:     # a real crash: the process ends as kill -9 ends it
                sys.stderr.write(f"durablelab: {cause} fired at {unit.name!r} (position "
                                 f"{unit.position}): ending this process (exit status 137)\n")
                sys.stderr.flush()
                os._exit(137)
            self.dead = True
        if point != "after_record":
            raise WorkerCrash(cause)

    def saved(self, task_id: str) -> None:
        """LangGraph saved the writes of task `task_id`: its ``after_record`` point. The
        checkpointer's thread only marks the worker dead; the next unit or write stops."""
        try:
            with self.lock:
                unit = self.task_units.get(task_id)
                if unit is None or self.dead:
                    return
                self.recorded.add(unit.position)
            self.crash_point(unit, "after_record")
        finally:
            waiting = self.unsaved.pop(task_id, None)
            if waiting is not None:
                waiting.set()

    def recover(self) -> None:
        """A fresh worker: nothing of the dead one's memory (calls counted inside a node)."""
        with self.lock:
            self.dead, self.life = False, self.life + 1
            for event in self.unsaved.values():    # the dead worker saves nothing more
                event.set()
            self.unsaved.clear()
            self.calls.clear()
            self.node_attempts.clear()

    def frames(self, origin: float, run_id: str,
               thread: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(attempts, crashes) as `Run` frames, times in seconds since `origin`; only those
        of LangGraph thread `thread` when it is given."""
        from ...run import ATTEMPT_COLUMNS, CRASH_COLUMNS
        at = lambda t: None if t is None else round(t - origin, 6)   # noqa: E731
        attempts = pd.DataFrame(
            [(u.position, u.name, u.attempt, at(u.started_at), at(u.ended_at), u.outcome,
              u.error_class, u.error, None, None) for u in self.units
             if thread is None or u.thread == thread],
            columns=ATTEMPT_COLUMNS).sort_values(["position", "attempt"], kind="stable")
        crashes = pd.DataFrame([(at(t), run_id, p, point, cause)
                                for t, where, p, point, cause in self.crashes
                                if thread is None or where == thread],
                               columns=CRASH_COLUMNS)
        return (attempts.reset_index(drop=True).astype({"attempt": "Int64",
                                                        "max_attempts": "Int64"}), crashes)


_exploring: _Tracker | None = None    # set by explore_crashes for one row at a time


@contextmanager
def exploring(tracker: _Tracker):
    """Every injector applies `tracker`'s plan and counts in it, for one explorer row."""
    global _exploring
    _exploring = tracker
    try:
        yield tracker
    finally:
        _exploring = None


def _configurable() -> dict:
    try:
        from langgraph.config import get_config
        return get_config().get("configurable", {})
    except RuntimeError:          # not inside a graph
        return {}


def _task_id(conf: dict) -> str | None:
    """The running LangGraph task's id: the last part of its checkpoint namespace
    ('agent:<id>', or 'workflow:<id>|charge:<id>' for an @task)."""
    ns = conf.get("checkpoint_ns") or ""
    return ns.rpartition("|")[2].rpartition(":")[2] or None


def _node_attempt(conf: dict) -> int | None:
    """LangGraph's own attempt number of the running node (its RetryPolicy's), if kept."""
    runtime = conf.get("__pregel_runtime")
    return getattr(getattr(runtime, "execution_info", None), "node_attempt", None)


# --- the injector ---------------------------------------------------------------------------

class Injector:
    """Applies a fault plan to LangGraph's units; made by `faults`.

    Positions count units in the order they are first called (a node, a @task call, a call
    inside a node); the same LangGraph task run again, by its RetryPolicy or after a crash,
    keeps its position and takes the next attempt number, as an activity does on the
    engine. `attempts` and `crashes` are what the injector saw; LangGraph records neither.
    """

    def __init__(self, plan: FaultPlan, seed: int):
        self.plan, self.seed = plan, seed
        self._key = plan.to_json()
        self._own = _Tracker()

    def _tracker(self) -> _Tracker:
        return _exploring if _exploring is not None else self._own

    def _plans(self, tracker: _Tracker) -> tuple:
        plans = ((self._key, self.plan, self.seed),) if len(self.plan) else ()
        if tracker.plan is not None:
            plans += (("explore", tracker.plan, 0),)
        return plans

    def _start(self, name: str, kind: str):
        tracker = self._tracker()
        unit = tracker.enter(name, kind, self._plans(tracker))
        tracker.crash_point(unit, "before_activity")
        for key, plan, seed in unit.plans:
            for index, rule in plan.applicable(name, unit.attempt, position=unit.position):
                if tracker.fires(key, plan, seed, index, rule, unit) is not None:
                    if not isinstance(rule, Malformed):
                        error = rule.failure()
                        tracker.end(unit, error)
                        raise error
                    return tracker, unit, rule
        return tracker, unit, None

    def _finish(self, tracker, unit, rule, value):
        tracker.crash_point(unit, "after_effect")
        if rule is not None:      # Malformed: the call ran (and was paid for), its answer broke
            error = rule.error(json.dumps(value, default=str))
            tracker.end(unit, error)
            raise error
        tracker.end(unit, None)
        return value

    def _failed(self, tracker, unit, exc):
        tracker.end(unit, exc)
        tracker.crash_point(unit, "after_effect")

    def wrap(self, fn: Callable, name: str | None = None) -> Callable:
        """`fn` (a graph node or the function of a ``@task``; plain or ``async``) with the
        plan applied at each call; `name` (default ``fn.__name__``) is what rules match.

        ``graph.add_node("charge", inj.wrap(charge))``; ``charge = task(inj.wrap(charge))``.
        """
        if not callable(fn):
            raise bad_type("injector.wrap", "fn", f"fn={fn!r} is not callable: wrap a "
                                                  f"node or @task function")
        name = _name(fn, name, "injector.wrap")
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def wrapped(*args, **kwargs):
                tracker, unit, rule = self._start(name, "unit")
                try:
                    value = await fn(*args, **kwargs)
                except Exception as exc:
                    self._failed(tracker, unit, exc)
                    raise
                return self._finish(tracker, unit, rule, value)
        else:
            @functools.wraps(fn)
            def wrapped(*args, **kwargs):
                return self._unit(name, "unit", fn, args, kwargs)
        wrapped.__name__ = name   # the name LangGraph gives an @task made of it, too
        return wrapped

    def call(self, name: str, fn: Callable, *args, **kwargs) -> Any:
        """``fn(*args, **kwargs)`` as one unit named `name`, inside a node: a tool call. A
        node that runs again (retried, or after a crash) makes its calls again, and each
        keeps its position: a repeated charge shows as attempt 2 of the same position."""
        name = _name(fn, name, "injector.call")
        if not callable(fn):
            raise bad_type("injector.call", "fn", f"fn={fn!r} is not callable")
        return self._unit(name, "call", fn, args, kwargs)

    def _unit(self, name: str, kind: str, fn: Callable, args, kwargs) -> Any:
        """One plain call of a unit under the plan (an ``async`` node awaits in `wrap`)."""
        tracker, unit, rule = self._start(name, kind)
        try:
            value = fn(*args, **kwargs)
        except Exception as exc:
            self._failed(tracker, unit, exc)
            raise
        return self._finish(tracker, unit, rule, value)

    def unmatched(self) -> list:
        """The (index, rule) pairs of the plan whose name matched no unit this injector
        met: a node that was not wrapped, or a typo, makes a rule that tests nothing."""
        return self.plan.unmatched(self._tracker().met | self._own.met)

    @property
    def attempts(self) -> pd.DataFrame:
        """Every attempt the injector saw (`Run.attempts` columns; times are seconds since
        the epoch)."""
        return self._tracker().frames(0.0, "")[0]

    @property
    def crashes(self) -> pd.DataFrame:
        """Every crash the plan caused (`Run.crashes` columns, times since the epoch)."""
        return self._tracker().frames(0.0, "")[1]

    def run(self, path, thread_id: str, checkpoint_ns: str = ""):
        """`dl.from_langgraph(path, thread_id)` with the attempts this injector saw in that
        thread in place of the last-attempt-only rows LangGraph's record allows: the `Run`
        to put beside others in `dl.compare` and timelines."""
        from ...importers.langgraph import read
        run, origin = read(path, thread_id, checkpoint_ns)
        attempts, crashes = self._tracker().frames(origin, run.run_id, thread_id)
        return dataclasses.replace(run, attempts=attempts, crashes=crashes,
                                   notes=run.notes + (OBSERVED_NOTE,))

    def __repr__(self) -> str:
        unmatched = self.unmatched() if self._tracker().met else []
        return (f"<langgraph injector: {len(self.plan)} rules, seed {self.seed}, "
                f"{len(self._tracker().units)} attempts seen"
                + (f", unmatched: {', '.join(r.activity for _, r in unmatched)}"
                   if unmatched else "") + ">")


def _name(fn, name, call: str) -> str:
    name = name if name is not None else getattr(fn, "__name__", None)
    if not isinstance(name, str) or not name or name == "<lambda>":
        raise bad_value(call, "name", f"name={name!r}: give the unit a name the plan's rules "
                                      f"can match, such as name=\"charge\"")
    return name


def faults(plan=None, seed: int = 0) -> Injector:
    """An injector applying `plan` to LangGraph's units: nodes and ``@task`` functions
    (``wrap``), and single calls inside a node (``call``).

    The rules that act on a call apply as on the engine and are drawn the same way, from
    (seed, rule, position, attempt): `RateLimit`, `ServerError`, `ConnectionReset` and
    `Fail` raise durablelab's error instead of calling (LangGraph's RetryPolicy then decides,
    see `retry_on`); `Malformed` calls and breaks the answer; `Crash` at ``before_activity``
    or ``after_effect`` ends the process as kill -9 would (``os._exit(137)``), or, under
    `explore_crashes`, the simulated worker. Refused, with the reason: `Latency`, `Timeout`,
    `Hang` and ``between=`` (they need virtual time; LangGraph runs on the wall clock),
    crashes ``during_wait`` (LangGraph waits in memory, never durably) and ``after_record``
    (only `explore_crashes` sees the checkpointer save).

    Args:
        plan: a `dl.FaultPlan`, a list of rules, or None (no faults: units are only counted,
            for `explore_crashes`).
        seed: the seed of the draws (a rule with ``p < 1``).
    """
    if plan is None:
        plan = FaultPlan([])
    elif isinstance(plan, (list, tuple)):
        plan = FaultPlan(list(plan))
    elif not isinstance(plan, FaultPlan):
        raise bad_type("langgraph.faults", "plan", f"plan={plan!r} is not a fault plan: pass "
                                                   f"a dl.FaultPlan, a list of rules or None")
    seed = check_seed(seed, "langgraph.faults")
    for index, rule in enumerate(plan.rules):
        kind = type(rule).__name__
        why = None
        if isinstance(rule, TIMING_RULES):
            why = (f"{kind} needs durablelab's virtual clock to end the attempt; LangGraph "
                   f"runs on the wall clock. Use a failure rule (ServerError, RateLimit, "
                   f"Fail) or a Crash, or sleep inside the node")
        elif rule.between is not None:
            why = "between= is a window of virtual seconds; LangGraph runs on the wall clock"
        elif isinstance(rule, Crash) and rule.point == "during_wait":
            why = ("LangGraph has no durable waits (its RetryPolicy sleeps in memory), so "
                   "there is no during_wait point")
        elif isinstance(rule, Crash) and rule.point == "after_record":
            why = ("the injector does not see LangGraph's checkpointer save a unit's writes; "
                   "explore_crashes crashes there, since it owns the checkpointer")
        if why:
            raise bad_value("langgraph.faults", "plan",
                            f"rule {index}, {kind}({rule.activity!r}), cannot apply to "
                            f"LangGraph: {why}")
    return Injector(plan, seed)


def retry_on(exc: Exception) -> bool:
    """Whether LangGraph should retry `exc`: True for what `dl.classify` calls transient or
    rate-limited (time-outs, connection errors, HTTP 5xx and 429, durablelab's injected
    `Transient` and `RateLimited`); False for HTTP 4xx, ``ValueError``-like bugs and broken
    model output.

    ``RetryPolicy(retry_on=retry_on)``. LangGraph's default `retry_on` is a list of built-in
    errors not to retry, so it retries an httpx 503 but not an httpx 429 (its status check
    covers 5xx only), and it retries a 400 that a client raises as its own exception class.
    LangGraph's RetryPolicy ignores Retry-After: a 429 waits its backoff, not the server's
    hint.
    """
    return isinstance(classify(exc), Transient)     # RateLimited is a Transient


__all__ = ["faults", "Injector", "retry_on", "OBSERVED_NOTE"]
