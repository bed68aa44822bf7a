"""Graduating a workflow: the same ``fn(ctx, input)`` on DBOS Transact.

durablelab's engine teaches replay on one process and one DuckDB file. DBOS Transact is a
production engine built on the same idea (a workflow re-executes, its steps' outputs come
back from a database), over SQLite or PostgreSQL. `DBOSRunner` runs durablelab workflow code
on it unchanged: every ``ctx`` call becomes DBOS operations.

What DBOS does by itself, and what this runner adds so the lessons still hold:

- ``ctx.activity``: each *attempt* is one DBOS step that records the attempt's outcome as
  JSON, with the activity's name and argument digest. DBOS checks only the step's function
  name on replay, so a changed argument would go unnoticed; the runner compares the digest
  and raises `NonDeterminismError`. DBOS's own step retries sleep in memory and restart
  their count after a crash; here each backoff is a durable ``DBOS.sleep`` between attempt
  steps, so a crash during a 15-minute backoff resumes the wait.
- ``ctx.now/random/uuid`` are recorded steps; ``ctx.sleep`` is ``DBOS.sleep``;
  ``ctx.wait_signal`` is ``DBOS.recv`` with its timeout; `signal` is ``DBOS.send`` with
  the signal id as its idempotency key (a double click is recorded once);
  ``ctx.patched`` is ``DBOS.patch``.
- Only DBOS's portable JSON serializer is used (its default pickles), and the
  `application_version` is set explicitly: DBOS's default is a hash of the code, so a
  process with other code would silently recover nothing.
- DBOS has no activity heartbeats: `heartbeat=` is accepted and has no effect, and
  ``dl.heartbeat(details)`` inside an activity keeps nothing (``dl.last_heartbeat()`` is
  None, so a retried attempt starts over), said once per activity in a
  `HeartbeatIgnoredWarning`: activity code written for `dl.Engine` runs unchanged.
- The idempotency key is ``"{run_id}:{position}"``, positions counted as the durablelab
  engine counts them, so a service sees the same keys on both engines.
- A fault plan (``start(..., faults=plan, seed=7)``) breaks a run on DBOS as on the engine:
  the rules that act on a call (`RateLimit`, `ServerError`, `ConnectionReset`, `Fail`,
  `Malformed`) fire on the same attempts, drawn from the same (seed, rule, position,
  attempt); a `Crash` really ends the process (``os._exit(137)``, as ``kill -9`` would),
  after a DBOS step has recorded that it fired, so the recovering process passes that point
  (and ``times=`` still counts it). Rules that need virtual time (`Latency`, `Timeout`,
  `Hang`, and any rule's ``between=``) are refused at `start`: DBOS runs on the wall clock.

A process recovers the runs DBOS's ``"local"`` executor left unfinished when the runner
launches (DBOS does this on ``launch``), and `recover()` asks again, or for other executors'
runs once you know those executors are dead (recovering a live one's runs runs them twice).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import random as _random
import sys
import threading
import time
import uuid as _uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from .. import history as h
from ..activities import accepts
from ..context import DEFAULT_POLICY, Saga
from ..draws import Draws, first
from ..faults import FaultPlan, Hang, Latency, Malformed, Timeout, draw_key
from ..registry import REGISTRY, workflow_name
from ..errors import (BadType, BadValue, DuplicateRunError, DurableLabError, ModelOutputError,
                      NonRetryable, RunFinishedError, RunNotFoundError, RunnerOpenError,
                      UnknownWorkflowError, activity_failed, check_seed, error_from_json,
                      non_determinism, workflow_error)
from ..heartbeat import unrecorded
from ..retry import RetryPolicy, classify, next_delay

try:
    from dbos import DBOS, SetWorkflowID
    from dbos._serialization import DBOSPortableJSON
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "durablelab.backends.dbos needs DBOS Transact: pip install 'durablelab[dbos]'") from exc

#: the one DBOS workflow every durablelab run executes as; its inputs name the real one.
DBOS_WORKFLOW = "durablelab.run"
#: the DBOS step name of one activity attempt, and of a recorded now/random/uuid.
ATTEMPT_STEP = "durablelab.attempt"
VALUE_STEP = "durablelab.value"
#: the DBOS step that records a `Crash` rule firing, just before the process ends.
FAULT_STEP = "durablelab.fault"
#: the exit status of a process a `Crash` rule ended: what a shell reports after kill -9.
CRASH_EXIT = 137
#: rules that need the engine's virtual clock, which DBOS does not have.
TIMED_RULES = (Latency, Timeout, Hang)
#: a wait without deadline: DBOS.recv needs a number.
FOREVER = 10 * 365 * 86400.0
FINAL = {"SUCCESS": "completed", "ERROR": "failed", "CANCELLED": "cancelled",
         "MAX_RECOVERY_ATTEMPTS_EXCEEDED": "failed"}

_open: "DBOSRunner | None" = None

#: The ctx calls of concurrent work (DESIGN.md section 2), which this runner refuses.
CONCURRENT_CALLS = ("start_activity", "gather", "map", "child", "start_child")


def _names(code) -> set:
    """Every name a function's code uses, its comprehensions' and inner functions' too."""
    if code is None:
        return set()
    found = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            found |= _names(const)
    return found


def not_on_dbos(calls: str, run_id: str | None) -> DurableLabError:
    where = f" in run {run_id!r}" if run_id else ""
    return DurableLabError(
        f"{calls}{where}: DBOSRunner runs a workflow's steps one at a time, so it cannot "
        f"start activities or child runs concurrently. Run this workflow on dl.Engine, or "
        f"write the steps one after another with ctx.activity for DBOS.")


class _RunnerErrors(logging.Filter):
    """Drop DBOS's log of a run that failed with a durablelab error: `result()` raises that
    error itself, with its own words; DBOS would print it again as a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, DurableLabError)


logging.getLogger("dbos").addFilter(_RunnerErrors())


# --- the DBOS side: one workflow, two kinds of step ----------------------------------------

@DBOS.step(name=ATTEMPT_STEP)
def _attempt_step(ctx: "DBOSContext", call: dict) -> dict:
    """One attempt of an activity; the outcome, not an exception, is what DBOS records."""
    ctx._fresh = True
    kwargs = dict(call["kwargs"])
    takes_key, takes_feedback = accepts(call["fn"])
    if takes_key:
        kwargs["idempotency_key"] = call["key"]
    if takes_feedback and call["feedback"] is not None:
        kwargs["feedback"] = call["feedback"]
    outcome = {"activity": call["name"], "digest": call["digest"],
               "position": call["position"], "attempt": call["attempt"],
               "delay_before": call["delay_before"], "started_at": time.time()}
    index, rule = call.get("fault") or (None, None)
    if index is not None:
        outcome["fault"] = {"rule": index, "type": type(rule).__name__}
    if rule is not None and not isinstance(rule, Malformed):
        # a 429, a 5xx, a reset, a given failure: the function does not run
        outcome.update(ok=False, error=rule.failure().to_json(), ended_at=time.time())
        return outcome
    try:
        with unrecorded(call["name"], "DBOS Transact (DBOSRunner)",
                        ctx._runner._heartbeat_warned):
            value = call["fn"](*call["args"], **kwargs)
        text = h.to_json(value, f"the result of activity {call['name']!r}",
                         f"position {call['position']}")
        if rule is not None:   # Malformed: the call ran (and was paid for); its answer broke
            outcome.update(ok=False, error=rule.error(text).to_json())
        else:
            outcome.update(ok=True, value=json.loads(text))
    except Exception as exc:  # every failure is data: the workflow decides about retries
        error = classify(exc)   # as dl.Engine does: a retry class as it is, anything else mapped
        outcome.update(ok=False, error=error.to_json())
    if call.get("crash"):
        # after_effect: the effect happened, its record did not; DBOS recorded the firing
        _die()
    outcome["ended_at"] = time.time()
    return outcome


@DBOS.step(name=FAULT_STEP)
def _fault_step(ctx: "DBOSContext", fired: dict) -> dict:
    """Record that a `Crash` rule fired here, before the process ends: the recovering
    process replays this step and so passes the point instead of dying at it forever."""
    ctx._fresh = ctx._crashing = True
    return {**fired, "at": time.time()}


def _die() -> None:
    """End this process at once, as kill -9 would: no cleanup, no commit, no finally."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(CRASH_EXIT)


@DBOS.step(name=VALUE_STEP)
def _value_step(ctx: "DBOSContext", kind: str) -> Any:
    ctx._fresh = True
    value = time.time() if kind == "now" else _random.random() if kind == "random" \
        else str(_uuid.uuid4())
    return {"kind": kind, "value": value}


@DBOS.workflow(name=DBOS_WORKFLOW)
def _dbos_run(workflow: str, input: Any, options: dict | None = None) -> Any:
    run_id = DBOS.workflow_id
    try:
        fn = None if _open is None else _open._workflows.get(workflow) or REGISTRY.get(workflow)
        if fn is None:
            raise UnknownWorkflowError(
                f"Run {run_id!r} names workflow {workflow!r}, which this process did not "
                f"register; nothing ran. Pass it to DBOSRunner(..., workflows=[...]).",
                run_id=run_id, workflow=workflow)
        try:
            plan = seed = None
            if options is not None:
                plan, seed = FaultPlan.from_json(options["faults"]), options["seed"]
            return fn(DBOSContext(run_id, workflow, _open, plan, seed or 0), input)
        except DurableLabError:
            raise
        except Exception as exc:
            raise workflow_error(run_id, workflow, exc, None) from exc
    except DurableLabError as exc:
        exc.data = exc.to_json()   # DBOS's portable error keeps `.data`: the fields survive
        raise


# --- what workflow code touches --------------------------------------------------------------

class DBOSContext:
    """The ``ctx`` of a run on DBOS: the same methods as `durablelab.Context`."""

    world = None

    def __init__(self, run_id: str, workflow: str, runner: "DBOSRunner",
                 plan: FaultPlan | None = None, seed: int = 0):
        self.run_id, self.workflow, self._runner = run_id, workflow, runner
        self._position = 0
        self._fresh = runner._recorded_steps(run_id) == 0
        self._plan, self._seed = plan, seed
        #: how often each rule fired so far in this run (the walk re-counts it on replay)
        self._fired: dict[int, int] = {}
        self._crashing = False   # set by _fault_step when its body runs in this process

    @property
    def is_replaying(self) -> bool:
        """True until this execution runs a step body itself (DBOS hands back the rest)."""
        return not self._fresh

    def log(self, *parts: Any) -> None:
        if not self.is_replaying:
            print(f"[{self.run_id}]", *parts)

    def _next(self, events: int = 1) -> int:
        self._position += events
        return self._position - events + 1

    def activity(self, name: str, fn: Callable, *args, policy: RetryPolicy | None = None,
                 start_to_close: float | None = None, schedule_to_close: float | None = None,
                 heartbeat: float | None = None, **kwargs) -> Any:
        """Run an activity with retries, each attempt a DBOS step; see `Context.activity`."""
        if not isinstance(name, str):
            raise BadType(f"ctx.activity's name must be a string; got {name!r}")
        frame = sys._getframe(1)
        position = self._next()
        text = h.canonical(args, kwargs, "ctx.activity", frame, name)
        digest = h.digest_of(text)
        policy = policy or DEFAULT_POLICY
        call = {"name": name, "fn": fn, "args": args, "kwargs": kwargs, "digest": digest,
                "position": position, "key": f"{self.run_id}:{position}", "feedback": None}
        attempt, malformed, delay = 1, 0, None
        draws = Draws(f"dbos:{self.run_id}:{position}")
        plan = self._plan
        while True:
            fault, crash = None, False
            if plan is not None:
                self._crash_at("before_activity", name, position, attempt)
                fault = self._draw(name, position, attempt)
                if fault is None or isinstance(fault[1], Malformed):   # the function runs
                    crash = self._crash_fires("after_effect", name, position, attempt)
            outcome = _attempt_step(self, {**call, "attempt": attempt, "delay_before": delay,
                                           "fault": fault, "crash": crash})
            if plan is not None:
                self._crash_at("after_record", name, position, attempt)
            if outcome["activity"] != name or outcome["digest"] != digest:
                reason = "different_call" if outcome["activity"] != name else "different_arguments"
                raise non_determinism(
                    self.run_id, self.workflow, position,
                    {"kind": "activity", "name": outcome["activity"], "digest": outcome["digest"]},
                    {"kind": "activity", "name": name, "digest": digest},
                    h.site(frame), reason)
            if outcome["ok"]:
                return outcome["value"]
            error = error_from_json(outcome["error"])
            if isinstance(error, ModelOutputError):
                malformed += 1
                retry, why = malformed <= policy.model_output_budget, \
                    f"its model-output budget ({policy.model_output_budget} retries) is spent"
                call["feedback"] = error.message
            elif isinstance(error, NonRetryable) or policy.is_non_retryable(error):
                retry, why = False, "its error is not retryable"
            else:
                retry = policy.max_attempts is None or attempt - malformed < policy.max_attempts
                why = f"its {policy.max_attempts} attempts are spent"
            if not retry:
                raise activity_failed(self.run_id, name, position, attempt, error, why)
            previous, delay = delay, 0.0     # decorrelated jitter grows from the last wait
            if not isinstance(error, ModelOutputError):
                delay = next_delay(policy, attempt - malformed, error, draws, previous or None)
                with self._crash_during_wait(name, position, attempt, delay):
                    DBOS.sleep(delay)
            attempt += 1

    # --- fault plans: drawn as dl.Engine draws them -------------------------------------------
    def _fires(self, index: int, rule, position: int, attempt: int) -> bool:
        """Whether `rule` fires on this attempt: the engine's draw (`faults.draw_key`), with
        ``times=`` counted over the run so far."""
        if rule.times is not None and self._fired.get(index, 0) >= rule.times:
            return False
        key = draw_key(self._seed, index, position, attempt,
                       self.run_id if self._plan.per_run else None)
        return first(key) < rule.p

    def _draw(self, name: str, position: int, attempt: int):
        """The (index, rule) that decides this attempt, or None: the first call rule that
        fires (timed rules were refused at start)."""
        for index, rule in self._plan.applicable(name, attempt, position=position):
            if self._fires(index, rule, position, attempt):
                self._fired[index] = self._fired.get(index, 0) + 1
                return index, rule
        return None

    def _crash_fires(self, point: str, name: str, position: int, attempt: int) -> bool:
        """Record the firing of a `Crash` rule at `point` and say whether this process must
        die there: False when the point was passed before (the step is replayed)."""
        for index, rule in self._plan.applicable(name, attempt, point, position):
            if self._fires(index, rule, position, attempt):
                self._fired[index] = self._fired.get(index, 0) + 1
                self._crashing = False
                _fault_step(self, {"rule": index, "type": "Crash", "point": point,
                                   "activity": name, "position": position,
                                   "attempt": attempt})
                if self._crashing:     # recorded just now: this process dies here
                    return True
        return False

    def _crash_at(self, point: str, name: str, position: int, attempt: int) -> None:
        if self._plan.crashes() and self._crash_fires(point, name, position, attempt):
            _die()

    @contextlib.contextmanager
    def _crash_during_wait(self, name: str, position: int, attempt: int, seconds: float):
        """Around a durable wait: a `Crash` at ``during_wait`` ends the process halfway
        through it (DBOS has recorded when the wait ends, so the recovery waits only for
        what is left), or as the wait ends if the wait was over first."""
        plan = self._plan
        if plan is None or not plan.crashes() or not self._crash_fires(
                "during_wait", name, position, attempt):
            yield
            return
        timer = threading.Timer(min(seconds, FOREVER) / 2, _die)
        timer.daemon = True
        timer.start()
        yield
        _die()

    def now(self) -> float:
        """Wall-clock seconds since the epoch, recorded once (a DBOS step)."""
        self._next()
        return _value_step(self, "now")["value"]

    def random(self) -> float:
        """A float in [0, 1), recorded once (a DBOS step)."""
        self._next()
        return _value_step(self, "random")["value"]

    def uuid(self) -> str:
        """A UUID4 string, recorded once (a DBOS step)."""
        self._next()
        return _value_step(self, "uuid")["value"]

    def sleep(self, seconds: float) -> None:
        """A durable timer: ``DBOS.sleep`` records when it ends, so a recovery waits only
        for what is left."""
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
            raise BadValue(f"ctx.sleep({seconds!r}): seconds must be a number >= 0")
        position = self._next(2)
        with self._crash_during_wait("sleep", position, 1, float(seconds)):
            DBOS.sleep(float(seconds))

    def wait_signal(self, name: str, deadline: float | None = None,
                    timeout: float | None = None) -> Any:
        """The next signal called `name`, or None once `deadline` (wall-clock seconds, as
        ``ctx.now()`` gives) or `timeout` (seconds) passes: ``DBOS.recv``."""
        if deadline is not None and timeout is not None:
            raise BadValue("ctx.wait_signal takes deadline= or timeout=, not both")
        if deadline is not None:
            # Only the first execution uses this: DBOS.recv records its own deadline, so a
            # replay or a recovery gets the recorded answer or waits for what is left.
            timeout = max(0.0, deadline - time.time())
        position = self._next(2)
        wait = FOREVER if timeout is None else float(timeout)
        # a signal wait without deadline dies soon after it starts: half of forever is never
        with self._crash_during_wait(name, position, 1, wait if timeout is not None else 0.1):
            return DBOS.recv(name, timeout_seconds=wait)

    def patched(self, change_id: str) -> bool:
        """Versioning marker: False for runs recorded before the change (``DBOS.patch``)."""
        taken = DBOS.patch(change_id)
        if taken:
            self._next()
        return taken

    def saga(self) -> Saga:
        """Compensations run in reverse as recorded activities; see `Context.saga`."""
        return Saga(self)

    # Concurrency: this runner makes one DBOS step at a time from a synchronous workflow.
    def start_activity(self, name, *args, **kwargs):
        raise not_on_dbos("ctx.start_activity", self.run_id)

    def gather(self, *handles):
        raise not_on_dbos("ctx.gather", self.run_id)

    def map(self, name, *args, **kwargs):
        raise not_on_dbos("ctx.map", self.run_id)

    def child(self, workflow, *args, **kwargs):
        raise not_on_dbos("ctx.child", self.run_id)

    def start_child(self, workflow, *args, **kwargs):
        raise not_on_dbos("ctx.start_child", self.run_id)

    def continue_as_new(self, input: Any) -> None:
        raise DurableLabError(
            f"ctx.continue_as_new in run {self.run_id!r}: DBOSRunner does not support it. "
            f"Start a new run with runner.start(...) from a last activity, or keep the "
            f"workflow on durablelab's Engine.")


# --- the runner ------------------------------------------------------------------------------

def _plan_on_dbos(faults) -> FaultPlan | None:
    """`faults` as a plan DBOS can apply, or `BadValue` naming the first rule that needs the
    engine's virtual clock (nothing is recorded: the same run id can be started again)."""
    if faults is None:
        return None
    if isinstance(faults, FaultPlan):
        plan = faults
    elif isinstance(faults, (list, tuple)):
        plan = FaultPlan(list(faults))
    else:
        plan = FaultPlan.from_json(faults)
    for index, rule in enumerate(plan.rules):
        timed = isinstance(rule, TIMED_RULES)
        if timed or rule.between is not None:
            what = (f"{type(rule).__name__} acts on virtual time" if timed else
                    f"between={rule.between!r} is a window of virtual seconds")
            raise BadValue(
                f"DBOSRunner.start(faults=...): rule {index}, {type(rule).__name__}"
                f"({rule.activity!r}), cannot run on DBOS: {what}, and DBOS runs on the "
                f"wall clock. Run this plan on dl.Engine, or leave the rule out (DBOS takes "
                f"RateLimit, ServerError, ConnectionReset, Fail, Malformed and Crash).")
    return plan


_thread = None


def _outside_event_loop(method):
    """DBOS's blocking calls refuse to run in a thread with an event loop running, and a
    Jupyter kernel has one: there the call is made from a helper thread instead."""
    @functools.wraps(method)
    def call(*args, **kwargs):
        global _thread
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return method(*args, **kwargs)
        if _thread is None:
            _thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="durablelab-dbos")
        return _thread.submit(method, *args, **kwargs).result()
    return call

class DBOSRunner:
    """Runs durablelab workflows on DBOS Transact; one open runner per process.

    `url`: ``"sqlite:///path.sqlite"`` or ``"postgresql+psycopg://user@host:port/db"``.
    `application_version`: the version DBOS stamps on runs; a process recovers only runs of
    its own version, so keep it across deploys that must pick up in-flight runs (default
    ``"durablelab"``). `workflows`: the workflow functions this process may run, beside
    those `start()` was given and those decorated with ``@dl.workflow``.
    """

    @_outside_event_loop
    def __init__(self, url: str, app_name: str = "durablelab",
                 application_version: str | None = None, workflows=()):
        global _open
        if not isinstance(url, str) or not url.startswith(("sqlite:///", "postgresql")):
            raise BadValue(f"DBOSRunner(url={url!r}): give 'sqlite:///file.sqlite' or "
                             f"'postgresql+psycopg://user@host:port/database'")
        if _open is not None:
            raise RunnerOpenError(
                f"A DBOSRunner on {_open.url!r} is already open in this process; DBOS is one "
                f"instance per process. Call close() on it first.", url=_open.url)
        self.url = url
        self._workflows: dict[str, Callable] = {}
        #: activities whose dl.heartbeat() was said to keep nothing here (once each)
        self._heartbeat_warned: set[str] = set()
        for fn in workflows:
            self.register(fn)
        DBOS(config={"name": app_name, "system_database_url": url,
                     "serializer": DBOSPortableJSON,
                     "application_version": application_version or "durablelab",
                     "log_level": "WARNING",
                     "notification_listener_polling_interval_sec": 0.01})
        _open = self
        try:
            DBOS.launch()
        except BaseException:
            self.close()
            raise

    def register(self, fn: Callable) -> str:
        """Let this process run `fn`; returns the name runs record for it."""
        name = workflow_name(fn)
        self._workflows[name] = fn
        return name

    def _recorded_steps(self, run_id: str) -> int:
        from dbos._dbos import _get_dbos_instance
        return len(_get_dbos_instance()._sys_db.list_workflow_steps(run_id, load_output=False))

    def _status(self, run_id: str):
        return DBOS.get_workflow_status(run_id)

    @_outside_event_loop
    def start(self, workflow: Callable, input: Any, run_id: str | None = None, faults=None,
              seed: int = 0) -> str:
        """Start a run of `workflow` on DBOS and return its id (DBOS's workflow id). A
        workflow whose code calls ctx.start_activity, ctx.gather, ctx.map, ctx.child or
        ctx.start_child is refused here, naming them: this runner makes one step at a
        time, and would otherwise fail half-way through the run.

        `faults`: a `FaultPlan` (or a list of rules, or its JSON), checked whole before
        anything is recorded; `seed`: the run's seed for its fault draws (the engine's
        draws: the same plan and seed fail the same attempts on both). A `Crash` ends this
        process (exit status 137); start a runner again (DBOS recovers the run at launch)
        to carry on. `Latency`, `Timeout`, `Hang` and rules with ``between=`` are refused
        with `BadValue`: they need virtual time."""
        uses = sorted(_names(getattr(workflow, "__code__", None)) & set(CONCURRENT_CALLS))
        if uses:
            raise not_on_dbos(", ".join(f"ctx.{name}" for name in uses), None)
        check_seed(seed, "DBOSRunner.start")
        plan = _plan_on_dbos(faults)
        name = self.register(workflow)
        h.to_json(input, "the workflow input", f"start({name})")
        run_id = run_id or str(_uuid.uuid4())
        if not isinstance(run_id, str):
            raise BadType(f"run_id must be a string; got {run_id!r}")
        if self._status(run_id) is not None:
            raise DuplicateRunError(
                f"A run with id {run_id!r} already exists on {self.url}; pick another id "
                f"or read that run with dl.from_dbos(url, {run_id!r}).", run_id=run_id)
        with SetWorkflowID(run_id):
            if plan is None and seed == 0:
                DBOS.start_workflow(_dbos_run, name, input)
            else:
                options = {"faults": json.loads((plan or FaultPlan()).to_json()), "seed": seed}
                DBOS.start_workflow(_dbos_run, name, input, options)
        return run_id

    @_outside_event_loop
    def signal(self, run_id: str, name: str, value: Any, signal_id: str | None = None) -> None:
        """Send signal `name` to a run (``DBOS.send``); one `signal_id` is delivered once."""
        if signal_id is not None and not isinstance(signal_id, str):
            raise BadType(f"signal_id must be a string; got {signal_id!r}")
        self._unfinished(run_id, lambda ended: f"Run {run_id!r} has ended ({ended}); it "
                                               f"takes no signals.")
        h.to_json(value, f"the value of signal {name!r}", f"signal({run_id!r})")
        DBOS.send(run_id, value, topic=name, idempotency_key=signal_id)

    @_outside_event_loop
    def result(self, run_id: str, timeout: float | None = None) -> Any:
        """Wait for a run to end and return its result; raise the durablelab error it
        failed with. `timeout`: seconds to wait (None: until it ends)."""
        if self._status(run_id) is None:
            raise RunNotFoundError(f"No run {run_id!r} on {self.url}.", run_id=run_id)
        give_up = None if timeout is None else time.monotonic() + timeout
        while True:
            status = self._status(run_id)
            if status.status in FINAL:
                break
            if give_up is not None and time.monotonic() > give_up:
                raise TimeoutError(f"run {run_id!r} is still {status.status} after {timeout}s")
            time.sleep(0.01)
        try:
            return DBOS.retrieve_workflow(run_id).get_result()
        except Exception as exc:
            data = getattr(exc, "data", None)
            if isinstance(data, dict) and "class" in data:
                raise error_from_json(data) from None
            raise

    @_outside_event_loop
    def cancel(self, run_id: str, reason: str | None = None) -> None:
        """Cancel a run: DBOS's ``cancel_workflow`` (the run stops at its next step and
        ends ``cancelled``; unlike `Engine.cancel`, its code is not told, so a saga does
        not compensate). Cancelling a finished run raises `RunFinishedError`."""
        self._unfinished(run_id, lambda ended: f"Cannot cancel run {run_id!r}: it is "
                                               f"already {ended}.")
        DBOS.cancel_workflow(run_id)

    def _unfinished(self, run_id: str, ended_words) -> None:
        """Raise unless run `run_id` exists and has not ended (`ended_words(status)`: the
        message for a run that has)."""
        status = self._status(run_id)
        if status is None:
            raise RunNotFoundError(f"No run {run_id!r} on {self.url}.", run_id=run_id)
        if status.status in FINAL:
            raise RunFinishedError(ended_words(FINAL[status.status]), run_id=run_id,
                                   status=FINAL[status.status])

    @_outside_event_loop
    def recover(self, executor_ids=None) -> list[str]:
        """Recover unfinished runs of these DBOS executors (default ``["local"]``, this
        machine's); returns their ids. Only recover executors you know are dead."""
        handles = DBOS._recover_pending_workflows(list(executor_ids or ["local"]))
        return [handle.workflow_id for handle in handles]

    @_outside_event_loop
    def fork(self, run_id: str, start_step: int) -> str:
        """Re-execute a run from DBOS step `start_step` (DBOS's ``fork_workflow``): the
        steps before it are replayed from their records, later ones run fresh. Returns the
        new run's id."""
        return DBOS.fork_workflow(run_id, start_step).workflow_id

    def run(self, run_id: str):
        """The run as a `durablelab.Run`, read from DBOS's tables (`from_dbos`)."""
        from ..importers.dbos import from_dbos
        return from_dbos(self.url, run_id)

    @_outside_event_loop
    def close(self) -> None:
        """Shut DBOS down in this process, so another runner may open."""
        global _open
        if _open is self:
            DBOS.destroy(destroy_registry=False)
            _open = None

    def __enter__(self) -> "DBOSRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
