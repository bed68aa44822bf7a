"""RunSnapshot: what the engine hands a view about one run, frozen at the moment it is read.

The engine keeps each run as working state: lists it appends to, rows it has not committed
yet, the attempt in flight, the scheduler's bookkeeping. A view (`Run`, and the frames,
plots and diagnoses built on it) must not read that state: it changes under the view's
feet, and its shape is the engine's to change. So `Engine.snapshot(run_id)` copies out
the facts a view needs, as immutable values with names:

- the run's row: status, input and result (as the JSON the store holds), error, seed,
  start and end, parent, and whether this process can run its workflow;
- `events`: its history, one `EventRow` per position (values as JSON text);
- `retried`: the attempts that did not end in a history event (an attempt that failed
  and was retried, one lost with a worker), as `AttemptRow`s; the attempt that a history
  event records rides on that event (an activity's final attempt is its event);
- `crash_faults`: the `Crash` faults that fired in this run, where and when;
- `inflight`: the attempt started and not ended (in flight, or hung for good), or None;
- `wakeups`: each time the code ran from the top;
- `crashes`: the worker deaths during the run's life (its own and other runs');
- `faults_json`: the run's fault plan, and `signals`: every signal that arrived for it, so
  `dl.diagnose` can name a rule that matched nothing and a signal nothing waited for.

This module imports neither pandas nor the engine: the engine builds snapshots, the views
read them, and neither reaches into the other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NamedTuple


class EventRow(NamedTuple):
    """One history event as the engine recorded it (`value` is JSON text, or None)."""

    position: int
    kind: str
    name: str
    ok: bool
    value: str | None
    digest: str | None
    recorded_at: float
    attempt: int | None
    started_at: float | None
    outcome: str | None
    error_class: str | None
    error: str | None
    call_site: str | None
    args: str | None
    #: the end of concurrent work: the position of the start_activity/start_child it ends
    handle: int | None = None

    def loads(self) -> Any:
        """The event's value, decoded from its JSON."""
        return None if self.value is None else json.loads(self.value)


class AttemptRow(NamedTuple):
    """An activity attempt that history does not hold as an event: `delay` is the backoff
    chosen before the next attempt, `max_attempts` the policy's."""

    position: int
    activity: str
    attempt: int
    started_at: float
    ended_at: float | None
    outcome: str
    error_class: str | None
    error: str | None
    delay: float | None
    max_attempts: int | None


class CrashFault(NamedTuple):
    """A `Crash` fault that fired in this run: at `point` of attempt `attempt` of the
    activity at `position`, at instant `fired_at`."""

    position: int
    attempt: int
    point: str
    fired_at: float


class InFlight(NamedTuple):
    """An attempt that started and has not ended."""

    position: int
    activity: str
    attempt: int
    started_at: float


class WakeupRow(NamedTuple):
    """One wake-up: when, why, and how many events it replayed and recorded."""

    woke_at: float
    reason: str
    replayed: int
    recorded: int


class SignalRow(NamedTuple):
    """A signal that arrived for the run (its inbox, consumed or not): arrival order `seq`,
    `name`, `signal_id` and when it `arrived_at`."""

    seq: int
    name: str
    signal_id: str | None
    arrived_at: float


class CrashRow(NamedTuple):
    """A worker death: when, whose fault it was (a run id, or None for `engine.crash()`),
    where, and why."""

    crashed_at: float
    run_id: str | None
    position: int | None
    point: str | None
    cause: str


@dataclass(frozen=True)
class RunSnapshot:
    """One run's facts, as `Engine.snapshot` copied them out: immutable, and free of the
    engine's working state. `Run.from_snapshot` turns one into the `Run` view."""

    run_id: str
    workflow: str
    status: str
    input_json: str
    result_json: str | None
    error: Any                 # None, or the durablelab error the run recorded
    seed: int
    started_at: float
    ended_at: float | None
    parent_run_id: str | None
    workflow_registered: bool
    events: tuple[EventRow, ...] = ()
    retried: tuple[AttemptRow, ...] = ()
    crash_faults: tuple[CrashFault, ...] = ()
    inflight: InFlight | None = None
    #: attempts of started activities (`ctx.start_activity`) in flight, by position
    started: tuple[InFlight, ...] = ()
    wakeups: tuple[WakeupRow, ...] = ()
    crashes: tuple[CrashRow, ...] = ()
    waiting: dict | None = None    # a waiting run's {on, name, position, since, until}
    discarded: dict | None = None  # broken model answers' usage (`budget.discarded_usage`)
    faults_json: str | None = None     # the run's fault plan, as `FaultPlan.to_json()`
    signals: tuple[SignalRow, ...] = ()    # every signal that arrived, in order

    @property
    def input(self) -> Any:
        """The run's input, decoded from its JSON (a fresh copy on every read)."""
        return json.loads(self.input_json)

    @property
    def result(self) -> Any:
        """The run's result, decoded from its JSON, or None (a fresh copy on every read)."""
        return None if self.result_json is None else json.loads(self.result_json)


__all__ = ["RunSnapshot", "EventRow", "AttemptRow", "CrashFault", "InFlight", "WakeupRow",
           "CrashRow", "SignalRow"]
