"""A LangGraph agent under durablelab's fault plans, retries and crash explorer.

LangGraph makes a graph durable with a checkpointer: after each super-step it saves every
channel's value, and ``invoke(None, config)`` resumes a thread from its last checkpoint. Its
unit of durability is the *node* (graph API) or the ``@task`` call (functional API). This
module lets the tools of durablelab reach those units without rewriting the agent:

- `faults(plan, seed=0)`: an injector. ``injector.wrap(fn)`` wraps a node or a ``@task``
  function, ``injector.call(name, fn, *args)`` one call inside a node (a tool call), so a
  `dl.FaultPlan`'s rules apply to them by name, drawn exactly as the engine draws them.
- `retry_on`: for ``RetryPolicy(retry_on=retry_on)``: retry what `dl.classify` calls
  transient or rate-limited. LangGraph's default retries any exception class outside a list
  of built-ins: 5xx of httpx but not its 429, and a 400 raised as your own class.
- `explore_crashes(build, input, invariant)`: crash at every unit the injectors wrap and
  recover as a user would, a freshly built graph calling ``invoke(None, config)`` over the
  same checkpointer; then check the invariant.

What it makes visible: the graph API saves a node's writes only when the node ends, so a
crash after the second tool call of a node runs the whole node again, the first call too;
the functional API saves each ``@task`` result as it ends, so only the unfinished task runs
again; ``durability="exit"`` saves nothing until the graph ends, so a crash loses the run.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import os
import sqlite3
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from ..activities import WorkerCrash, outcome_of
from ..draws import Draws, first
from ..errors import (BadValue, Transient, bad_type, bad_value, check_seed,
                      unsupported_version)
from ..faults import Crash, FaultPlan, Hang, Latency, Malformed, Timeout, draw_key
from ..retry import classify

#: the versions this bridge was built and tested against: package -> (lowest, below, text)
SUPPORTED = {"langgraph": ((1, 0), (2, 0), ">=1.0,<2"),
             "langgraph-checkpoint-sqlite": ((3, 0), (4, 0), ">=3.0,<4")}


def check_versions(version=metadata.version) -> dict[str, str]:
    """The installed versions of LangGraph and its SQLite checkpointer, checked against
    `SUPPORTED`: this bridge relies on their checkpoint layout and config keys, which are
    not a public API. Raises `UnsupportedVersionError` naming the version found."""
    found = {}
    for package, (low, high, text) in SUPPORTED.items():
        try:
            found[package] = installed = version(package)
        except metadata.PackageNotFoundError:
            raise ImportError(f"durablelab.backends.langgraph needs {package}: "
                              f"pip install 'durablelab[langgraph]'") from None
        numbers = tuple(int(p) for p in installed.split(".")[:2] if p.isdigit())
        if not low <= numbers < high:
            raise unsupported_version(package, installed, text, "langgraph")
    return found


VERSIONS = check_versions()

from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402 (after the version check)

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
        from ..run import ATTEMPT_COLUMNS, CRASH_COLUMNS
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
            async def unit(*args, **kwargs):
                tracker, attempt, rule = self._start(name, "unit")
                try:
                    value = await fn(*args, **kwargs)
                except Exception as exc:
                    self._failed(tracker, attempt, exc)
                    raise
                return self._finish(tracker, attempt, rule, value)
        else:
            @functools.wraps(fn)
            def unit(*args, **kwargs):
                tracker, attempt, rule = self._start(name, "unit")
                try:
                    value = fn(*args, **kwargs)
                except Exception as exc:
                    self._failed(tracker, attempt, exc)
                    raise
                return self._finish(tracker, attempt, rule, value)
        unit.__name__ = name      # the name LangGraph gives an @task made of it, too
        return unit

    def call(self, name: str, fn: Callable, *args, **kwargs) -> Any:
        """``fn(*args, **kwargs)`` as one unit named `name`, inside a node: a tool call. A
        node that runs again (retried, or after a crash) makes its calls again, and each
        keeps its position: a repeated charge shows as attempt 2 of the same position."""
        name = _name(fn, name, "injector.call")
        if not callable(fn):
            raise bad_type("injector.call", "fn", f"fn={fn!r} is not callable")
        tracker, unit, rule = self._start(name, "call")
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
        from ..importers.langgraph import read
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


# --- crash exploration ----------------------------------------------------------------------

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
    global _exploring
    from ..clock import WallClock
    from ..importers.langgraph import read
    from ..lab.crashes import _check
    tracker = _Tracker(plan=FaultPlan([rule]) if rule is not None else None, exploring=True)
    here = world(WallClock()) if world is not None else None
    path = Path(folder) / f"{len(os.listdir(folder))}.sqlite"
    config = {"configurable": {"thread_id": run_id}}
    payload, error, began = input, None, time.time()
    _exploring = tracker
    try:
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
    finally:
        _exploring = None
    run, _ = read(path, run_id, missing_ok=True, origin=began)
    if run is None:         # nothing saved: durability="exit" and a crash
        run = _lost(run_id, LOST if error is not None else "nothing was saved")
    attempts, crashes = tracker.frames(began, run_id)
    run = dataclasses.replace(run, attempts=attempts, crashes=crashes,
                              notes=run.notes + (OBSERVED_NOTE,))
    holds, why = _check(invariant, run, here)
    return run, holds, why, len(tracker.crashes), tracker


def _lost(run_id: str, message: str):
    from ..errors import WorkflowError
    from ..run import ATTEMPT_COLUMNS, CRASH_COLUMNS, HISTORY_COLUMNS, WAKEUP_COLUMNS, Run
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
    from ..lab.crashes import COLUMNS, CrashPoint, CrashReport
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


__all__ = ["faults", "Injector", "retry_on", "explore_crashes", "check_versions",
           "SUPPORTED"]
