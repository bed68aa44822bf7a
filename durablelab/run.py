"""Run: a read-only view of one run, as pandas DataFrames.

Views read what the engine or the store holds; they never change it. Frames:

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
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pandas as pd

HISTORY_COLUMNS = ["position", "kind", "name", "ok", "value", "digest", "recorded_at",
                   "attempt", "outcome", "error_class", "call_site", "args"]
ATTEMPT_COLUMNS = ["position", "activity", "attempt", "started_at", "ended_at", "outcome",
                   "error_class", "error", "delay", "max_attempts"]
WAKEUP_COLUMNS = ["woke_at", "reason", "replayed", "recorded"]
CRASH_COLUMNS = ["crashed_at", "run_id", "position", "point", "cause"]


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

    def timeline(self, **options):
        """A matplotlib Figure of this run over virtual time: attempts by outcome, backoffs,
        timers and signal waits, crashes and wake-ups. See `durablelab.viz.timeline`."""
        from .viz import timeline
        return timeline([self], **options)

    def _repr_html_(self) -> str:
        from .viz import run_html
        return run_html(self)

    @classmethod
    def from_state(cls, state, crash_rows: list[tuple]) -> "Run":
        events = [(e.position, e.kind, e.name, e.ok, e.loads(), e.digest, e.recorded_at,
                   e.attempt, e.outcome, e.error_class, e.call_site, e.args)
                  for e in state.history]
        try:
            history = pd.DataFrame(events, columns=HISTORY_COLUMNS)
        except UnicodeEncodeError:   # a value holding a lone surrogate ("\ud800"), which a
            # string column cannot hold but JSON carries fine: keep the values as objects
            history = pd.DataFrame([row[:4] + (None,) + row[5:] for row in events],
                                   columns=HISTORY_COLUMNS)
            history["value"] = pd.Series([row[4] for row in events], dtype=object)
        # A crash during a wait is not an attempt (it is in `crashes`). The last item orders
        # rows that share a start: a crash before or during an attempt comes before the
        # attempt that replaced it; one after its record, after.
        rows = [(*row[1:], 1) for rows in state.attempts.values() for row in rows]
        rows += [(e.position, e.name, e.attempt, e.started_at, e.recorded_at, e.outcome,
                  e.error_class, e.error, None, None, 1)
                 for e in state.history if e.kind == "activity"]
        names = {e.position: e.name for e in state.history}
        rows += [(f[4], names.get(f[4], "?"), f[5], f[6], f[6], "crashed", None,
                  f"worker crashed at {f[3]}", None, None, 2 if f[3] == "after_record" else 0)
                 for f in state.fault_rows if f[2] == "Crash" and f[3] != "during_wait"]
        if state.inflight is not None:   # started, not ended: in flight, or hung for good
            o = state.inflight
            rows.append((o["position"], o["name"], o["attempt"], o["started_at"], None,
                         "in_flight", None, None, None, None, 3))
        attempts = pd.DataFrame(rows, columns=[*ATTEMPT_COLUMNS, "order"])
        attempts = (attempts.sort_values(["position", "started_at", "order", "attempt"],
                                         kind="stable")
                    .drop(columns="order").reset_index(drop=True)
                    .astype({"attempt": "Int64", "max_attempts": "Int64"}))
        history = history.astype({"attempt": "Int64"})
        wakeups = pd.DataFrame([row[1:] for row in state.wakeups], columns=WAKEUP_COLUMNS)
        return cls(
            run_id=state.run_id, workflow=state.workflow, status=state.status,
            input=json.loads(state.input_json),
            result=None if state.result_json is None else json.loads(state.result_json),
            error=state.error, seed=state.seed, started_at=state.started_at,
            ended_at=state.ended_at, parent_run_id=state.parent_run_id, history=history,
            attempts=attempts, wakeups=wakeups,
            crashes=pd.DataFrame(crash_rows, columns=CRASH_COLUMNS),
            workflow_registered=state.fn is not None)

    def __repr__(self) -> str:
        outcome = (f"result={self.result!r}" if self.status == "completed"
                   else f"error={type(self.error).__name__}" if self.error is not None else "")
        return (f"Run({self.run_id!r}, {self.workflow}, {self.status}, {outcome}, "
                f"{len(self.history)} events, {len(self.attempts)} attempts, "
                f"{len(self.wakeups)} wake-ups)").replace(", ,", ",")
