"""Run: a read-only view of one run, as pandas DataFrames.

Views read what the engine or the store holds; they never change it, and never read the
engine's working state: the engine hands out a frozen `RunSnapshot` of a run's facts
(`Engine.snapshot`), and `Run.from_snapshot` lays it out as frames. Frames:

- `history`: one row per event: position, kind, name, ok, value (decoded JSON), digest,
  recorded_at, attempt, outcome, error_class, call_site ('file:line' of the ctx call), args
  (the canonical JSON of the call's arguments, cut at 2,000 characters; None for calls
  without input and in histories written before durablelab kept them).
- `attempts`: one row per activity attempt: position, activity, attempt, started_at,
  ended_at, outcome (ok, transient, rate_limited, timeout, non_retryable, malformed,
  circuit_open, crashed, or in_flight for an attempt that has not ended), error_class, error, delay (the backoff chosen before the next attempt),
  max_attempts (the policy's, on attempts that were retried).
- `wakeups`: one row per time the code ran from the top: woke_at, reason, replayed, recorded.
- `crashes`: worker deaths during the run's life: crashed_at, run_id (whose fault it was), position,
  point, cause.
- `signals`: every signal that arrived for the run, consumed or not: seq, name, signal_id,
  arrived_at (empty where the source does not say).

`faults` is the run's `FaultPlan` (None: none, or the source does not say).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .records import waiting_columns

HISTORY_COLUMNS = ["position", "kind", "name", "ok", "value", "digest", "recorded_at",
                   "attempt", "outcome", "error_class", "call_site", "args", "handle"]
ATTEMPT_COLUMNS = ["position", "activity", "attempt", "started_at", "ended_at", "outcome",
                   "error_class", "error", "delay", "max_attempts"]
WAKEUP_COLUMNS = ["woke_at", "reason", "replayed", "recorded"]
CRASH_COLUMNS = ["crashed_at", "run_id", "position", "point", "cause"]
SIGNAL_COLUMNS = ["seq", "name", "signal_id", "arrived_at"]


@dataclass(frozen=True)
class Run:
    """What one run did: its status, result or error, and the frames above."""

    run_id: str
    workflow: str
    status: str
    input: Any
    result: Any
    error: Any
    seed: int
    started_at: float
    ended_at: float | None
    parent_run_id: str | None
    history: pd.DataFrame
    attempts: pd.DataFrame
    wakeups: pd.DataFrame
    crashes: pd.DataFrame
    #: where the run was recorded: "durablelab", or "temporal" for an imported history.
    source: str = "durablelab"
    #: caveats a view must show rather than guess around (e.g. what a source does not record).
    notes: tuple = ()
    #: whether this process has registered the run's workflow (an engine runs only those);
    #: None when no engine is behind the view (an export, an imported history).
    workflow_registered: bool | None = None
    #: for a waiting run, what it waits on: {"on": "timer" | "retry" | "signal", "name",
    #: "position", "since", "until"} (until: its deadline, or None); None otherwise.
    waiting: dict | None = None
    #: what the model billed for answers thrown away as broken (`ModelOutputError`), which
    #: history does not keep: {"calls", "input_tokens", "output_tokens", "cost"}; None when
    #: there were none (or the source does not record them).
    discarded: dict | None = None
    #: the run's fault plan (a `FaultPlan`), or None: no plan, or the source does not say.
    faults: Any = None
    #: every signal that arrived for the run (`SIGNAL_COLUMNS`), consumed or not.
    signals: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=SIGNAL_COLUMNS))

    @property
    def waiting_on(self) -> str | None:
        """"timer", "retry:<activity>" or "signal:<name>" while the run waits; else None."""
        return waiting_columns(self.waiting)[0]

    @property
    def waiting_until(self) -> float | None:
        """The deadline of what the run waits on (None: none, or it is not waiting)."""
        return waiting_columns(self.waiting)[1]

    @property
    def latest_at(self) -> float:
        """The latest instant the run recorded: its start, an event, the end of an attempt
        or a wake-up, in seconds on the engine's clock. For a run that has not ended, how
        far it has got: `compare`'s ``virtual_duration`` is ``latest_at - started_at`` for
        it, and `diagnose` says a running run stands there. Future instants (a timer's
        deadline, the next attempt of a backoff) are not recorded facts and do not count."""
        latest = float(self.started_at or 0.0)
        for frame, column in ((self.history, "recorded_at"), (self.attempts, "ended_at"),
                              (self.wakeups, "woke_at")):
            if len(frame) and column in frame.columns:
                found = frame[column].max()      # skips missing values
                if found is not None and not pd.isna(found):
                    latest = max(latest, float(found))
        return latest

    def timeline(self, **options):
        """A matplotlib Figure of this run over virtual time: attempts by outcome, backoffs,
        timers and signal waits, crashes and wake-ups. ``children=engine`` draws what each
        child run did under its bar. See `durablelab.viz.timeline`."""
        from .viz import timeline
        return timeline([self], **options)

    def _repr_html_(self) -> str:
        from .viz import run_html
        return run_html(self)

    @classmethod
    def from_snapshot(cls, snapshot) -> "Run":
        """The view of a `RunSnapshot` (what `Engine.snapshot` hands out): its facts laid
        out as the frames above. `Engine.run(run_id)` is
        ``Run.from_snapshot(engine.snapshot(run_id))``."""
        events = [(e.position, e.kind, e.name, e.ok, e.loads(), e.digest, e.recorded_at,
                   e.attempt, e.outcome, e.error_class, e.call_site, e.args, e.handle)
                  for e in snapshot.events]
        # Values are JSON values, kept as objects: pandas would make [None, 0, 7] floats
        # (NaN, 0.0, 7.0), and a string column cannot hold a lone surrogate ("\ud800").
        history = pd.DataFrame([row[:4] + (None,) + row[5:] for row in events],
                               columns=HISTORY_COLUMNS)
        history["value"] = pd.Series([row[4] for row in events], dtype=object)
        # A crash during a wait is not an attempt (it is in `crashes`). The last item orders
        # rows that share a start: a crash before or during an attempt comes before the
        # attempt that replaced it; one after its record, after.
        rows = [(*row, 1) for row in snapshot.retried]
        # A started activity's end names the position that started it: its attempts are
        # that position's (as its failed attempts and its idempotency key are).
        rows += [(e.position if e.handle is None else e.handle, e.name, e.attempt,
                  e.started_at, e.recorded_at, e.outcome, e.error_class, e.error, None, None, 1)
                 for e in snapshot.events if e.kind == "activity"
                 and e.started_at is not None]   # (the end a cancel gives an activity it
        # abandoned is no attempt: its abandoned attempt is among `retried`)
        names = {e.position: e.name for e in snapshot.events}
        rows += [(f.position, names.get(f.position, "?"), f.attempt, f.fired_at, f.fired_at,
                  "crashed", None, f"worker crashed at {f.point}", None, None,
                  2 if f.point == "after_record" else 0)
                 for f in snapshot.crash_faults if f.point != "during_wait"]
        for o in (snapshot.inflight, *snapshot.started):
            if o is not None:   # started, not ended: in flight, or hung for good
                rows.append((o.position, o.activity, o.attempt, o.started_at, None,
                             "in_flight", None, None, None, None, 3))
        attempts = pd.DataFrame(rows, columns=[*ATTEMPT_COLUMNS, "order"])
        attempts = (attempts.sort_values(["position", "started_at", "order", "attempt"],
                                         kind="stable")
                    .drop(columns="order").reset_index(drop=True)
                    .astype({"attempt": "Int64", "max_attempts": "Int64"}))
        history = history.astype({"attempt": "Int64", "handle": "Int64"})
        return cls(
            run_id=snapshot.run_id, workflow=snapshot.workflow, status=snapshot.status,
            input=snapshot.input, result=snapshot.result, error=snapshot.error,
            seed=snapshot.seed, started_at=snapshot.started_at, ended_at=snapshot.ended_at,
            parent_run_id=snapshot.parent_run_id, history=history, attempts=attempts,
            wakeups=pd.DataFrame(list(snapshot.wakeups), columns=WAKEUP_COLUMNS),
            crashes=pd.DataFrame(list(snapshot.crashes), columns=CRASH_COLUMNS),
            workflow_registered=snapshot.workflow_registered, waiting=snapshot.waiting,
            discarded=snapshot.discarded,
            faults=_plan(snapshot.faults_json),
            signals=pd.DataFrame(list(snapshot.signals), columns=SIGNAL_COLUMNS))

    def __repr__(self) -> str:
        outcome = (f"result={self.result!r}" if self.status == "completed"
                   else f"error={type(self.error).__name__}" if self.error is not None
                   else f"on {self.waiting_on}" if self.waiting is not None else "")
        return (f"Run({self.run_id!r}, {self.workflow}, {self.status}, {outcome}, "
                f"{len(self.history)} events, {len(self.attempts)} attempts, "
                f"{len(self.wakeups)} wake-ups)").replace(", ,", ",")


def _plan(faults_json: str | None):
    """The run's FaultPlan from its stored JSON (which the engine wrote and checked)."""
    if not faults_json:
        return None
    from .faults import FaultPlan
    return FaultPlan.from_json(faults_json)
