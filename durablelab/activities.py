"""Activity attempts: how one `ctx.activity` call meets the world.

An attempt passes these points in order, and each can end it:

1. the retry backoff must have elapsed (a durable timer; a crash does not restart it);
2. the run's turn budget and the activity's circuit breaker may refuse it;
3. a `Crash("…", point="before_activity")` may kill the worker;
4. fault rules are drawn: `Latency` adds time, the first other rule that fires decides
   (a 429, a 5xx, a reset: the function does not run; `Timeout`: it runs and its answer
   is lost; `Hang`: nothing runs and nothing answers; `Malformed`: it runs and its answer
   is broken);
5. the function runs, getting ``idempotency_key=`` (and ``feedback=`` after a malformed
   answer) when it accepts them; then `after_effect` crashes may fire;
6. time-outs cut the attempt at start-to-close, schedule-to-close or the run's time-out;
7. the attempt ends now, or later in virtual time (other runs go first meanwhile);
8. its end is recorded: the activity's event (success, or failure for good), or a failed
   attempt plus the delay before the next one; then `after_record` crashes may fire and
   the run's budget is checked.

The engine owns one `AttemptRunner` and hands it a `Host`: the few things of the engine an
attempt may touch (the clock, the store, the runs, how to record, when to schedule). The
engine calls in through these methods only: `execute` (a new `ctx.activity`), `launch` (an
attempt of a `ctx.start_activity`, left to end beside the code), `finish` (an attempt that
was in flight has ended), `die` (the worker's death), `fresh_worker` (memory forgotten), and
the crash point armed during a wait (`arm_crash_during_wait`, then `crash_during_wait` when it
falls due).
"""

from __future__ import annotations

import inspect
import json
import sys
from dataclasses import dataclass
from types import MethodType
from typing import TYPE_CHECKING, Any, Callable, Protocol

from . import aio, fastjson, heartbeat
from . import history as h
from .breaker import BreakerState
from .budget import DISCARDED_KEYS, answer_usage, discarded_usage
from .clock import later, within
from .context import Request, StopRun, Suspend
from .draws import Draws, first
from .errors import (BudgetExceeded, DurableLabError, ModelOutputError, NonRetryable,
                     RateLimited, Transient, activity_failed)
from .faults import Crash, Hang, Latency, Malformed, Timeout, draw_key
from .limits import SharedLimits
from .records import AttemptRecord, CrashRecord, FaultRecord
from .retry import RetryPolicy, classify, next_delay, previous_wait

if TYPE_CHECKING:
    from .clock import VirtualClock, WallClock
    from .runstate import RunState
    from .store import Store


class WorkerCrash(BaseException):
    """The simulated worker died. A BaseException: workflow code must not survive it."""


def outcome_of(error: DurableLabError) -> str:
    """The attempt outcome a view colours by: transient, rate_limited, timeout, ..."""
    cause = error.cause_class or ""
    if cause == "CircuitOpen":
        return "circuit_open"
    if cause == "ThrottledLocally":   # durablelab.limits; a 429 may be named Throttled
        return "throttled"
    if "Timeout" in cause:
        return "timeout"
    if isinstance(error, RateLimited):
        return "rate_limited"
    if isinstance(error, ModelOutputError):
        return "malformed"
    if isinstance(error, NonRetryable):
        return "non_retryable"
    return "transient"


_ACCEPTS: dict[Callable, tuple[bool, bool]] = {}


def accepts(fn: Callable) -> tuple[bool, bool]:
    """Whether fn takes idempotency_key= and feedback= (by name or through **kwargs)."""
    if type(fn) is MethodType:   # a bound method: its function's (a world per run)
        fn = fn.__func__
    found = _ACCEPTS.get(fn)
    if found is None:
        try:
            params = inspect.signature(getattr(fn, "__func__", fn)).parameters
        except (TypeError, ValueError):
            params = {}
        var_kw = any(p.kind is p.VAR_KEYWORD for p in params.values())
        found = (var_kw or "idempotency_key" in params, var_kw or "feedback" in params)
        try:
            _ACCEPTS[fn] = found
        except TypeError:
            pass
    return found


@dataclass(slots=True)
class Attempt:
    """One attempt from its start to its record: made by `execute`, ended by `finish`,
    and kept as the run's `inflight` while it lasts past a wake-up."""

    name: str
    position: int
    attempt: int
    policy: RetryPolicy
    started_at: float
    ended_at: float
    error: Any                     # the ActivityError it ended with, or None
    value_json: str | None
    text: str                      # the canonical JSON of [args, kwargs]
    args: Any
    kwargs: dict
    first_started_at: float        # the activity's first attempt (schedule_to_close)
    schedule_to_close: float | None
    start_to_close: float | None
    heartbeat: float | None
    call_site: Any                 # the frame while the code runs, its "file:line" after
    kept: Any                      # what `Event.loaded` may hold of the value
    handle: bool = False           # started by ctx.start_activity: its end is appended


def _leave_in_flight(state, outcome: Attempt) -> None:
    """Leave an attempt in flight, to end later in virtual time. Its arguments are kept as
    their JSON round trip (the workflow's own objects may change before it ends), and its
    call site as text (the frame is gone by then)."""
    outcome.args, outcome.kwargs = json.loads(outcome.text)
    outcome.call_site = h.site(outcome.call_site)
    state.inflight = outcome


class Host(Protocol):
    """The engine as an `AttemptRunner` sees it: everything an attempt may read or change.
    An engine hands its runner one (`port.EnginePort`); `tests/test_engine_layout.py` checks
    the runner uses nothing else."""

    #: the engine's clock (read each time: a sweep gives its engine a new one per run).
    clock: "VirtualClock | WallClock"
    #: where facts about the world go at once in every durability mode: fault firings,
    #: crashes, heartbeats, the usage of broken model answers.
    store: "Store"
    #: every loaded run by id: a worker's death loses all their attempts in flight.
    runs: "dict[str, RunState]"

    def append(self, state, cursor: h.Cursor, event: h.Event) -> h.Event:
        """Record a history event (committed when the durability mode says)."""

    def write(self, state, table: str, row: tuple) -> None:
        """Record a row of another history table, e.g. a failed attempt (the same way)."""

    def free_until(self, instant: float) -> bool:
        """Whether nothing else is due up to `instant`, so an attempt ending then may end
        inline (the clock jumps there) instead of suspending its run."""

    def schedule(self, state, due_at: float, action: str, arg=None,
                  new_generation: bool = True) -> None:
        """Put an action for the run on the engine's heap (a crash during a wait, a
        started activity's end or retry)."""

    def attempt_ended(self, state, attempt: "Attempt", error) -> None:
        """Tell the engine's observers (logs, traces) an attempt ended."""


class AttemptRunner:
    """Runs activity attempts and injects faults into them, for the engine that owns it."""

    def __init__(self, host: Host):
        # The host holds its engine weakly (`port.EnginePort`), so an engine dropped without
        # close() is freed at once, with its DuckDB connection, runner and all.
        self.host: Host = host
        self.fresh_worker()

    def fresh_worker(self) -> None:
        """Forget what the worker kept in memory for its runs (a crash, `Engine.forget`):
        its circuit breakers, retry quotas and throttles start afresh."""
        #: activity name -> BreakerState: the worker's circuit breakers, shared by its runs.
        self.breakers: dict[str, BreakerState] = {}
        #: the retry quotas and client-side throttles, shared the same way.
        self.limits = SharedLimits()

    def execute(self, state, cursor: h.Cursor, req: Request) -> Any:
        """Run one attempt of a new activity, then finish it (or leave it in flight)."""
        outcome = self.begin(state, req, cursor.position + 1)
        ended, now, clock = outcome.ended_at, outcome.started_at, self.host.clock
        if ended > now:
            name, position, attempt = req.name, outcome.position, outcome.attempt
            if ended == float("inf"):   # no time-out will ever end it: the run hangs
                _leave_in_flight(state, outcome)
                raise Suspend(None, "activity", name=name, position=position, attempt=attempt)
            if not clock.virtual:
                clock.sleep_until(ended)
            elif self.host.free_until(ended):
                clock.advance_to(ended)  # nothing else happens meanwhile: carry on inline
            else:
                _leave_in_flight(state, outcome)
                raise Suspend(ended, "activity", name=name, position=position, attempt=attempt)
        return self.finish(state, cursor, outcome)

    def launch(self, state, position: int, req: Request) -> None:
        """Start an attempt of the activity `ctx.start_activity` began at `position`, to
        end in virtual time beside the code (`finish` records it when the engine gets
        there); if its retry backoff has not elapsed, come back when it has."""
        try:
            outcome = self.begin(state, req, position)
        except Suspend as backoff:
            self.host.schedule(state, backoff.due_at, "launch", position, new_generation=False)
            return
        outcome.handle = True
        outcome.args, outcome.kwargs = json.loads(outcome.text)
        state.flying[position] = outcome
        if outcome.ended_at != float("inf"):   # a hang without a time-out never ends
            self.host.schedule(state, outcome.ended_at, "finish", position,
                               new_generation=False)

    def begin(self, state, req: Request, position: int) -> "Attempt":
        """Make one attempt of activity `req` at `position`: faults drawn, the function
        called (unless a fault or the breaker stops it), time-outs applied. Returns the
        attempt, to end at its `ended_at`; raises `Suspend` while its retry backoff has
        not elapsed."""
        name, policy, site = req.name, req.policy, req.site
        text = h.canonical(req.args, req.kwargs, "ctx.activity", site, name)
        clock = self.host.clock
        now = clock.now()
        previous = state.attempts.get(position)
        if previous:
            last = previous[-1]
            due_at = last.ended_at + last.delay
            if due_at > now:  # the retry backoff has not elapsed: a durable timer
                raise Suspend(due_at, "retry", name=name, position=position,
                              attempt=last.attempt)
            attempt = len(previous) + 1
        else:
            previous, attempt = (), 1
        budget = state.budget
        if budget is not None and budget.turns is not None and state.spend.turns >= budget.turns:
            raise StopRun(BudgetExceeded.build(state.run_id, "turns", state.spend.turns + 1,
                                               budget.turns, name, position))
        faults = state.faults
        crashes = faults is not None and faults.crashes()
        if crashes:
            self._maybe_crash(state, "before_activity", name, position, attempt)
        breaker = self._breaker(name, policy) if policy.breaker is not None else None
        latency, error, rule = 0.0, None, None
        if breaker is not None:
            error = breaker.refuse(name, now)
        if error is None and policy.throttle is not None:
            error = self.limits.refuse(policy, name, now, Draws(
                f"throttle:{state.seed}:{state.run_id}:{position}:{attempt}"))
        if error is None and faults is not None:
            latency, rule = self._draw_faults(state, name, position, attempt)
        value_json = kept = None
        if error is not None:
            pass  # the breaker or the throttle refused: nothing is called
        elif rule is None or isinstance(rule, (Timeout, Malformed)):
            value_json, error, kept, answer_in = self._call(state, req, position, previous)
            latency += answer_in   # the world's own time to answer (dl.sim.after)
            if crashes:
                self._maybe_crash(state, "after_effect", name, position, attempt)
            if isinstance(rule, Malformed) and error is None:
                value_json, error, kept = None, rule.error(value_json), None
            elif isinstance(rule, Timeout):
                value_json, error, latency, kept = None, None, float("inf"), None
        elif isinstance(rule, Hang):
            latency = float("inf")   # silent: not even a heartbeat comes (see _cut)
        else:
            error = rule.failure()
        first_started_at = previous[0].started_at if previous else now
        ended = later(now, latency)   # a huge latency ends at the last instant, not inf
        if (req.start_to_close is not None or req.schedule_to_close is not None
                or req.heartbeat is not None or (state.timeout is not None and ended >
                                                    state.started_at + state.timeout)):
            ended, timed_out = self._cut(state, req, now, ended, first_started_at,
                                         silent=isinstance(rule, Hang))
            if timed_out is not None:
                value_json, kept, error = None, None, Transient(
                    f"activity {name!r} timed out: {timed_out} passed before it answered",
                    cause_class="TimeoutError")
        return Attempt(name, position, attempt, policy, now, ended, error, value_json, text,
                       req.args, req.kwargs, first_started_at, req.schedule_to_close,
                       req.start_to_close, req.heartbeat, site, kept)   # site: see finish()

    def _draw_faults(self, state, name, position, attempt):
        """(added latency, the rule that decides the attempt or None)."""
        latency = 0.0
        if state.faults is None:
            return latency, None
        for index, rule in state.faults.applicable(name, attempt, position=position):
            rng = self._fires(state, index, rule, position, attempt)
            if rng is None:
                continue
            row = self._record_fault(state, index, rule, position, attempt)
            self.host.store.insert("faults", row)
            if isinstance(rule, Latency):
                latency += rule.draw(rng)
            else:
                return latency, rule
        return latency, None

    def _cut(self, state, req, started_at, ended_at, first_started_at, silent=False):
        """Apply the nearest time-out: (when the attempt ends, which limit cut it or None).
        A silent attempt (a hang) also misses its first heartbeat, if it promised one."""
        limits = [(req.heartbeat if silent else None, started_at, "heartbeat"),
                  (req.start_to_close, started_at, "start_to_close"),
                  (req.schedule_to_close, first_started_at, "schedule_to_close"),
                  (state.timeout, state.started_at, "the run's time-out")]
        cut = None
        for limit, since, label in limits:
            if limit is not None and since + limit < ended_at:
                ended_at, cut = since + limit, f"{label}={limit:g}s"
        return ended_at, cut

    def _breaker(self, name: str, policy) -> BreakerState | None:
        if policy.breaker is None:
            return None
        state = self.breakers.get(name)
        if state is None or state.config != policy.breaker:
            state = self.breakers[name] = BreakerState(policy.breaker)
        return state

    def _call(self, state, req: Request, position: int, previous):
        """Call the activity function; returns (value_json, error, kept, seconds): `kept`
        is what `Event.loaded` may hold of the value (see `fastjson.kept`), so the caller
        gets its copy instead of parsing the JSON just written; `seconds` how long the
        world took to answer (`dl.sim.after`; 0 for a plain return or raise)."""
        fn, name = req.fn, req.name
        kwargs = req.kwargs
        takes_key, takes_feedback = accepts(fn)
        seconds = 0.0
        if takes_key and "idempotency_key" not in kwargs:
            kwargs = {**kwargs, "idempotency_key": f"{state.run_id}:{position}"}
        if takes_feedback and previous and previous[-1].error_class == "ModelOutputError":
            kwargs = {**kwargs, "feedback": previous[-1].error}
        try:
            with heartbeat.attempt(self.host.store, self.host.clock, state.run_id, position,
                                   len(previous) + 1, name):
                result = fn(*req.args, **kwargs)
                if aio.awaitable(result):   # an `async def` activity
                    result = aio.run(result)
                # The world answers later (dl.sim.after). Its module loads with dl.sim, and
                # no such answer exists before: `import durablelab` stays the core alone.
                after = sys.modules.get("durablelab.after")
                if after is not None and type(result) is after.After:
                    seconds = result.seconds
                    if result.error is not None:
                        raise result.error
                    result = result.value
        except Exception as exc:
            if req.policy.is_non_retryable(exc) and not isinstance(exc, NonRetryable):
                cause = type(exc).__name__
                return None, NonRetryable(h.storable_text(f"{cause}: {exc}"),
                                          cause_class=cause), None, seconds
            error = classify(exc)
            if error.cause_class is None:
                error.cause_class = error.error_class
            error.message = h.storable_text(error.message)
            return None, error, None, seconds
        try:
            text = h.compact(result)
        except (TypeError, ValueError) as exc:
            return None, NonRetryable(
                f"the result of activity {name!r} at position {position} is not "
                f"JSON-serialisable ({exc}); its effect already happened, but history can "
                f"only hold JSON. Return plain data (a dict, list, str, number).",
                cause_class="SerializationError"), None, seconds
        return text, None, fastjson.kept(result, text), seconds

    def finish(self, state, cursor: h.Cursor, o: dict) -> Any:
        """Record an attempt's end: the activity's event, or a failed attempt and its retry.
        `o.call_site` is the frame of the ctx call, still running (its line is formatted
        only for an event), or its "file:line" once the attempt was left in flight."""
        error, name, position, attempt = o.error, o.name, o.position, o.attempt
        self.host.attempt_ended(state, o, error)
        breaker = self.breakers.get(name)
        if breaker is not None and o.policy.breaker is not None:
            refused = error is not None and error.cause_class == "CircuitOpen"
            if not refused:
                breaker.record(None if error is None else error.error_class, o.ended_at)
        # The end of a started activity is appended after whatever history holds by now,
        # naming the position that started it; any other activity's is at its position.
        at, handle = (len(state.history) + 1, position) if o.handle else (position, None)
        if error is None:
            if o.policy.budget is not None or o.policy.throttle is not None:
                self._limits_end(o, state, False)
            text = o.text
            event = h.Event(at, h.ACTIVITY, name, h.digest_of(text), True,
                            o.value_json, o.ended_at, attempt, o.started_at, "ok",
                            call_site=h.site(o.call_site), args=h.shown_args(text),
                            handle=handle)
            event.matched_args = fastjson.matched_args(o.args, o.kwargs) or json.loads(text)
            event.loaded = o.kept
            self.host.append(state, cursor, event)
            if state.faults is not None and state.faults.crashes():
                self._maybe_crash(state, "after_record", name, position, attempt)
            result = event.loads()
            if state.budget is not None:
                self._check_budget(state, name, position)
            return result
        policy = o.policy
        previous = state.attempts.get(position, [])
        malformed = sum(1 for row in previous if row.error_class == "ModelOutputError")
        burnt = isinstance(error, ModelOutputError) and self._burn(state, error)
        if isinstance(error, ModelOutputError):
            retry = malformed + 1 <= policy.model_output_budget
            why = f"its model-output budget ({policy.model_output_budget} retries) is spent"
        elif isinstance(error, NonRetryable):
            retry, why = False, "its error is not retryable"
        else:
            retry = policy.allows(attempt - malformed)
            why = f"its retries are spent (max_attempts={policy.max_attempts})"
        if retry:
            rng = Draws(f"retry:{state.seed}:{state.run_id}:{position}:{attempt}")
            # Clamped, not refused: the policy cannot know the instant it is used at, and
            # a backoff past the last instant a float holds would save `inf` (clock.within).
            delay = within(o.ended_at, next_delay(policy, attempt, error, rng,
                                                  previous_wait(previous)))
            limit = o.schedule_to_close
            if limit is not None and o.ended_at + delay > o.first_started_at + limit:
                retry = False
                why = f"the next attempt would start after schedule_to_close={limit:g}s"
        if policy.budget is not None or policy.throttle is not None:
            refused = self._limits_end(o, state, retry)
            if refused is not None:
                retry, why = False, refused
        if retry:
            row = AttemptRecord(state.run_id, position, name, attempt, o.started_at,
                                o.ended_at, outcome_of(error), error.error_class,
                                error.message, delay, policy.max_attempts)
            state.attempts.setdefault(position, []).append(row)
            self.host.write(state, "attempts", row)
            if burnt:
                self._check_budget(state, name, position)
            raise Suspend(o.ended_at + delay, "retry", name=name, position=position,
                          attempt=attempt)
        call_site = h.site(o.call_site)
        failed = activity_failed(state.run_id, name, position, attempt, error, why, call_site)
        text = o.text
        event = h.Event(at, h.ACTIVITY, name, h.digest_of(text), False,
                        json.dumps(failed.to_json()), o.ended_at, attempt, o.started_at,
                        outcome_of(error), error.error_class, error.message,
                        call_site=call_site, args=h.shown_args(text), handle=handle)
        event.matched_args = fastjson.matched_args(o.args, o.kwargs) or json.loads(text)
        self.host.append(state, cursor, event)
        self._maybe_crash(state, "after_record", name, position, attempt)
        if burnt:
            self._check_budget(state, name, position)
        raise failed

    def _limits_end(self, o: Attempt, state, retrying: bool) -> str | None:
        """Count an ended attempt in its policy's throttle and quota (`durablelab.limits`);
        why the quota refuses the retry, or None."""
        return self.limits.ended(o.policy, o.name, (state.run_id, o.position), o.ended_at,
                                 o.error, retrying,
                                 o.error is not None and outcome_of(o.error) == "timeout")

    def _burn(self, state, error: ModelOutputError) -> bool:
        """Record a broken answer's usage in the run's sum at once, budget or not: the
        model billed it, and `compare`, `ops` and sweeps read the sum. Counted in a budgeted
        run's spend; True if that run has a budget to check."""
        own = answer_usage(error.usage)   # without what it folded in: recorded already
        if own is None:
            return False
        usage = discarded_usage(dict(zip(("input_tokens", "output_tokens", "cost"), own),
                                     calls=1))
        burnt = discarded_usage(self.host.store.burnt(state.run_id)) or dict.fromkeys(
            DISCARDED_KEYS, 0)
        for key in DISCARDED_KEYS:
            burnt[key] += usage[key]
        self.host.store.save_burnt(state.run_id, json.dumps(burnt, sort_keys=True))
        if state.budget is None:
            return False
        state.spend.burn(usage)
        return True

    def _check_budget(self, state, name: str, position: int) -> None:
        if state.budget is None:
            return
        over = state.spend.over(state.budget)
        if over is not None:
            raise StopRun(BudgetExceeded.build(state.run_id, *over, name, position))

    # --- faults and crashes --------------------------------------------------------------
    def _fires(self, state, index: int, rule, position: int, attempt: int):
        """The rule's draws (see `faults.draw`) if it fires on this attempt, else None."""
        if rule.between is not None and not rule.active_at(self.host.clock.now()):
            return None
        crash = isinstance(rule, Crash)
        if rule.times is not None or crash:
            rows = [r for r in state.fault_rows if r.rule == index]
            if rule.times is not None and len(rows) >= rule.times:
                return None
            if crash and any(r.position == position and r.attempt == attempt for r in rows):
                return None  # a crash point fires once: the recovered worker passes it
        key = draw_key(state.seed, index, position, attempt,   # `draw`'s, drawn from once
                       state.run_id if state.faults.per_run else None)
        return Draws(key, drawn=1) if first(key) < rule.p else None

    def _record_fault(self, state, index, rule, position, attempt) -> FaultRecord:
        """Note a firing in memory and return its row; the caller commits it."""
        row = FaultRecord(state.run_id, index, type(rule).__name__,
                          getattr(rule, "point", None), position, attempt,
                          self.host.clock.now())
        state.fault_rows.append(row)
        return row

    def crash_point(self, state, point: str, name: str, position: int) -> None:
        """The worker may die here (a `Crash` rule for `name` at `point`): for the points
        a run passes outside an attempt, such as the start of a child run."""
        self._maybe_crash(state, point, name, position, 1)

    def _maybe_crash(self, state, point, name, position, attempt) -> None:
        if state.faults is None:
            return
        for index, rule in state.faults.applicable(name, attempt, point, position):
            if self._fires(state, index, rule, position, attempt) is not None:
                self._crash_at(state, index, rule, position, attempt)

    def _crash_at(self, state, index, rule, position, attempt) -> None:
        fault = self._record_fault(state, index, rule, position, attempt)
        cause = f"Crash rule {index} ({rule.activity!r} at {rule.point})"
        self.die(cause, state.run_id, position, rule.point, faults=[fault])

    def die(self, cause: str, run_id=None, position=None, point=None, faults=()) -> None:
        """Commit the facts of a worker's death, then unwind to the scheduler. Attempts in
        flight are lost with the worker; one that promised heartbeats (or has a
        start-to-close) is noticed as lost when the next heartbeat (or the time-out) is
        missed, and recorded as a timed-out attempt, so its retry waits until then; any
        other is recorded as crashed and runs again as soon as a fresh worker is up."""
        now = self.host.clock.now()
        lost = [row for state in self.host.runs.values()
                for o in (state.inflight, *state.flying.values()) if o is not None
                for row in (self._lost_attempt(state, o),)]
        self.host.store.write({"faults": list(faults), "attempts": lost,
                          "crashes": [CrashRecord(now, run_id, position, point, cause)]})
        raise WorkerCrash(cause)

    def _lost_attempt(self, state, o: Attempt) -> AttemptRecord:
        """The attempts row of a run's attempt in flight when the worker died."""
        now = self.host.clock.now()
        if o.heartbeat is not None:      # the last heartbeat went out just before death
            noticed, how = later(now, o.heartbeat), f"no heartbeat within {o.heartbeat:g}s"
        elif o.start_to_close is not None:
            noticed = max(now, later(o.started_at, o.start_to_close))
            how = f"no answer within start_to_close={o.start_to_close:g}s"
        else:   # nothing but the fresh worker can notice it, and it runs it again at once
            return AttemptRecord(state.run_id, o.position, o.name, o.attempt,
                                 o.started_at, now, "crashed", None,
                                 "the worker running this attempt died", 0.0,
                                 o.policy.max_attempts)
        return AttemptRecord(state.run_id, o.position, o.name, o.attempt,
                             o.started_at, noticed, "timeout", "Transient",
                             f"the worker running this attempt died; noticed by {how}", 0.0,
                             o.policy.max_attempts)

    def arm_crash_during_wait(self, state, suspend: Suspend) -> None:
        if state.faults is None or not state.faults.crashes():
            return
        for index, rule in state.faults.applicable(suspend.name, suspend.attempt, "during_wait",
                                                   suspend.position):
            if self._fires(state, index, rule, suspend.position, suspend.attempt):
                now = self.host.clock.now()
                at = now if suspend.due_at is None else now + (suspend.due_at - now) / 2
                self.host.schedule(state, at, "crash",
                                    (index, suspend.position, suspend.attempt),
                                    new_generation=False)
                return

    def crash_during_wait(self, state, index: int, position: int, attempt: int) -> None:
        rule = state.faults.rules[index]
        if self._fires(state, index, rule, position, attempt) is not None:
            self._crash_at(state, index, rule, position, attempt)
