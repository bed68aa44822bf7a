"""RunState: everything an engine keeps in memory about one run while it holds it.

A run's truth is its rows in the store; a `RunState` is the engine's working copy of them:
the history replay walks, the attempts and signals not yet consumed, what the run waits on,
and the rows not yet committed (`pending`, see `journal.py`). The attempt runner and the
journal read and change it; views never do (they get a `RunSnapshot`, `snapshot_of`).
`durablelab/loading.py` builds it from what the store reads back.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from . import fastjson
from .budget import Budget, Spend
from .errors import DurableLabError
from .faults import FaultPlan
from .records import (AttemptRecord, CrashRecord, FaultRecord, RunEnd, RunRecord,
                      WakeupRecord)
from .retry import Overrides
from .snapshot import (AttemptRow, CrashFault, CrashRow, EventRow, InFlight, RunSnapshot,
                       SignalRow, WakeupRow)

if TYPE_CHECKING:
    from .activities import Attempt


#: The name `engine.cancel` records its request under in the `signals` table: a cancel
#: arrives as signals do (committed at once, in order), and no wait may ask for it.
CANCEL_SIGNAL = "durablelab.cancel"

#: The statuses of a run that has ended (DESIGN.md section 6); the others are "running",
#: "waiting" and "diverged".
FINAL = ("completed", "failed", "continued", "cancelled")


@dataclass
class Signal:
    seq: int
    name: str
    signal_id: str | None
    value_json: str
    arrived_at: float

    def value(self) -> Any:
        return json.loads(self.value_json)


@dataclass
class RunState:
    """Everything the engine keeps in memory about one run."""

    run_id: str
    workflow: str
    input_json: str
    seed: int
    faults_json: str | None
    options_json: str | None
    parent_run_id: str | None
    status: str
    result_json: str | None
    error: DurableLabError | None
    started_at: float
    ended_at: float | None
    fn: Callable | None = None
    faults: FaultPlan | None = None
    history: list | None = field(default_factory=list)   # None: ended, not loaded yet
    #: position -> the AttemptRecords of attempts that did not end the activity there
    attempts: dict[int, list[AttemptRecord]] = field(default_factory=dict)
    signals: list[Signal] = field(default_factory=list)
    fault_rows: list[FaultRecord] = field(default_factory=list)
    wakeups: list[WakeupRecord] = field(default_factory=list)
    gen: int = 0                  # bumped on every reschedule; stale heap items are skipped
    waiting: str | None = None    # timer | retry | signal | activity
    waiting_on: str | None = None
    #: what `runs.waiting` says (JSON) while the run is stored 'waiting'; see `Engine._park`
    parked: str | None = None
    waking: tuple | None = None   # (woke_at, reason, cursor, events before) during a wake-up
    due_at: float | None = None
    inflight: "Attempt | None" = None   # an attempt that outlasts its wake-up
    #: concurrency (`ctx.start_activity`, `ctx.start_child`): the attempts in flight by the
    #: position that started them; the latest request made at each (what a retry runs);
    #: the positions whose end history holds; what the code waits for (the positions still
    #: open, and whether all must end).
    flying: dict = field(default_factory=dict)
    requests: dict = field(default_factory=dict)
    closed: set = field(default_factory=set)
    awaiting: tuple | None = None
    #: `engine.cancel` asked for it and the code has not been told yet; and why.
    cancel_pending: bool = False
    cancel_reason: str | None = None
    pending: dict = field(default_factory=dict)           # uncommitted rows, by table
    pending_end: RunEnd | None = None
    damage: DurableLabError | None = None   # a DamagedRunError: the run is set aside
    timeout: float | None = None  # the run's time-out, seconds from started_at
    budget: Budget | None = None
    spend: Spend = field(default_factory=Spend)
    overrides: Overrides | None = None   # start(policies=): replaces the code's policies
    stored_error: str | None = None   # the error JSON the store holds while it says diverged
    forked_from: str | None = None    # the run `fork` copied this one's first events from
    #: (parent run id, position) of a child run (`ctx.start_child`), else None
    child_of: tuple | None = None
    input_kept: tuple | bool | None = field(default=None, repr=False)   # see input()

    def __post_init__(self):
        if self.history:   # events given at once (a fork copies them): which ends they hold
            self.closed = {e.handle for e in self.history if e.handle is not None}
        if self.options_json:
            (self.timeout, self.budget, self.forked_from, self.overrides,
             self.child_of) = _options(self.options_json)

    def waiting_detail(self) -> dict | None:
        """What the run waits on ({on, name, position, since, until}) while it is stored
        'waiting'; None otherwise."""
        return json.loads(self.parked) if self.status == "waiting" and self.parked else None

    def input(self) -> Any:
        """The run's input, decoded afresh for each wake-up (the code may change it): a
        copy of the decoded value when that is flat (`fastjson.kept`), else parsed again."""
        held = self.input_kept
        if held is None:
            value = json.loads(self.input_json)
            self.input_kept = fastjson.kept(value, self.input_json) or False
            return value
        if held is False:
            return json.loads(self.input_json)
        return fastjson.copied(held)

    def row(self) -> RunRecord:
        """The run's `runs` row as its start records it."""
        return RunRecord(self.run_id, self.workflow, self.input_json, self.seed,
                         self.faults_json, self.options_json, self.parent_run_id, "running",
                         None, None, self.started_at, None)


def snapshot_of(state: RunState, crash_rows: list[CrashRecord]) -> RunSnapshot:
    """A run's state copied out as the immutable facts a view reads (see `RunSnapshot`);
    `crash_rows` are the `crashes` rows of worker deaths during its life."""
    o = state.inflight
    return RunSnapshot(
        run_id=state.run_id, workflow=state.workflow, status=state.status,
        input_json=state.input_json, result_json=state.result_json, error=state.error,
        seed=state.seed, started_at=state.started_at, ended_at=state.ended_at,
        parent_run_id=state.parent_run_id, workflow_registered=state.fn is not None,
        events=tuple(EventRow(e.position, e.kind, e.name, e.ok, e.value, e.digest,
                              e.recorded_at, e.attempt, e.started_at, e.outcome,
                              e.error_class, e.error, e.call_site, e.args, e.handle)
                     for e in state.history),
        retried=tuple(AttemptRow(*row[1:]) for rows in state.attempts.values()
                      for row in rows),
        crash_faults=tuple(CrashFault(f.position, f.attempt, f.point, f.fired_at)
                           for f in state.fault_rows if f.type == "Crash"),
        inflight=None if o is None else InFlight(o.position, o.name, o.attempt, o.started_at),
        started=tuple(InFlight(o.position, o.name, o.attempt, o.started_at)
                      for _, o in sorted(state.flying.items())),
        faults_json=state.faults_json,
        signals=tuple(SignalRow(s.seq, s.name, s.signal_id, s.arrived_at)
                      for s in state.signals if s.name != CANCEL_SIGNAL),
        wakeups=tuple(WakeupRow(*row[1:]) for row in state.wakeups),
        crashes=tuple(CrashRow(*row) for row in crash_rows),
        waiting=state.waiting_detail())


@functools.lru_cache(maxsize=1024)
def _options(options_json: str) -> tuple:
    """(timeout, budget, forked_from, overrides, child_of) of a run's stored options. Runs that store
    the same options (a sweep's cell) share the parse: a frozen `Budget` and one
    `Overrides`, with its per-activity lookups."""
    options = json.loads(options_json)
    budget = Budget(**options["budget"]) if options.get("budget") else None
    policies = options.get("policies")
    overrides = Overrides(policies, "the run's stored policies") if policies else None
    child_of = tuple(options["child_of"]) if options.get("child_of") else None
    return options.get("timeout"), budget, options.get("forked_from"), overrides, child_of


def options_json(options: dict[str, str]) -> str | None:
    """``json.dumps`` of a run's options (their names are plain identifiers), from each
    option's JSON text: the same text, without encoding a sweep's policies for every run."""
    if not options:
        return None
    return "{" + ", ".join(f'"{key}": {text}' for key, text in options.items()) + "}"


__all__ = ["RunState", "Signal", "snapshot_of", "options_json", "CANCEL_SIGNAL", "FINAL"]
