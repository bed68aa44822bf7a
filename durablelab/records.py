"""Records: the rows the store keeps, with names.

Each table of the store (see the DDL in `store.py`) has a row type here, a `NamedTuple`
whose fields are the table's columns in order. A row is still a tuple, as fast to build and
to hand to DuckDB or Arrow as one, but code reads it by name: ``last.ended_at + last.delay``
is when a retry is due, where ``last[5] + last[9]`` said nothing. Rows read back from the
store come as these types too (`Store.load`), so a row means the same wherever it is.

History events have their own richer type, `history.Event`; `RunEnd` is not a table's row
but how a run's status changes its `runs` row (it ends, diverges, waits, runs again).
"""

from __future__ import annotations

from typing import NamedTuple


class RunRecord(NamedTuple):
    """A `runs` row: one per run. JSON columns hold JSON text."""

    run_id: str
    workflow: str                 # 'module:qualname' of the workflow function
    input: str                    # JSON
    seed: int
    faults: str | None            # the FaultPlan as JSON
    options: str | None           # JSON: time-out, budget, policies, forked_from
    parent_run_id: str | None     # the run that continued as this one
    status: str                   # running | waiting | diverged | completed | failed | ...
    result: str | None            # JSON
    error: str | None             # JSON of the durablelab error
    started_at: float
    ended_at: float | None
    waiting: str | None = None    # JSON of what a waiting run waits on (see `RunEnd`)


class RunEnd(NamedTuple):
    """How a run's row changes when its status does: it ends, diverges, runs again, or
    waits. A waiting run's `waiting` is the JSON of ``{"on": "timer" | "retry" | "signal",
    "name": the signal or activity, "position", "since", "until": the deadline or None}``,
    so a reader that never ran the run can say what it waits for."""

    status: str
    result: str | None
    error: str | None
    ended_at: float | None
    run_id: str
    waiting: str | None = None


class AttemptRecord(NamedTuple):
    """An `attempts` row: an attempt that did not end its activity (it failed and a retry
    was scheduled, or its worker died). The retry is due at ``ended_at + delay``."""

    run_id: str
    position: int
    activity: str
    attempt: int
    started_at: float
    ended_at: float
    outcome: str                  # transient, rate_limited, timeout, ..., crashed
    error_class: str | None
    error: str | None
    delay: float | None           # the backoff chosen before the next attempt
    max_attempts: int | None      # the policy's


class SignalRecord(NamedTuple):
    """A `signals` row: a signal that arrived for a run."""

    run_id: str
    seq: int                      # arrival order within the run, from 1
    name: str
    signal_id: str | None
    value: str                    # JSON
    arrived_at: float


class FaultRecord(NamedTuple):
    """A `faults` row: a fault rule that fired."""

    run_id: str
    rule: int                     # index in the run's FaultPlan
    type: str                     # the rule's class: RateLimit, Crash, ...
    point: str | None             # a Crash rule's point
    position: int
    attempt: int
    fired_at: float


class CrashRecord(NamedTuple):
    """A `crashes` row: a worker death (a `Crash` fault, or `engine.crash()`)."""

    crashed_at: float
    run_id: str | None            # the run whose fault killed the worker, if any
    position: int | None
    point: str | None
    cause: str


class WakeupRecord(NamedTuple):
    """A `wakeups` row: one time a run's code ran from the top."""

    run_id: str
    woke_at: float
    reason: str                   # start, timer, retry, signal, recovery, activity, ...
    replayed: int                 # events handed back from history
    recorded: int                 # events this wake-up added


def as_records(record: type, rows: list[tuple]) -> list:
    """`rows` fetched with exactly `record`'s columns, in order, as `record`s. What
    ``record._make`` does, without its per-row length check: a query names the columns."""
    new = tuple.__new__
    return [new(record, row) for row in rows]


def waiting_columns(wait: dict | None) -> tuple:
    """(waiting_on, waiting_until) of what a waiting run waits on (the `runs.waiting` JSON,
    decoded): "timer", "retry:<activity>" or "signal:<name>", and the deadline or None."""
    if wait is None:
        return None, None
    on = wait["on"] if wait["on"] == "timer" else f"{wait['on']}:{wait['name']}"
    return on, wait["until"]
