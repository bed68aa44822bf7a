"""A run's metrics, defined once, over plain rows.

Two callers measure runs: `dl.compare` reads a `Run` (pandas frames, from any source: the
engine, an export, Temporal, DBOS, LangGraph) and a sweep reads the engine's working state
of thousands of runs (building frames would cost more than the runs). Each turns what it
holds into the same plain rows (attempts as ``(position, attempt, outcome)``, model answers'
usage, wake-ups) and `measure` computes every metric the two share from them, so a metric
cannot mean one thing in a sweep's table and another in `dl.compare` (see `compare` for
what each one means). What only one of them reports is added by that caller, saying why.

This module imports neither pandas nor the engine.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any, Iterable

from .budget import answer_usage

#: attempt outcomes that get their own retries_<outcome> column; any other outcome (and
#: retries a source did not record one by one) is counted in retries_other.
RETRY_OUTCOMES = ("transient", "rate_limited", "timeout", "malformed", "non_retryable",
                  "circuit_open")
RETRY_KEYS = (*RETRY_OUTCOMES, "other")
RETRY_COLUMNS = tuple(f"retries_{name}" for name in RETRY_KEYS)
_RETRY_PAIRS = tuple(zip(RETRY_COLUMNS, RETRY_KEYS))

#: the columns `measure` gives, in order (callers add their own around them).
SHARED = ["status", "virtual_duration", "attempts", "activities", "retries", *RETRY_COLUMNS,
          "crashes", "model_calls", "input_tokens", "output_tokens", "tokens", "cost",
          "wakeups", "events_replayed", "history_events"]


def measure(*, status: str, started_at: float, ended_at: float | None,
            instants: Iterable, attempts: Iterable[tuple], usages: Iterable[tuple],
            discarded: dict | None, crashes: int, replayed: Iterable[int],
            history_events: int) -> dict[str, Any]:
    """The metrics both `dl.compare` and a sweep report, from plain rows:

    - `attempts`: ``(position, attempt, outcome)`` of every activity attempt but those a
      worker crash cut short (outcome ``crashed``: they are `crashes`), those of one
      position together and in the order they were made (`_count`); an attempt in
      flight has outcome ``in_flight`` (it was made: it counts); `attempt` may be missing
      (None or NaN) where a source does not number attempts.
    - `usages`: ``(input_tokens, output_tokens, cost)`` of each model answer history kept
      (`answer_usage`); `discarded`: the broken answers' usage (`Run.discarded`), or None.
    - `instants`: the instants the run recorded (events, ends of attempts, wake-ups), for
      the duration of a run that has not ended (see `latest_at`).
    - `crashes`: worker deaths during the run's life; `replayed`: events replayed per
      wake-up; `history_events`: events in history.
    """
    n_attempts, activities, retries = _count(attempts)
    calls, usage_in, usage_out, cost = 0, 0, 0, 0.0
    for u in usages:
        calls += 1
        usage_in += u[0]
        usage_out += u[1]
        cost += u[2]
    if discarded:   # billed, though history kept no answer
        calls += discarded.get("calls", 0)
        usage_in += discarded.get("input_tokens", 0)
        usage_out += discarded.get("output_tokens", 0)
        cost += discarded.get("cost", 0.0)
    if not isinstance(replayed, list):
        replayed = list(replayed)
    end = ended_at if ended_at is not None else latest_at(started_at, instants)
    out = {"status": status, "virtual_duration": float(end - started_at),
           "attempts": n_attempts, "activities": activities,
           "retries": n_attempts - activities}
    for column, key in _RETRY_PAIRS:
        out[column] = retries[key]
    out["crashes"] = crashes
    out["model_calls"] = calls
    out["input_tokens"] = usage_in
    out["output_tokens"] = usage_out
    out["tokens"] = usage_in + usage_out
    out["cost"] = float(cost)
    out["wakeups"] = len(replayed)
    out["events_replayed"] = int(sum(replayed))
    out["history_events"] = history_events
    return out


def _count(attempts: Iterable[tuple]) -> tuple[int, int, dict[str, int]]:
    """(attempts, activities, retries by outcome, `RETRY_KEYS`) from
    ``(position, attempt, outcome)`` rows (items after the third are ignored), the rows of
    one position next to each other, in the order they were made (see `measure`). Every
    row of a position but its last was retried. An activity counts the larger of its rows
    and its highest attempt number: a source that records only an activity's last attempt
    (Temporal: attempt 3, one row) loses none, and those it did not list one by one are
    retries_other."""
    # One pass, no grouping: a sweep measures thousands of runs.
    retries = dict.fromkeys(RETRY_KEYS, 0)
    n_attempts = activities = listed = top = 0
    current, previous = _NOWHERE, None
    for row in attempts:
        position, attempt = row[0], row[1]
        if position != current:
            if listed:
                count = top if top > listed else listed
                n_attempts += count
                retries["other"] += count - listed
            current, listed, top = position, 0, 0
            activities += 1
        else:
            retries[previous if previous in retries else "other"] += 1
        listed += 1
        if type(attempt) is not int:
            attempt = 0 if missing(attempt) else int(attempt)
        if attempt > top:
            top = attempt
        previous = row[2]
    if listed:
        count = top if top > listed else listed
        n_attempts += count
        retries["other"] += count - listed
    return n_attempts, activities, retries


_NOWHERE = object()     # the position before the first row


def by_class(attempts: Iterable[tuple], ends: Iterable[tuple]) -> tuple[Counter, Counter]:
    """(retried attempts, activities failed for good), each counted by error class (a
    missing class is ``"unknown"``), for `dl.ops`' rates by error class:

    - `attempts`: ``(position, outcome, error_class)`` of every attempt, each position's
      in the order they were made (positions may interleave); a crashed row is skipped.
      An attempt is retried when another attempt of its activity follows it: one that
      failed counts under its class.
    - `ends`: ``(kind, ok, outcome, error_class)`` of each history event: an activity
      whose event is not ok and has an outcome failed for good.
    """
    retried: Counter = Counter()
    last: dict = {}
    for position, outcome, error_class in attempts:
        if outcome == "crashed":
            continue
        if last.get(position) is not None:
            retried[last[position]] += 1      # the one before was followed: it was retried
        last[position] = _class(error_class) if outcome not in _NOT_FAILED else None
    failed: Counter = Counter()
    for kind, ok, outcome, error_class in ends:
        if kind == "activity" and not ok and isinstance(outcome, str):
            failed[_class(error_class)] += 1
    return retried, failed


#: attempt outcomes that are not a failure of the attempt.
_NOT_FAILED = ("ok", "crashed", "in_flight")


def _class(error_class) -> str:
    return error_class if isinstance(error_class, str) and error_class else "unknown"


# History size: a value's bytes as compact JSON, the way the store writes it.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)


def text_bytes(text: Any) -> int:
    """UTF-8 bytes of `text`; a lone surrogate ("\\ud800") counts as the escape a store
    keeps it as: UTF-8 has none."""
    return len(str(text).encode("utf-8", "backslashreplace"))


def value_bytes(value: Any) -> int:
    """Bytes of a decoded value as compact JSON (a missing value counts 0): its share of
    `dl.compare`'s ``history_bytes``."""
    return 0 if missing(value) else text_bytes(_ENCODER.encode(value))


def json_bytes(text: str | None) -> int:
    """`value_bytes` of the value whose JSON text the store holds (None: no value). The text
    is decoded and measured again: not every event's text is compact (a sleep's, an
    error's are ``json.dumps``'), and a history's size must not depend on how it was kept."""
    return 0 if text is None else value_bytes(json.loads(text))


def latest_at(started_at: float, instants: Iterable) -> float:
    """The latest of `instants` (missing ones skipped), and at least `started_at`: how far
    a run that has not ended has got. Future instants (a timer's deadline, the next attempt
    of a backoff) are not recorded facts and must not be among them."""
    latest = float(started_at or 0.0)
    for t in instants:
        if not missing(t) and t > latest:
            latest = float(t)
    return latest


def usage_of(value: Any) -> tuple[int, int, float] | None:
    """(input_tokens, output_tokens, cost) of a model call's recorded result, or None
    (`budget.answer_usage`: the answer's own, without broken answers folded into it)."""
    return answer_usage(value.get("usage") if isinstance(value, dict) else None)


def missing(value: Any) -> bool:
    """None, or NaN (a frame shows a missing value as NaN in a column pandas made float,
    as pandas.NA in a nullable one)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return True
    return type(value).__name__ == "NAType"


__all__ = ["measure", "by_class", "text_bytes", "value_bytes", "json_bytes", "latest_at",
           "usage_of", "missing", "SHARED", "RETRY_OUTCOMES", "RETRY_KEYS", "RETRY_COLUMNS"]
