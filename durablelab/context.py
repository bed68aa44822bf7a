"""Context: the only object workflow code touches.

Workflow code is a plain function ``fn(ctx, input)``. It is run again from the top every time
the run wakes up, so it must make the same requests in the same order every time. Each
method below either hands back what history recorded at its position (replay), or does the
work, records it, and then hands it back. Anything that differs between two executions of
the code (the time, a random number, a uuid, the world's answer) must come through here.
(A sticky engine, as a sweep's engines are, resumes the code where it waited
instead of running it from the top: `Port.blocking`, `durablelab/sticky.py`. It makes the
same calls in the same order, so history is the same.)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
import random as _random
import sys
import uuid as _uuid
from typing import Any, Callable, NamedTuple, Protocol

from . import history as h
from .errors import (ActivityFailed, Cancelled, DeterminismGuardError, NonDeterminismError,
                     bad_type, bad_value, cancelled, check_later, check_seconds, check_text,
                     error_from_json, not_a_policy, not_callable)
from .retry import RetryPolicy
from .saga import ESCALATE_AFTER, Saga


DEFAULT_POLICY = RetryPolicy()


class Suspend(BaseException):
    """Unwinds workflow code when the run must wait. A BaseException, so workflow code's
    ``except Exception`` cannot swallow it."""

    def __init__(self, due_at: float | None, reason: str, waiting_on: str | None = None,
                 name: str = "", position: int = 0, attempt: int = 1,
                 handles: tuple = (), need_all: bool = True):
        super().__init__(reason)
        self.due_at, self.reason, self.waiting_on = due_at, reason, waiting_on
        self.name, self.position, self.attempt = name, position, attempt
        #: for reason "handles": the positions waited for, and whether all must end
        self.handles, self.need_all = handles, need_all


class ContinueAsNew(BaseException):
    """Unwinds workflow code to end this run and start a fresh one with `input_json`."""

    def __init__(self, input_json: str):
        super().__init__("continue_as_new")
        self.input_json = input_json


class StopRun(BaseException):
    """Ends a run for a reason outside its code (a budget); carries the error to record."""

    def __init__(self, error):
        super().__init__(error.message)
        self.error = error


@dataclass(slots=True)
class Request:
    """What one `ctx.activity` call asks the runner for (the policy already resolved)."""

    name: str
    fn: Callable
    args: tuple
    kwargs: dict
    policy: RetryPolicy
    start_to_close: float | None
    schedule_to_close: float | None
    heartbeat: float | None
    site: Any                      # the frame of the ctx call (formatted only if needed)


class Ended(NamedTuple):
    """How one execution of workflow code ended (see `execute`)."""

    how: str      # completed | suspended | continued | failed | cancelled | diverged | raised
    value: Any    # the result | the Suspend | the next input's JSON | the error


def execute(code: Callable[[], Any], ctx: "Context", cursor: h.Cursor) -> Ended:
    """Run workflow code once from the top (`code`: the workflow called with its ctx and
    input) and say how it ended. The one reading of the ways code stops, shared by an
    engine's wake-up and `replay_check`: "completed" with its result (history must be used
    up), "suspended" on a wait, "continued" by continue_as_new, "failed" with an error to
    record as is (an activity that failed for good, the determinism guard, a budget),
    "cancelled" (`dl.Cancelled` propagated), "diverged", or "raised" with what the code
    itself raised. A divergence the code caught
    is still one. A worker's death (a BaseException) is no ending: it passes through."""
    try:
        result = code()
        if ctx.diverged is None:
            ended_early = cursor.expect_end()
            if ended_early is None:
                return Ended("completed", result)
            raise ended_early
        raise ctx.diverged
    except Suspend as suspend:   # without its traceback, which would keep every frame
        return Ended("suspended", suspend.with_traceback(None))   # of the wake-up alive
    except ContinueAsNew as cont:
        return Ended("continued", cont.input_json)
    except StopRun as stop:
        return Ended("failed", stop.error)
    except Cancelled as exc:
        if ctx.diverged is not None:
            return Ended("diverged", ctx.diverged)
        return Ended("cancelled", exc)
    except NonDeterminismError as exc:
        return Ended("diverged", exc)
    except (ActivityFailed, DeterminismGuardError) as exc:
        return Ended("failed", exc)
    except Exception as exc:   # workflow code raised (or swallowed a divergence first)
        if ctx.diverged is not None:
            return Ended("diverged", ctx.diverged)
        return Ended("raised", exc)


def _number(value, call: str, what: str, where) -> float:
    """Seconds given to a ctx call, checked where the workflow wrote them (see errors/checks.py)."""
    return check_seconds(value, f"{call} at {h.site(where)}", what)


class Port(Protocol):
    """The engine as a `Context` reaches it: all a run's code may touch beyond its history.
    An `Engine` hands each Context one (`port.EnginePort`); `replay_check` another, which ends
    the replay at the first new step."""

    #: the engine's clock, read at each call (a sweep gives its engine a new one per run).
    clock: Any
    #: the simulated world the run belongs to (`ctx.world`), or None.
    world: Any

    def blocking(self, ctx: "Context", call: Callable, *args) -> Any:
        """Make a ctx call that may suspend the run, ``call(*args)``: an activity, a sleep,
        a wait. A sticky engine keeps the run's code waiting in it instead of
        unwinding it, and makes the call again when the run wakes (`sticky.py`)."""

    def execute_activity(self, state, cursor: h.Cursor, request: Request) -> Any:
        """Run (or leave in flight) a new activity the code asked for; its result."""

    def record_event(self, state, cursor: h.Cursor, kind: str, name: str, args,
                     value_json: str | None, call_site: str | None,
                     kwargs: dict | None = None) -> h.Event:
        """Record a new non-activity event (now, random, uuid, a wait, a marker)."""

    def launch(self, state, position: int, request: Request) -> None:
        """Start the activity begun at `position` (a `start_activity`) unless it has ended,
        is in flight or waits for its retry backoff."""

    def start_child(self, state, position: int, workflow: Callable, input_json: str,
                    child_run_id: str, policies) -> None:
        """Start the child run begun at `position`, unless it exists already."""

    def child_ended(self, state, position: int, child_run_id: str) -> None:
        """If that child has ended and the parent's history does not say so yet, append
        its end now."""

    def signal_for(self, state, name: str, k: int):
        """The k-th (from 0) signal called `name` that arrived for the run, or None."""


class Context:
    """What workflow code may call. One is made per wake-up of a run."""

    #: how many frames up the workflow line that made a ctx call is (2 when the
    #: determinism guard wraps the methods: see `durablelab.guard`).
    _caller = 1

    def __init__(self, port: Port, state, cursor: h.Cursor):
        self._port = port
        self._state = state
        self._cursor = cursor
        self._received: dict[str, int] = {}   # signals of each name consumed so far
        self._patches: dict[str, bool] = {}   # change_id -> the path this run is on
        self.diverged = None                   # a NonDeterminismError, once raised
        #: history's length when this wake-up began, and whether an earlier wake-up ran
        #: past it (None: not worked out yet); see `is_replaying`.
        self._frontier = len(cursor.history)
        self._been_here: bool | None = None
        #: the id of the run this code is executing.
        self.run_id: str = state.run_id

    # --- the world -----------------------------------------------------------------------
    def activity(self, name: str, fn: Callable, *args, policy: RetryPolicy | None = None,
                 start_to_close: float | None = None, schedule_to_close: float | None = None,
                 heartbeat: float | None = None, **kwargs) -> Any:
        """Run an activity once, durably, or hand back what history recorded for it.

        Use it for everything that touches the world: model calls, HTTP, database writes,
        email. On first execution the engine calls ``fn(*args, **kwargs)``, retrying per
        `policy`, records the outcome, and only then returns it; on every later wake-up the
        recorded value comes back and `fn` does not run.

        Args:
            name: the step's name in history (and what fault rules match).
            fn: the function to run. It gets ``idempotency_key="{run_id}:{position}"`` when it
                accepts that keyword (or ``**kwargs``): the same on every attempt and after a
                crash, so a service can drop duplicates.
            *args, **kwargs: JSON-serialisable arguments; their digest is checked on replay.
            policy: a `RetryPolicy`; None means ``RetryPolicy()`` (3 attempts). A run
                started with ``policies=`` (or in a sweep) uses the matching policy from
                there instead.
            start_to_close: seconds one attempt may take before it counts as a time-out.
            schedule_to_close: seconds from the first attempt's start after which no further
                attempt starts.
            heartbeat: seconds between heartbeats a long activity promises. If its worker
                dies mid-attempt, the loss is noticed when a heartbeat is missed (instead of
                at start_to_close), and the attempt is retried from then.

        Returns the JSON round trip of `fn`'s result (a tuple comes back as a list, on the
        first execution too). Raises `ActivityFailed` when the activity fails for good.
        """
        frame = sys._getframe(self._caller)
        # A call that may wait (an attempt in flight, a retry's backoff): `Port.blocking`.
        return self._port.blocking(self, self._activity, name, fn, args, kwargs, policy,
                                   start_to_close, schedule_to_close, heartbeat, frame)

    def _activity(self, name, fn, args, kwargs, policy, start_to_close, schedule_to_close,
                  heartbeat, frame) -> Any:
        if start_to_close is not None or schedule_to_close is not None or heartbeat is not None:
            for what, value in (("start_to_close", start_to_close),
                                ("schedule_to_close", schedule_to_close),
                                ("heartbeat", heartbeat)):
                if value is not None:
                    _number(value, f"ctx.activity({name!r})", what, frame)
        if type(name) is not str or not name or not name.isascii():
            check_text(name, f"ctx.activity at {h.site(frame)}", "name")
        if not callable(fn):
            raise not_callable(f"ctx.activity({name!r}) at {h.site(frame)}", fn)
        if policy is not None and not isinstance(policy, RetryPolicy):
            raise not_a_policy(f"ctx.activity({name!r}) at {h.site(frame)}", policy)
        if self.diverged is not None:   # self._check(), inline: replay asks this per call
            raise self.diverged
        try:
            event = self._cursor.expect(h.ACTIVITY, name, frame, args, kwargs, blocking=True)
        except NonDeterminismError as exc:
            self.diverged = exc
            raise
        except h.CancelledHere as here:
            raise self._told(here.event) from None
        if event is not None:
            if event.ok:
                return event.loads()
            failed = error_from_json(event.loads())
            failed.call_site = event.call_site   # where it is raised again: the same call
            raise failed
        if self._state.cancel_pending:
            self._cancel_here(frame)
        retried = self._state.attempts.get(self._cursor.position + 1)
        if retried and retried[-1][2] != name:
            # Attempts of another activity failed here and its retry is due: new code that
            # asks for something else at this position must not inherit them.
            self.diverged = self._cursor.diverged(
                h.Event(self._cursor.position + 1, h.ACTIVITY, retried[-1][2], None, False,
                        None, 0.0), h.ACTIVITY, name, None, frame, "different_call")
            raise self.diverged
        if not retried and (start_to_close is not None or schedule_to_close is not None
                            or heartbeat is not None):
            now = self._port.clock.now()   # the first attempt's start: limits count from it
            for what, value in (("start_to_close", start_to_close),
                                ("schedule_to_close", schedule_to_close),
                                ("heartbeat", heartbeat)):
                if value is not None:
                    check_later(now, value, f"ctx.activity({name!r}) at {h.site(frame)}", what)
        overrides = self._state.overrides
        if overrides is not None:   # start(policies=) replaces what the code passes
            policy = overrides.for_activity(name) or policy
        request = Request(name, fn, args, kwargs, policy or DEFAULT_POLICY, start_to_close,
                          schedule_to_close, heartbeat, frame)
        return self._port.execute_activity(self._state, self._cursor, request)

    # --- concurrency: several activities or child runs at once -----------------------------
    def start_activity(self, name: str, fn: Callable, *args, policy: RetryPolicy | None = None,
                       start_to_close: float | None = None,
                       schedule_to_close: float | None = None,
                       heartbeat: float | None = None, **kwargs) -> "Handle":
        """Start an activity without waiting for it; wait later with `Handle.result()` or
        `ctx.gather`. The arguments are `ctx.activity`'s.

        The activity takes the next position now, at the call, so positions follow the
        order the code started things, never the order they finished, and replay stays
        deterministic. Its attempts run in virtual time beside the code and beside each
        other: three activities that take 10 s each, started together, end after about
        10 s, not 30. Each has its own idempotency key (``"{run_id}:{position}"``), its own
        fault draws and its own crash points."""
        frame = sys._getframe(self._caller)
        return start_activity(self, name, fn, args, kwargs, policy, start_to_close,
                              schedule_to_close, heartbeat, frame)

    def gather(self, *handles: "Handle") -> list:
        """Wait until every handle has ended and return their values in the order given.
        If any failed, the failure at the lowest position is raised, once all have ended
        (so no activity is still running behind the error)."""
        frame = sys._getframe(self._caller)
        for handle in handles:
            if not isinstance(handle, Handle) or handle._ctx is not self:
                raise bad_type(f"ctx.gather at {h.site(frame)}", "handles", (
                    f"{handle!r} is not a handle of this run; pass what ctx.start_activity "
                    f"or ctx.start_child returned"))
        wait_for(self, handles, True, frame)
        failed = [hd for hd in handles if not self._cursor.ended[hd.position].ok]
        if failed:
            raise min(failed, key=lambda hd: hd.position)._error()
        return [hd._value() for hd in handles]

    def map(self, name: str, fn: Callable, items, *, limit: int | None = None,
            policy: RetryPolicy | None = None, start_to_close: float | None = None,
            schedule_to_close: float | None = None, heartbeat: float | None = None) -> list:
        """One activity ``fn(item)`` per item, at most `limit` in flight at once (None: all
        at once), and their values in item order: a fan-out, as over a list of documents.
        `limit` is how a run stays under a rate limit it shares; without one, 50 items are
        50 requests at the same instant. Fails as `gather` does."""
        frame = sys._getframe(self._caller)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                                  or limit < 1):
            raise bad_value(f"ctx.map({name!r}) at {h.site(frame)}", "limit", (
                f"limit={limit!r} must be a whole number of activities in flight, at least 1 "
                f"(or None: all at once)"))
        handles: list[Handle] = []
        running: list[Handle] = []
        for item in items:
            if limit is not None and len(running) >= limit:
                wait_for(self, running, False, frame)   # until one of those in flight ends
                running = [hd for hd in running if not hd.done()]
            handle = start_activity(self, name, fn, (item,), {}, policy, start_to_close,
                                    schedule_to_close, heartbeat, frame)
            handles.append(handle)
            running.append(handle)
        wait_for(self, handles, True, frame)
        failed = [hd for hd in handles if not self._cursor.ended[hd.position].ok]
        if failed:
            raise failed[0]._error()
        return [hd._value() for hd in handles]

    def child(self, workflow: Callable, input: Any = None, run_id: str | None = None,
              policies=None) -> Any:
        """Run `workflow(ctx, input)` as a child run and wait for its result: a sub-agent
        with its own history, recorded in this run as one step. A child that fails (or is
        cancelled) raises `dl.ChildFailed` here. See `start_child`."""
        frame = sys._getframe(self._caller)
        return start_child(self, workflow, input, run_id, policies, frame).result()

    def start_child(self, workflow: Callable, input: Any = None, run_id: str | None = None,
                    policies=None) -> "Handle":
        """Start a child run of the registered `workflow` in this engine without waiting
        for it. Its run id defaults to ``"{this run's id}/{position}"``, so this run,
        recovering after a crash, finds the same child instead of starting a second one;
        `engine.runs()` lists it with `parent_run_id`. Cancelling this run cancels it."""
        frame = sys._getframe(self._caller)
        return start_child(self, workflow, input, run_id, policies, frame)

        # --- values that differ between executions ---------------------------------------------
    def now(self) -> float:
        """The engine's current time in seconds, recorded once and replayed after."""
        return self._value(h.NOW, lambda position: self._port.clock.now())

    def random(self) -> float:
        """A float in [0, 1), drawn from the run's seed, recorded once and replayed after."""
        return self._value(h.RANDOM, lambda position: self._rng(position).random())

    def uuid(self) -> str:
        """A UUID4 string drawn from the run's seed, recorded once and replayed after."""
        return self._value(h.UUID, lambda position: str(
            _uuid.UUID(int=self._rng(position).getrandbits(128), version=4)))

    def _rng(self, position: int) -> _random.Random:
        return _random.Random(f"ctx:{self._state.seed}:{self.run_id}:{position}")

    def _value(self, kind: str, make: Callable[[int], Any]) -> Any:
        self._check()
        frame = sys._getframe(self._caller + 1)
        event = self._expect(kind, kind, frame, None, None)
        if event is not None:
            return event.loads()
        if self._state.cancel_pending:
            self._cancel_here(frame)
        value = make(self._cursor.position + 1)
        self._record(kind, kind, None, json.dumps(value), frame)
        return value

    # --- waiting -------------------------------------------------------------------------
    def sleep(self, seconds: float) -> None:
        """Wait `seconds` on a durable timer. The wait lives in history, not in a process:
        a crash during it resumes the wait at the same deadline instead of restarting it."""
        self._sleep(seconds, sys._getframe(self._caller))

    def _sleep(self, seconds: float, frame) -> None:
        """`sleep`, recorded at the workflow line `frame` (also `retry`'s backoff)."""
        self._port.blocking(self, self._timer, seconds, frame)

    def _timer(self, seconds: float, frame) -> None:
        seconds = _number(seconds, "ctx.sleep(seconds)", "seconds", frame)
        self._check()
        start = self._expect(h.SLEEP, "sleep", frame, (seconds,), {})
        if start is None:
            if self._state.cancel_pending:
                self._cancel_here(frame)
            deadline = check_later(self._port.clock.now(), seconds,
                                   f"ctx.sleep(seconds) at {h.site(frame)}", "seconds")
            self._record(h.SLEEP, "sleep", (seconds,), json.dumps({"seconds": seconds,
                                                                    "deadline": deadline}), frame)
        else:
            deadline = start.loads()["deadline"]
        if self._take_end((h.TIMER_FIRED,), "sleep") is not None:
            return None
        if self._state.cancel_pending:
            self._cancel_here(frame)
        if self._port.clock.now() >= deadline:
            self._record(h.TIMER_FIRED, "sleep", None, None, frame)
            return None
        raise Suspend(deadline, "timer", name="sleep", position=self._cursor.position)

    def wait_signal(self, name: str, deadline: float | None = None,
                    timeout: float | None = None) -> Any:
        """The value of the next signal called `name`, or None if `deadline` passes first.

        Give either `deadline` (an instant, e.g. ``ctx.now() + 3 * 86400``) or `timeout`
        (seconds from when the wait starts). Without either the run may wait forever: always
        pair a human wait with a deadline and a path for the time-out. Signals that arrived
        before the wait are buffered; the k-th wait for a name gets the k-th signal of that
        name, in arrival order.
        """
        frame = sys._getframe(self._caller)
        return self._port.blocking(self, self._wait_signal, name, deadline, timeout, frame)

    def _wait_signal(self, name, deadline, timeout, frame) -> Any:
        call = f"ctx.wait_signal({name!r}) at {h.site(frame)}"
        if type(name) is not str or not name or not name.isascii():
            check_text(name, call, "name")
        if deadline is not None and timeout is not None:
            raise bad_value(call, "deadline", "give deadline= (an instant) or timeout= (seconds "
                                              "from now), not both")
        if timeout is not None:
            timeout = _number(timeout, f"ctx.wait_signal({name!r})", "timeout", frame)
        if deadline is not None:
            deadline = _number(deadline, f"ctx.wait_signal({name!r})", "deadline", frame)
        self._check()
        asked = (deadline, timeout)
        start = self._expect(h.WAIT_SIGNAL, name, frame, asked, {})
        if start is None:
            if self._state.cancel_pending:
                self._cancel_here(frame)
            if timeout is not None:
                deadline = check_later(self._port.clock.now(), timeout, call, "timeout")
            self._record(h.WAIT_SIGNAL, name, asked, json.dumps({"deadline": deadline}), frame)
        else:
            deadline = start.loads()["deadline"]
        k = self._received.get(name, 0)
        end = self._take_end((h.SIGNAL_RECEIVED, h.SIGNAL_TIMEOUT), name)
        if end is None and self._state.cancel_pending:
            self._cancel_here(frame)
        if end is None:
            arrived = self._port.signal_for(self._state, name, k)
            if arrived is not None:
                end = self._record(h.SIGNAL_RECEIVED, name, None, json.dumps(
                    {"value": arrived.value(), "signal_id": arrived.signal_id,
                     "seq": arrived.seq}), frame)
            elif deadline is not None and self._port.clock.now() >= deadline:
                end = self._record(h.SIGNAL_TIMEOUT, name, None, None, frame)
            else:
                raise Suspend(deadline, "signal", waiting_on=name, name=name,
                              position=self._cursor.position)
        if end.kind == h.SIGNAL_TIMEOUT:
            return None
        self._received[name] = k + 1
        return end.loads()["value"]

    # --- versioning, continuation, compensation --------------------------------------------
    def patched(self, change_id: str) -> bool:
        """Whether this run takes the new path of a code change called `change_id`.

        False only while replaying history recorded before the change (it lacks the
        marker), or where the old path's activity is mid-retry (its failed attempts hold the
        position); code running past the end of history gets True and records the marker, so
        the run keeps taking the new path on every later replay. The first answer for a
        `change_id` holds for the rest of the run, so a run is on one path, never both.
        """
        if type(change_id) is not str or not change_id or not change_id.isascii():
            check_text(change_id, f"ctx.patched at {h.site(sys._getframe(1))}", "change_id")
        self._check()
        if change_id in self._patches:
            return self._patches[change_id]
        event = self._cursor.peek()
        if event is None and self._state.attempts.get(self._cursor.position + 1):
            answer = False   # an old-path activity is being retried here: stay on that path
        elif event is None:
            self._record(h.PATCHED, change_id, None, None, sys._getframe(self._caller))
            answer = True
        else:
            answer = event.kind == h.PATCHED and event.name == change_id
            if answer:
                self._cursor.take()
        self._patches[change_id] = answer
        return answer

    def continue_as_new(self, input: Any) -> None:
        """Finish this run (status 'continued') and start a fresh one with `input`, so a
        long-lived workflow's history does not grow without bound."""
        self._check()
        raise ContinueAsNew(h.to_json(input, "continue_as_new input",
                                      h.site(sys._getframe(self._caller))))

    def saga(self, escalate_after: float = ESCALATE_AFTER) -> "Saga":
        """A block whose completed steps are undone, in reverse, if an activity in it fails
        for good. Register each undo with ``saga.add(name, fn, *args)`` right after the step
        it undoes; the undos are activities, recorded and retried like any other. A
        compensation that fails for good waits `escalate_after` seconds for a person (the
        signal ``"compensate:<name>"``) instead of looping; see `durablelab.saga`."""
        return Saga(self, escalate_after)

    def retry(self, policy: RetryPolicy, fn: Callable, *args) -> Any:
        """Run ``fn(ctx, *args)`` and, if it raises a retryable `ActivityFailed`, run it
        again after a durable backoff: a retry scope wider than one activity.

        Use it where a failure can only be retried whole, as a read-modify-write whose
        write conflicts (the read must be made again). `fn` is workflow code: it makes
        activities through `ctx` and runs again from its top on each try. The wait after
        its n-th failure is `policy`'s delay for attempt n (``RetryPolicy`` gives the
        formulas; ``jitter="none", initial=1, backoff=2`` waits 1, 2, 4 s), recorded as a
        ``ctx.sleep``; ``policy.max_attempts`` counts the first try. Returns what `fn`
        returns; raises its last failure when the tries are spent, and any non-retryable
        failure at once (see `durablelab.scopes`).
        """
        frame = sys._getframe(self._caller)
        call = f"ctx.retry at {h.site(frame)}"
        if not isinstance(policy, RetryPolicy):
            raise bad_type(call, "policy", (
                f"policy={policy!r} must be a dl.RetryPolicy, for example "
                f"ctx.retry(dl.RetryPolicy(max_attempts=5, jitter='full'), fn)"))
        if not callable(fn):
            raise bad_type(call, "fn", (
                f"fn={fn!r} is not callable: pass the workflow function the scope runs, "
                f"fn(ctx, *args), not its result"))
        from .guard import workflow_code
        from .scopes import run_scope
        return run_scope(self, policy, fn, args, frame, lambda code: workflow_code(self, code))

    # --- introspection ---------------------------------------------------------------------
    @property
    def world(self) -> Any:
        """The simulated world this run belongs to: a sweep's ``world(clock)``, or
        ``Engine(world=...)``; None otherwise. It is outside the worker, like a real
        service: nothing about it is recorded, and a crash does not reset it."""
        return self._port.world

    @property
    def is_replaying(self) -> bool:
        """True while the code re-executes what an earlier execution of this run already
        did; False once it reaches new ground.

        The code re-executes past steps while history hands back recorded results, and also
        between the last recorded step and the step it stopped at before: an activity being
        retried after a backoff, an attempt still in flight, a worker crash. An earlier
        wake-up that ran past the end of the history this one started with reached that
        same next step (the code is deterministic), so up to there nothing is new. Once this
        wake-up records a step, it is past every point an earlier one reached."""
        cursor = self._cursor
        if cursor.position < len(cursor.history):
            return True
        if len(cursor.history) != self._frontier:
            return False   # this wake-up recorded a step: new ground
        if self._been_here is None:   # worked out once, and only at the frontier
            self._been_here = any(row.replayed + row.recorded >= self._frontier
                                  for row in self._state.wakeups)
        return self._been_here

    def log(self, *parts: Any) -> None:
        """Print a line tagged with the run and the time, except while replaying
        (`is_replaying`), so each line prints once however often the run wakes or its
        worker crashes. A line may print again only where the work itself is done again: a
        step the durability mode had not committed before a crash, or a real process death
        before the engine saved its wake-ups."""
        if not self.is_replaying:
            print(f"[{self.run_id} t={self._port.clock.now():g}s]", *parts)

    # --- internals -------------------------------------------------------------------------
    def _check(self) -> None:
        # Workflow code that swallowed a NonDeterminismError must not carry on recording.
        if self.diverged is not None:
            raise self.diverged

    def _expect(self, kind, name, frame, args, kwargs):
        try:
            return self._cursor.expect(kind, name, frame, args, kwargs)
        except NonDeterminismError as exc:
            self.diverged = exc
            raise
        except h.CancelledHere as here:
            raise self._told(here.event) from None

    def _take_end(self, kinds: tuple, name: str):
        """The event that ended the wait just replayed, if history has one. A wait blocks,
        so the ends of concurrent work appended meanwhile come first (`Cursor.absorb`)."""
        self._cursor.absorb()
        told = self._cursor.cancelled()
        if told is not None:
            raise self._told(told)
        event = self._cursor.peek()
        if event is None:
            return None
        if event.kind not in kinds or event.name != name:
            self.diverged = self._cursor.diverged(event, kinds[0], name, None, None,
                                                  "different_call")
            raise self.diverged
        return self._cursor.take()

    def _record(self, kind, name, args, value_json, frame, kwargs=None):
        return self._port.record_event(self._state, self._cursor, kind, name, args,
                                       value_json, h.site(frame), kwargs)

    # --- cancellation ----------------------------------------------------------------------
    def _cancel_here(self, frame) -> None:
        """`engine.cancel` asked this run to stop and its code has not been told: record
        that it is told at this call, and raise `dl.Cancelled` here."""
        self._state.cancel_pending = False
        event = self._record(h.CANCELLED, "cancelled", None,
                             json.dumps({"reason": self._state.cancel_reason}), frame)
        raise self._told(event)

    def _told(self, event: h.Event) -> Cancelled:
        """The `Cancelled` a CANCELLED event in history raises at its call."""
        return cancelled(self.run_id, (event.loads() or {}).get("reason"), event.position)


# Concurrent work (handles) builds on Context, so it is imported after it: durablelab.handles.
from .handles import Handle, start_activity, start_child, wait_for  # noqa: E402
