"""Engine: the discrete-event scheduler that wakes runs, executes activities, and recovers.

A run is a history in storage plus a schedule: when it should wake next. The engine keeps
one heap of things due (a run to wake, an in-flight attempt to finish, a crash to inject)
ordered by virtual time, pops the earliest, moves the clock there, and acts. Waking a run
means calling its workflow function from the top with a fresh `Context`; the code replays
history until it asks for something new, does that, and either finishes or raises `Suspend`
(a timer, a retry backoff, a signal wait, an attempt still in flight), which puts the run
back on the heap. Many runs share the heap and the clock, so simulated services see their
requests in virtual-time order, and 1,000 runs retrying without jitter really do collide.
(A sticky engine, as a sweep's are, keeps a waiting run's code in memory and resumes it
instead of calling it from the top: the same history, made faster; `sticky.py`.)

A worker crash (a `Crash` fault or `engine.crash()`) throws away everything in memory and
reloads every unfinished run from the store, as a fresh process would; what the durability
mode had not committed is gone.

The engine's parts each live in a module of their own: one activity attempt
(`activities.py`), started activities, child runs and cancels (`concurrency.py`), a store
read back into runs (`loading.py`), which function runs each run (`registry.Definitions`),
and when recorded rows reach the store (`journal.py`). Those that act on the engine reach it
only through its port (`port.py`).
"""

from __future__ import annotations

import heapq
import inspect
import json
import os
import uuid as _uuid
import warnings
import weakref
from dataclasses import replace
from typing import Any, Callable

from . import history as h
from .activities import AttemptRunner, WorkerCrash
from .budget import Budget, discarded_usage
from .clock import VirtualClock, later
from .concurrency import Concurrency
from .context import Context, StopRun, Suspend, execute
from .errors import (ActivityFailed, DuplicateRunError, NonDeterminismError, RunFinishedError,
                     RunNotFoundError, RunTimedOut, SerializationError, bad_type, bad_value,
                     check_json_keys, check_later, check_seconds, check_seed, check_text,
                     engine_closed, not_a_clock, not_a_path, read_only_beside_writer,
                     read_only_engine, read_only_needs_path, unknown_workflows, workflow_error,
                     workflow_redefined)
from .faults import FaultPlan
from .guard import Guard
from .journal import JOURNALS
from .loading import Loader
from .observe import LogObserver, notify
from .sticky import StickyCache
from .port import EnginePort
from .queued import MemoryStore
from .records import RunEnd, SignalRecord, WakeupRecord, waiting_columns
from .registry import LIVE, REGISTRY, Definitions, current_definition, register, workflow_name
from .retry import Overrides
from .runstate import CANCEL_SIGNAL, FINAL, RunState, Signal, options_json, snapshot_of
from .snapshot import RunSnapshot
from .store import Store, event_row

DURABILITY = tuple(JOURNALS)   # ("sync", "batch", "exit"): see durablelab/journal.py
#: Every status a run can have (DESIGN.md section 6), for `runs(status=...)`.
STATUSES = ("running", "waiting", "diverged") + FINAL

#: The engine holding each file (by real path): one per file per process.
_HOLDERS: "weakref.WeakValueDictionary[str, Engine]" = weakref.WeakValueDictionary()


def _statuses(status) -> tuple:
    """`runs(status=...)`'s argument as a tuple of known statuses."""
    given = (status,) if isinstance(status, str) else status
    try:
        given = tuple(given)
    except TypeError:
        given = (status,)
    unknown = [s for s in given if s not in STATUSES]
    if unknown or not given:
        raise bad_value("runs(status=...)", "status", (
            f"status={status!r} names no run status; use one of "
            f"{', '.join(map(repr, STATUSES))}, or a list of them"))
    return given


def _location(exc: BaseException) -> str | None:
    """'file:line in function' of the innermost frame outside durablelab."""
    tb, found = exc.__traceback__, None
    while tb is not None:
        code = tb.tb_frame.f_code
        if "/durablelab/" not in code.co_filename.replace("\\", "/"):
            found = f"{code.co_filename}:{tb.tb_lineno} in {code.co_name}"
        tb = tb.tb_next
    return found


class Engine:
    """Runs durable workflows over a DuckDB history.

    Args:
        path: a DuckDB file, or None for an in-memory database (it then plays the disk for
            the life of this engine: `crash()` keeps it; what it commits is queued and
            written to DuckDB in bulk before anything reads it, so sweeps stay fast).
        clock: `VirtualClock()` (default: time jumps to whatever is due next) or
            `WallClock()`. A virtual clock starts no earlier than the latest instant the
            file recorded, so time never runs backwards for a run.
        durability: "sync" commits each event before the code sees it; "batch" commits
            once per wake-up; "exit" commits a run's events only when it ends (and at a
            clean `close()`). Faster modes lose more to a crash: that trade-off is a lesson.
            One journal object (`durablelab/journal.py`) holds all that differs.
        workflows: workflow functions this engine may resume, registered with the process
            (as `start()` and `@dl.workflow` register them). Only registered workflows run:
            an unfinished run whose workflow nobody registered keeps its recorded status,
            is not scheduled, and an `UnknownWorkflowWarning` names it when the engine opens.
        guard: the determinism guard (`durablelab.guard`): workflow code that calls
            time.time(), random, uuid4, os.environ, open() ... fails at the call with
            `DeterminismGuardError`. False turns it off (the lesson on silent divergence).
        world: the simulated world (services, models, limiters) its runs' workflow code
            reaches as `ctx.world`. It lives outside the worker: nothing about it is
            recorded, and `crash()` does not reset it.
        read_only: open an existing file only to look at its runs (`run`, `runs`), as the
            `durablelab` command does: DuckDB refuses every write, no workflow code runs,
            `close()` saves nothing, and the engine takes no file over. Calls that would
            record (`start`, `signal`, `advance`, `run_until_idle`, `crash`) raise
            `ReadOnlyEngineError`.
        payload_threshold: a recorded value longer than this many bytes of JSON (a 2 MB
            document an activity returns) is stored once, under its digest, in the store's
            `payloads` table, and its event holds the reference: ten activities returning
            the same document store it once. Replay, views and exports resolve it. None
            (the default): every value inline.
        sticky: keep a run's code in memory where it waits, and resume it at its next wake-up
            instead of running it again from the top (`durablelab/sticky.py`, Temporal's
            sticky cache): the same histories, faster. Off by default, so runs replay on
            every wake-up as the lessons show; the engines `dl.sweep` builds park.

    One engine per file per process: opening a second engine on a file closes the first (as
    `close()` would) and takes the file over; the first then refuses calls. Another process
    holding the file gives `StoreLockedError`.

    `Engine()`, `start()` and `signal()` only load, record and schedule; workflow code runs
    only inside `run_until_idle()` and `advance()`.
    """

    def __init__(self, path=None, clock=None, durability: str = "sync", workflows=(),
                 guard: bool = True, world=None, read_only: bool = False,
                 payload_threshold: int | None = None, sticky: bool = False):
        if durability not in DURABILITY:
            raise bad_value("Engine", "durability", (
                f"durability={durability!r} is not a durability mode; use one of "
                f"{', '.join(map(repr, DURABILITY))} (sync commits each event before the "
                f"code sees it, batch once per wake-up, exit when the run ends)."))
        if not isinstance(sticky, bool):
            raise bad_type("Engine", "sticky", (
                f"sticky={sticky!r} must be True (resume a waiting run's code where it waits) or "
                f"False (run its code again from the top on every wake-up)"))
        if callable(workflows) or isinstance(workflows, (str, bytes)):
            raise bad_type("Engine", "workflows", (
                f"workflows={workflows!r} must be a list of workflow functions, "
                f"for example workflows=[my_flow]."))
        workflows = list(workflows)
        for fn in workflows:
            workflow_name(fn)
        if read_only and path is None:
            raise read_only_needs_path()
        if path is not None and not (isinstance(path, str) or (
                isinstance(path, os.PathLike) and isinstance(os.fspath(path), str))):
            raise not_a_path(path)   # str(123) would make a file called "123"
        if clock is not None and (isinstance(clock, type) or not all(
                callable(getattr(clock, m, None)) for m in ("now", "advance_to", "sleep_until"))
                or not hasattr(clock, "virtual")):
            raise not_a_clock(clock)
        self.path = None if path is None else str(path)
        self.read_only = bool(read_only)
        self.clock = clock if clock is not None else VirtualClock()
        self._closed = False
        self._superseded = False
        # One engine per file per process: a newer one takes the file over, so two engines
        # never run the same runs (re-running the notebook cell that opens it just works).
        holder_key = None if self.path is None else os.path.realpath(self.path)
        older = None if holder_key is None else _HOLDERS.get(holder_key)
        if older is not None and not older._closed:
            if self.read_only:   # a reader does not take a file over; DuckDB would refuse
                raise read_only_beside_writer(self.path)
            older.close()
            older._superseded = True
        if payload_threshold is not None and (isinstance(payload_threshold, bool) or not
                                              isinstance(payload_threshold, int)
                                              or payload_threshold < 1):
            raise bad_value("Engine", "payload_threshold", (
                f"payload_threshold={payload_threshold!r} must be a number of bytes >= 1 (for "
                f"example 65536), or None to keep every value inline"))
        self.store = (MemoryStore(payload_threshold) if self.path is None else
                      Store(self.path, read_only=self.read_only,
                            payload_threshold=payload_threshold))
        #: when a run's recorded rows reach the store: all that the durability mode decides.
        self._journal = JOURNALS[durability](self.store)
        if holder_key is not None and not self.read_only:
            _HOLDERS[holder_key] = self
        #: the simulated world workflow code reaches as `ctx.world` (see the class docstring).
        self.world = world
        self.guard = bool(guard)
        self._guard = Guard(Context) if guard else None
        #: runs whose code waits in memory between wake-ups (`sticky.StickyCache`), or None:
        #: replay from the top every time
        self._sticky = StickyCache(self._guard) if sticky else None
        #: which function runs each run (`registry.Definitions`)
        self._code = Definitions(workflows)
        self._runs: dict[str, RunState] = {}
        self._heap: list = []
        self._seq = 0
        self._bound: float | None = None
        self._telemetry: list[tuple] = []
        #: who hears of run starts, wake-ups, attempts and run ends (`durablelab.observe`):
        #: the log (silent until logging is configured), and `dl.tracing.instrument`'s.
        self.observers: list = [LogObserver()]
        #: what a run's `Context` and the engine's parts reach of it (`port.EnginePort`).
        self._port = EnginePort(weakref.proxy(self))
        #: runs activity attempts; it sees this engine only as an `activities.Host`.
        self._attempts = AttemptRunner(self._port)
        #: started activities, child runs and cancels (`durablelab/concurrency.py`).
        self._concurrency = Concurrency(self._port)
        #: reads the store back into runs, at opening and after a crash (`loading.py`).
        self._loader = Loader(self.store, self.path, self._port.resolve)
        for fn in workflows:
            register(fn, stacklevel=2)
        self._load(opening=True)
        if not self.read_only:   # a reader runs nothing, so a redefinition is no news to it
            LIVE.add(self)

    @property
    def durability(self) -> str:
        """The durability mode, "sync", "batch" or "exit": what the journal commits when
        (`durablelab/journal.py`)."""
        return self._journal.mode

    # --- public API ----------------------------------------------------------------------
    def start(self, workflow: Callable, input: Any = None, run_id: str | None = None,
              faults=None, seed: int = 0, timeout: float | None = None,
              budget: Budget | None = None, policies=None,
              start_at: float | None = None) -> str:
        """Record a new run of `workflow(ctx, input)` and schedule it; returns its run id.

        `faults` is a `FaultPlan`, a list of rules, or a plan's JSON text or file path.
        `seed` feeds `ctx.random()`, `ctx.uuid()`, retry jitter and fault draws: the same
        seed, code, plan and run id give the same history, byte for byte. `timeout` stops
        the run (status failed, `RunTimedOut`) when that many seconds have passed since its
        start; `budget` (a `dl.Budget`) stops it when it spends more than allowed. The run's
        start is committed at once in every durability mode; its code runs in
        `run_until_idle()`.

        `policies` replaces the retry policy of every matching ``ctx.activity`` call,
        whether the code passes one or not: a `RetryPolicy` for every activity, or
        ``{activity glob: RetryPolicy}`` (the first glob that matches decides; activities no
        glob matches keep their code's policy). It is stored with the run as JSON, so it
        holds after a crash and in a later engine too.

        `start_at` (an instant on the engine's clock, not before now) starts the run then
        instead of now: its start is recorded at once, its code first runs at `start_at`,
        and its time-out and duration count from there (open-loop arrivals, `dl.sweep(...,
        arrivals=)`).
        """
        self._check_writable("start")
        name = workflow_name(workflow)
        call = f"start({name})"
        if inspect.iscoroutinefunction(workflow):
            raise bad_type(call, "workflow", (
                f"{name} is an async def function; workflow code is a plain function run "
                f"again from the top on every wake-up, so it cannot await. Make it a def, "
                f"and run the async work in activities (an async def activity is awaited)"))
        check_seed(seed, call)
        if start_at is not None:
            start_at = check_seconds(start_at, call, "start_at")
            if start_at < self.clock.now():
                raise bad_value(call, "start_at", (
                    f"start_at={start_at!r} is before now (t={self.clock.now():g}s): a run "
                    f"cannot start in the past. Give an instant >= engine.clock.now(), or "
                    f"None to start now"))
        plan = self._plan(faults)
        check_json_keys(input, "the workflow input", f"Engine.start({name})")
        input_json = h.to_json(input, "the workflow input", f"Engine.start({name})")
        if run_id is None:
            run_id = f"run-{_uuid.uuid4().hex[:12]}"
        else:
            check_text(run_id, call, "run_id")
        options = {}   # each option's JSON text
        if timeout is not None:
            timeout = check_seconds(timeout, call, "timeout", positive=True)
            check_later(self.clock.now(), timeout, call, "timeout")   # the run's deadline
            options["timeout"] = h.compact(timeout)
        if budget is not None:
            if not isinstance(budget, Budget):
                raise bad_type(call, "budget", f"budget={budget!r} must be a dl.Budget, for "
                                               f"example dl.Budget(model_calls=20)")
            options["budget"] = json.dumps(budget.to_dict())
        if policies is not None:   # an Overrides is taken as it is (a sweep's, checked once)
            if not isinstance(policies, Overrides):
                policies = Overrides(policies, f"start({name}): policies")
            options["policies"] = policies.to_json()
        register(workflow, stacklevel=2)
        return self._start(name, input_json, run_id, plan, seed, None, options_json(options),
                           fn=workflow, start_at=start_at)

    def signal(self, run_id: str, name: str, value: Any = None,
               signal_id: str | None = None) -> bool:
        """Deliver a signal to a run; it is committed at once and buffered until the run's
        next `ctx.wait_signal(name)`. A repeated `signal_id` (a double-clicked approval) is
        recorded once: returns False for the repeat, True otherwise."""
        self._check_writable("signal")
        call = f"signal({run_id!r}, {name!r})"
        check_text(name, call, "name")
        if name == CANCEL_SIGNAL:
            raise bad_value(call, "name", f"{name!r} is the name engine.cancel() records a "
                                          f"cancel under; to cancel, call engine.cancel(run_id)")
        check_text(signal_id, call, "signal_id", none_ok=True)
        state = self._unfinished(run_id, lambda state: (
            f"Cannot signal run {run_id!r}: it is {state.status} (it ended at "
            f"t={state.ended_at:g}s). A signal can only reach a running or waiting run; "
            f"start a new run instead.{self._missed_deadline(state, name)}"))
        value_json = h.to_json(value, f"the value of signal {name!r}",
                               f"Engine.signal({run_id!r})")
        if signal_id is not None and any(s.signal_id == signal_id for s in state.signals):
            return False
        arrived = Signal(len(state.signals) + 1, name, signal_id, value_json, self.clock.now())
        self.store.insert("signals", SignalRecord(run_id, arrived.seq, name, signal_id,
                                                  value_json, arrived.arrived_at))
        state.signals.append(arrived)
        if state.waiting == "signal" and state.waiting_on == name:
            self._schedule(state, self.clock.now(), "wake", "signal")
        return True

    def cancel(self, run_id: str, reason: str | None = None) -> None:
        """Ask run `run_id` to stop. Recorded at once; its code gets `dl.Cancelled` at the
        ctx call it is blocked in (or at its next one), attempts in flight are abandoned
        (recorded as canceled: a late answer is ignored), and its children are cancelled.
        Code may catch `Cancelled` to clean up (activities still run and are recorded); if
        it propagates, the run ends `cancelled`. Cancelling a run twice is one cancel;
        cancelling a finished run raises `RunFinishedError` naming its state."""
        self._check_writable("cancel")
        check_text(reason, f"cancel({run_id!r})", "reason", none_ok=True)
        state = self._unfinished(run_id, lambda state: (
            f"Cannot cancel run {run_id!r}: it is already {state.status} (it ended at "
            f"t={state.ended_at:g}s). Only a running or waiting run can be cancelled."))
        self._concurrency.cancel(state, reason)

    def run_until_idle(self) -> None:
        """Run everything that is due, advancing the clock, until nothing is left but
        signal waits without a deadline. Crashes injected on the way are recovered from,
        as a fresh worker would. A signal's deadline passes on the way: to answer a wait in
        time, use `run_until_blocked()`."""
        self._check_writable("run_until_idle")
        self._loop(None)

    def run_until_blocked(self) -> None:
        """As `run_until_idle()`, but stop before the earliest deadline of a signal wait:
        return once nothing is due before it, with the clock where the last work was done.
        So start, ``run_until_blocked()``, ``signal()`` approves in time, where
        `run_until_idle()` would have jumped past the deadline."""
        self._check_writable("run_until_blocked")
        self._loop(None, blocked=True)

    def advance(self, seconds: float) -> None:
        """Run what falls due in the next `seconds` of the engine's clock, then stop there."""
        self._check_writable("advance")
        seconds = check_seconds(seconds, "advance", "seconds")
        bound = check_later(self.clock.now(), seconds, "advance", "seconds")
        self._loop(bound)
        self.clock.advance_to(bound)

    def _missed_deadline(self, state: RunState, name: str) -> str:
        """A sentence for a signal that came too late: the run's wait for it timed out."""
        if state.history is None:
            self._loader.history(state, self._runs)
        timed_out = [e for e in state.history or () if e.kind == h.SIGNAL_TIMEOUT
                     and e.name == name]
        if not timed_out:
            return ""
        return (f" Its wait for signal {name!r} timed out at t={timed_out[-1].recorded_at:g}s: "
                f"run_until_idle() runs past a signal's deadline. To signal in time, advance "
                f"with engine.run_until_blocked(), which stops before the earliest deadline.")

    def run(self, run_id: str):
        """A read-only `Run` view: status, result, error, history, attempts, wake-ups."""
        from .run import Run
        return Run.from_snapshot(self.snapshot(run_id))

    def snapshot(self, run_id: str) -> RunSnapshot:
        """The facts of run `run_id` as this engine sees them (committed or not), copied
        out as an immutable `RunSnapshot`: what `run()` builds its `Run` from, and what any
        view reads instead of the engine's working state. Cheaper than `run()` when a view
        needs no DataFrames. Raises `RunNotFoundError` for an unknown run, and the run's
        `DamagedRunError` for a run set aside as unreadable."""
        self._check_open()
        state = self._state(run_id)
        if state.history is None:
            self._loader.history(state, self._runs)
        if state.damage is not None:
            raise state.damage
        snapshot = snapshot_of(state, self._loader.crash_rows(state))
        discarded = discarded_usage(self.store.burnt(run_id))   # broken answers, billed
        return snapshot if discarded is None else replace(snapshot, discarded=discarded)

    def runs(self, status=None):
        """A DataFrame of every run in the store, as this engine sees them, or only those
        whose status is `status` (one status, or a list of them). `forked_from` names the
        run a `fork` copied its first events from; a waiting run's `waiting_on` says on what
        ("timer", "retry:<activity>", "signal:<name>") and `waiting_until` until when (NaN:
        no deadline)."""
        import pandas as pd
        self._check_open()
        wanted = None if status is None else _statuses(status)
        rows = []
        for s in self._runs.values():
            if wanted is not None and s.status not in wanted:
                continue
            on, until = waiting_columns(s.waiting_detail())
            rows.append((s.run_id, s.workflow, s.status, s.started_at, s.ended_at, s.seed,
                         s.parent_run_id, s.forked_from, on, until))
        return pd.DataFrame(rows, columns=[
            "run_id", "workflow", "status", "started_at", "ended_at", "seed", "parent_run_id",
            "forked_from", "waiting_on", "waiting_until"]).astype({"waiting_until": float})

    def fork(self, run_id: str, at: int, workflow: Callable | None = None, faults=None,
             seed: int | None = None, policies=None) -> str:
        """A new run that replays run `run_id`'s history up to position `at` and executes
        from `at` on: "what if, from here, the code, the faults or the policies differed?"

        Positions 1 .. at-1 are copied from the source run (their recorded results, and the
        signals those events consumed), so those steps are replayed, not run again: a fork
        from position 40 of an agent's run costs none of its first 39 model calls. From
        position `at` on the fork runs fresh under its own run id, so its idempotency keys
        differ from the source's: a step the fork repeats is a new effect. The input, seed,
        fault plan, time-out, budget and policies are the source's unless given:
        `workflow` (another version of the code), `faults` (a plan), `seed`, `policies`
        (as in `start`). Returns the new run id, ``"{run_id}~fork{k}"``; `runs()` shows
        it `forked_from` the source. Its code runs in `run_until_idle()`.
        """
        self._check_writable("fork")
        source = self._state(run_id)
        if source.damage is not None:   # its rows do not read back: nothing to copy
            raise source.damage
        if source.history is None:
            self._loader.history(source, self._runs)
        end = len(source.history) + 1
        if isinstance(at, bool) or not isinstance(at, int) or not 1 <= at <= end:
            raise bad_value(f"fork({run_id!r}, at={at!r})", "at", f"at must be a history position "
                            f"from 1 to {end} (run {run_id!r} has {end - 1} events; at="
                            f"{end} replays them all and goes on from there)")
        if seed is not None:
            check_seed(seed, f"fork({run_id!r})")
        name = source.workflow if workflow is None else workflow_name(workflow)
        plan = source.faults if faults is None else self._plan(faults)
        options = json.loads(source.options_json) if source.options_json else {}
        if policies is not None:
            options["policies"] = Overrides(policies, f"fork({run_id!r}): policies").to_dict()
        if options.get("timeout") is not None:   # the fork's deadline counts from now
            check_later(self.clock.now(), options["timeout"], f"fork({run_id!r})", "timeout")
        options["forked_from"], options["fork_at"] = run_id, at
        k = 1
        while f"{run_id}~fork{k}" in self._runs:
            k += 1
        new_id = f"{run_id}~fork{k}"
        if workflow is not None and name not in REGISTRY:
            register(workflow, stacklevel=2)
        copied = [replace(e, matched_args=None) for e in source.history[:at - 1]]
        consumed = [json.loads(e.value)["seq"] for e in copied if e.kind == h.SIGNAL_RECEIVED]
        signals = [Signal(**vars(sig)) for sig in source.signals
                   if consumed and sig.seq <= max(consumed)]
        state = RunState(new_id, name, source.input_json, source.seed if seed is None else seed,
                         plan.to_json() if plan else None, json.dumps(options), None,
                         "running", None, None, self.clock.now(), None,
                         fn=workflow or self._code.resolve(name, run_id), faults=plan,
                         history=copied, signals=signals)
        if workflow is not None:   # this run's own code, also after a crash; others keep theirs
            self._code.pin(new_id, workflow)
        # The run, its copied events and signals land in one commit: a fork is never seen
        # without the history it replays (it would run those steps again).
        self.store.write({"runs": [state.row()],
                          "event_log": [event_row(new_id, e) for e in copied],
                          "signals": [SignalRecord(new_id, sig.seq, sig.name, sig.signal_id,
                                                   sig.value_json, sig.arrived_at)
                                      for sig in signals]})
        if state.budget is not None:   # the copied steps were spent once, by the source
            for event in copied:
                if event.kind == h.ACTIVITY:
                    state.spend.add(event.loads() if event.ok else None)
        self._runs[new_id] = state
        self._schedule(state, self.clock.now(), "wake", "start")
        self._arm_timeout(state)
        return new_id

    def crash(self) -> None:
        """Kill the simulated worker: in-memory state, in-flight attempts and uncommitted
        work are lost; a fresh worker then reloads every unfinished run from the store."""
        self._check_writable("crash")
        try:
            self._attempts.die("engine.crash()")
        except WorkerCrash:
            self._recover()

    def close(self) -> None:
        """Commit what is pending (in 'exit' mode: unfinished runs' events) and release the
        file. A closed engine refuses further calls."""
        if self._closed:
            return
        self._closed = True
        LIVE.discard(self)
        if self._sticky is not None:
            self._sticky.drop()
        if self.read_only:
            self.store.close()
            return
        try:
            for state in self._runs.values():
                self._journal.flush(state)
            self._flush_telemetry()
            self.store.save_clock(self.clock.now())
        finally:
            self.store.close()

    @property
    def breakers(self) -> dict:
        """The worker's circuit breakers by activity name (a `CircuitBreaker` on a policy
        keeps its state here, shared by every run of this engine); empty until one trips
        or counts a failure."""
        return self._attempts.breakers

    def working_state(self, run_id: str) -> RunState:
        """The engine's working copy of run `run_id` (`runstate.RunState`), its history
        loaded even if the run ended before a crash reload: for the package's own tools
        that measure many runs without building a `Run` each (a sweep's metrics). Read it,
        never change it; a view reads `snapshot(run_id)` instead."""
        state = self._state(run_id)
        if state.history is None:
            self._loader.history(state, self._runs)
        return state

    def forget(self) -> None:
        """Empty an in-memory engine, as if it had just been opened: no runs, no timers, no
        circuit breakers, no rows (`Store.forget`: the queued ones dropped unwritten). For
        one engine serving many short runs in turn, each alone (a sweep's isolated runs,
        the crash explorer's rows): opening an engine costs a DuckDB connection and its
        schema, far more than a small run. Only rows of ended runs should be forgotten."""
        if self._sticky is not None:
            self._sticky.drop()
        self._runs = {}
        self._heap = []
        self._code.pinned = {}
        self._telemetry = []
        self._attempts.fresh_worker()
        self.store.forget()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        counts: dict[str, int] = {}
        for s in self._runs.values():
            counts[s.status] = counts.get(s.status, 0) + 1
        summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no runs"
        return (f"Engine({self.path or 'in memory'}, {self.durability}, {self.clock!r}: "
                f"{summary})")

    # --- starting and loading ------------------------------------------------------------
    def _adopt(self, name: str, fn: Callable) -> list[str]:
        """A new registration of `name`: runs nobody could run are scheduled now; runs of
        an older definition take the new one. Returns the run ids whose code changed."""
        if self._closed:
            return []
        switched = []
        for state in self._runs.values():
            if (state.workflow != name or state.status in FINAL or state.fn is fn
                    or state.run_id in self._code.pinned or state.damage is not None):
                continue
            if state.fn is None:
                state.fn = fn
                if state.status != "diverged":
                    self._schedule(state, self.clock.now(), "wake", "recovery" if (
                        state.history or state.attempts or state.wakeups) else "start")
                    self._arm_timeout(state)
            else:
                if state.fn.__code__ is not fn.__code__:
                    switched.append(state.run_id)
                state.fn = fn
        return switched

    def _plan(self, faults) -> FaultPlan | None:
        if faults is None or isinstance(faults, FaultPlan):
            return faults
        if isinstance(faults, (list, tuple)):
            return FaultPlan(list(faults))
        return FaultPlan.from_json(faults)

    def _start(self, workflow, input_json, run_id, plan, seed, parent, options_json,
               fn=None, start_at: float | None = None) -> str:
        if run_id in self._runs:
            raise DuplicateRunError(
                f"A run with id {run_id!r} already exists (it is "
                f"{self._runs[run_id].status}). Pick another run_id, or leave it out to get "
                f"a fresh one.", run_id=run_id)
        state = RunState(run_id, workflow, input_json, seed,
                         plan.to_json() if plan else None, options_json, parent, "running",
                         None, None, self.clock.now() if start_at is None else start_at,
                         None, fn=fn, faults=plan)
        if fn is not None and current_definition(workflow) is None:
            self._code.pin(run_id, fn)   # a closure: recover this run with this very one
        self.store.insert("runs", state.row())
        self._runs[run_id] = state
        self._schedule(state, state.started_at, "wake", "start")
        self._arm_timeout(state)
        notify(self.observers, "run_started", state)
        return run_id

    def _arm_timeout(self, state: RunState) -> None:
        if state.timeout is not None and state.fn is not None:
            self._schedule(state, later(state.started_at, state.timeout), "timeout",
                           new_generation=False)

    def _load(self, opening: bool = False) -> None:
        """Read the store as a fresh worker would (`loading.Loader`) and schedule every
        unfinished run that reads back and whose workflow is registered. When the engine is
        `opening`, its clock moves up to the latest instant recorded (after a simulated
        crash it already is)."""
        self._heap = []
        loaded = self._loader.load(opening)
        self._runs = loaded.runs
        if loaded.latest is not None:
            self.clock.advance_to(loaded.latest)
        unknown: dict[str, list[str]] = {}
        for state in loaded.unfinished:
            if state.damage is not None:
                continue   # set aside: listed, never run (reading it says why)
            if state.fn is None:
                unknown.setdefault(state.workflow, []).append(state.run_id)
                continue
            began = state.history or state.attempts or state.wakeups
            self._schedule(state, self.clock.now() if began else max(   # start_at= later
                self.clock.now(), state.started_at), "wake", "recovery" if began else "start")
            self._arm_timeout(state)
        if opening and unknown:
            warnings.warn(unknown_workflows(self.path, unknown), stacklevel=3)

    def _state(self, run_id: str) -> RunState:
        state = self._runs.get(run_id)
        if state is None:
            raise RunNotFoundError(
                f"No run {run_id!r} in this engine's store ({self.path or 'in memory'}). "
                f"engine.runs() lists the runs there; a run id is what engine.start() "
                f"returned.", run_id=run_id)
        return state

    def _unfinished(self, run_id: str, ended_words) -> RunState:
        """The state of run `run_id`, which must be readable and not ended
        (`ended_words(state)`: the message of the `RunFinishedError` for one that has)."""
        state = self._state(run_id)
        if state.damage is not None:
            raise state.damage
        if state.status in FINAL:
            raise RunFinishedError(ended_words(state), run_id=run_id, status=state.status)
        return state

    def _check_writable(self, call: str) -> None:
        self._check_open()
        if self.read_only:
            raise read_only_engine(self.path, call)

    def _check_open(self) -> None:
        if self._closed:
            raise engine_closed(self.path, self._superseded)

    # --- the scheduler -------------------------------------------------------------------
    def _schedule(self, state: RunState, due_at: float, action: str, arg=None,
                  new_generation: bool = True) -> None:
        if new_generation:
            state.gen += 1
            state.due_at = due_at
        self._seq += 1
        heapq.heappush(self._heap, (due_at, self._seq, state.run_id, state.gen, action, arg))

    def _free_until(self, instant: float) -> bool:
        """Nothing else is due up to `instant` and the loop may run that far: an attempt
        ending then ends inline, without suspending its run (see `activities.Host`)."""
        return (not self._heap or self._heap[0][0] > instant) and (
            self._bound is None or instant <= self._bound)

    def _loop(self, bound: float | None, blocked: bool = False) -> None:
        """Pop and act on what is due, in time order, up to `bound`; `blocked`: stop at the
        first signal deadline instead (`run_until_blocked`)."""
        self._bound = bound
        self._code.new_pass()
        try:
            while self._heap:
                due_at = self._heap[0][0]
                if bound is not None and due_at > bound:
                    break
                item = heapq.heappop(self._heap)
                _, _, run_id, gen, action, arg = item
                state = self._runs.get(run_id)
                if state is None or (state.gen != gen and action in ("wake", "complete",
                                                                      "crash")):
                    continue  # superseded: the run was rescheduled or ended since
                if action == "timeout" and (state.status in FINAL or state.status == "diverged"):
                    continue  # a time-out outlived by its run's end must not move the clock
                if blocked and arg == "deadline":
                    heapq.heappush(self._heap, item)   # a signal's deadline: leave it due
                    break
                self.clock.sleep_until(due_at)
                try:
                    if action == "wake":
                        self._wake(state, arg)
                    elif action == "complete":
                        self._complete(state)
                    elif action == "timeout":
                        self._time_out(state)
                    elif action == "finish":
                        self._concurrency.finish(state, arg)
                    elif action == "launch":
                        self._concurrency.relaunch(state, arg)
                    else:
                        self._attempts.crash_during_wait(state, *arg)
                except WorkerCrash:
                    self._recover()
        finally:
            self._bound = None
            self._flush_telemetry()

    def _wake(self, state: RunState, reason: str) -> None:
        """Run the workflow code from the top; it replays history, then does new work."""
        self._use_current_definition(state)
        cursor = h.Cursor(state.history, state.run_id, state.workflow)
        ctx = (Context if self._guard is None else self._guard.context)(self._port, state,
                                                                         cursor)
        state.status, state.waiting, state.waiting_on, state.due_at = "running", None, None, None
        state.waking = (self.clock.now(), reason, cursor, len(state.history))
        if self._guard is None:
            def code():
                return state.fn(ctx, state.input())
        else:
            def code():
                return self._guard.call(state.fn, ctx, state.input())
        crashed = False
        try:
            if self._sticky is None:
                how, value = execute(code, ctx, cursor)
            else:   # the same, resumed where its code waits (durablelab/sticky.py)
                how, value = self._sticky.wake(state, ctx, cursor)
            if how == "completed":
                try:
                    value = h.to_json(value, "the workflow result",
                                      f"the return of {state.workflow}")
                except SerializationError as exc:   # a result history cannot hold
                    how, value = "raised", exc
            if how == "completed":
                self._end(state, "completed", result_json=value)
            elif how == "suspended":
                self._suspend(state, value)
            elif how == "continued":
                self._continue(state, value)
            elif how == "diverged":
                self._diverge(state, value)
            elif how == "failed":
                self._end(state, "failed", error=value)
            elif how == "cancelled":
                self._end(state, "cancelled", error=value)
            else:
                self._end(state, "failed", error=workflow_error(
                    state.run_id, state.workflow, value, _location(value)))
        except WorkerCrash:
            crashed = True
            raise
        finally:
            self._note_wakeup(state)
            if not crashed and state.stored_error is not None and state.status != "diverged":
                self._undiverge(state)
            if not crashed:
                self._journal.turn_ended(state)

    def _use_current_definition(self, state: RunState) -> None:
        """A notebook cell that redefines a registered workflow replaces it for its runs
        in flight (DESIGN.md section 2), as registering it again would, with the warning.
        (`Definitions.redefinition`)."""
        fn = self._code.redefinition(state)
        if fn is None:
            return
        name = state.workflow
        if REGISTRY.get(name) is not fn:
            register(fn, stacklevel=5)   # every open engine's runs switch, warned once
        else:   # registered already, by a path that did not reach this engine's runs
            switched = self._adopt(name, fn)
            if switched:
                warnings.warn(workflow_redefined(name, switched), stacklevel=5)

    def _note_wakeup(self, state: RunState) -> None:
        """Add the row of the wake-up now ending (how much it replayed and recorded) to the
        telemetry that goes to the store in bulk."""
        if state.waking is None:
            return
        (woke_at, reason, cursor, before), state.waking = state.waking, None
        row = WakeupRecord(state.run_id, woke_at, reason, cursor.replayed,
                           len(state.history) - before)
        state.wakeups.append(row)
        self._telemetry.append(row)
        notify(self.observers, "wakeup_ended", state, woke_at, reason, row.replayed,
               row.recorded, self.clock.now())

    def _suspend(self, state: RunState, suspend: Suspend) -> None:
        if suspend.reason == "handles":   # woken by `Concurrency.wake_if_ready` when enough have ended
            state.status, state.waiting = "running", "handles"
            state.waiting_on = suspend.waiting_on
            state.awaiting = ({p for p in suspend.handles if p not in state.closed},
                              suspend.need_all)
            self._park(state, None)
            state.gen += 1
            state.due_at = None
            return
        if suspend.reason == "activity":
            state.status, state.waiting = "running", "activity"
            self._park(state, None)
            if suspend.due_at is not None:
                self._schedule(state, suspend.due_at, "complete")
            else:   # nothing will ever answer: the run hangs until its time-out, if any
                state.gen += 1
                state.due_at = None
            return
        state.status, state.waiting = "waiting", suspend.reason
        state.waiting_on = suspend.waiting_on
        self._park(state, self._wait_json(state, suspend))
        if suspend.due_at is not None:
            reason = "deadline" if suspend.reason == "signal" else suspend.reason
            self._schedule(state, suspend.due_at, "wake", reason)
        else:
            state.gen += 1
            state.due_at = None
        self._attempts.arm_crash_during_wait(state, suspend)

    def _wait_json(self, state: RunState, suspend: Suspend) -> str:
        """What a run parked by `suspend` waits on, as `runs.waiting` stores it: since when
        (the wait's start, or the end of the failed attempt a backoff follows) and until."""
        since = self.clock.now()
        if suspend.reason == "retry":
            failed = state.attempts.get(suspend.position)
            if failed:
                since = failed[-1].ended_at
        elif 0 < suspend.position <= len(state.history):
            since = state.history[suspend.position - 1].recorded_at
        until = suspend.due_at if suspend.due_at != float("inf") else None   # never due
        return h.compact({"on": suspend.reason, "name": suspend.name,
                          "position": suspend.position, "since": since, "until": until})

    def _park(self, state: RunState, parked: str | None) -> None:
        """Tell the store the run now waits (`parked`: on what, as JSON) or runs again
        (None). The journal commits it when the durability mode commits the run's turn;
        nothing is written when the store already says so (a recovery that parks again)."""
        if parked != state.parked:
            state.parked = parked
            self._journal.status(state, RunEnd("waiting" if parked else "running", None, None,
                                               None, state.run_id, parked))

    def _complete(self, state: RunState) -> None:
        """An attempt that was in flight has ended: record it, then wake the run."""
        outcome, state.inflight = state.inflight, None
        cursor = h.Cursor(state.history, state.run_id, state.workflow)
        cursor.position = len(state.history)
        try:
            self._attempts.finish(state, cursor, outcome)
            self._schedule(state, self.clock.now(), "wake", "activity")
        except ActivityFailed:
            self._schedule(state, self.clock.now(), "wake", "activity")
        except Suspend as suspend:
            self._suspend(state, suspend)
        except StopRun as stop:
            self._end(state, "failed", error=stop.error)
        self._journal.turn_ended(state)

    def _time_out(self, state: RunState) -> None:
        """The run's time-out has come: stop it wherever it stands (`_loop` passes over the
        time-out of a run that ended or diverged)."""
        waiting = {"timer": "waiting on a timer", "retry": "in a retry backoff",
                   "signal": f"waiting for signal {state.waiting_on!r}",
                   "activity": "waiting for an activity to answer",
                   "handles": f"waiting for {state.waiting_on}"}.get(state.waiting, "running")
        state.inflight = None
        self._end(state, "failed", error=RunTimedOut.build(
            state.run_id, state.timeout, self.clock.now(), waiting))
        self._journal.turn_ended(state)

    def _diverge(self, state: RunState, exc: NonDeterminismError) -> None:
        """Park the run: nothing is recorded but the fact, which is committed at once in
        every durability mode, so `durablelab runs` and an engine opened later see it."""
        state.status, state.error = "diverged", exc
        state.gen += 1
        error_json = json.dumps(exc.to_json())
        if error_json != state.stored_error:
            self.store.write({}, ends=[RunEnd("diverged", None, error_json, None, state.run_id)])
            state.stored_error = error_json

    def _undiverge(self, state: RunState) -> None:
        """A diverged run replayed cleanly (the code was fixed): the store says running (or
        waiting) again, unless its end, just written, already says how it finished."""
        if state.status not in FINAL:
            state.error = None
            self.store.write({}, ends=[RunEnd(state.status, None, None, None, state.run_id,
                                              state.parked)])
        state.stored_error = None

    def _continue(self, state: RunState, input_json: str) -> None:
        base, _, n = state.run_id.rpartition("~")
        next_id = f"{base}~{int(n) + 1}" if base and n.isdigit() else f"{state.run_id}~1"
        self._end(state, "continued", result_json=json.dumps({"continued_as": next_id}))
        self._start(state.workflow, input_json, next_id, state.faults, state.seed, state.run_id,
                    state.options_json, fn=state.fn)

    def _end(self, state: RunState, status: str, result_json=None, error=None) -> None:
        if self._sticky is not None:
            self._sticky.drop(state.run_id)
        if state.flying or state.inflight is not None:   # nobody will wait for them now
            self._concurrency.abandon(state, f"its run ended {status}")
        state.status, state.result_json, state.error = status, result_json, error
        state.ended_at = self.clock.now()
        state.gen += 1
        end = RunEnd(status, result_json, json.dumps(error.to_json()) if error else None,
                     state.ended_at, state.run_id)
        self._note_wakeup(state)   # so the run's last wake-up row may share the end's commit
        self._telemetry = self._journal.end(state, end, self._telemetry)
        notify(self.observers, "run_ended", state)
        self._concurrency.run_ended(state)

    # --- recording ------------------------------------------------------------------------
    def _write(self, state: RunState, table: str, row: tuple) -> None:
        """A row of the run's history; the journal commits it when the mode says."""
        self._journal.record(state, table, row)

    def _flush_telemetry(self) -> None:
        if self._telemetry:
            self.store.write({"wakeups": self._telemetry})
            self._telemetry = []

    def _append(self, state: RunState, cursor: h.Cursor, event: h.Event) -> h.Event:
        state.history.append(event)
        if event.handle is not None:
            state.closed.add(event.handle)
        if state.budget is not None and event.kind == h.ACTIVITY:
            state.spend.add(event.loads() if event.ok else None)
        cursor.position += 1
        self._journal.record(state, "event_log", event_row(state.run_id, event))
        return event

    def _record_event(self, state, cursor, kind, name, args, value_json, call_site,
                      kwargs=None) -> h.Event:
        """Record a non-activity event (now, random, uuid, a wait's start or end, a marker,
        the start of concurrent work)."""
        digest, matched, text = None, None, None
        if args is not None:
            text = h.canonical(args, kwargs or {}, f"ctx.{kind}", state.run_id, name)
            digest, matched = h.digest_of(text), json.loads(text)
        event = h.Event(cursor.position + 1, kind, name, digest, True, value_json,
                        self.clock.now(), call_site=call_site, args=h.shown_args(text))
        event.matched_args = matched
        return self._append(state, cursor, event)

    def _recover(self) -> None:
        """A fresh worker: forget everything in memory (circuit breakers too), reload what
        the store holds."""
        if self._sticky is not None:   # kept code is memory too: recovery replays
            self._sticky.drop()
        self._flush_telemetry()
        self._attempts.fresh_worker()
        self._load()
