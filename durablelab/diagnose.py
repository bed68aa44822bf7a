"""diagnose(run): why a run is where it is, in one sentence, with the events behind it.

A run's status says *what* it is (waiting, failed); a learner needs *why*: which timer it
sleeps on and until when, which signal it waits for and whether anything will ever end the
wait, which retry it is backing off from, which error ended it, where replay stopped
matching the code. All of that is already in the run's history and attempts; this module
reads it back in words. It reads only the `Run` view, so it works the same on a live
engine's run, on a run loaded from an export, on a `Run` built by hand, and on a history
imported from Temporal (where the history allows: Temporal does not record signal waits
or attempts in progress, and the sentence says so rather than guess).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field, replace

import pandas as pd

from .durations import duration_words
from .errors import ActivityFailed, NonDeterminismError, WorkflowError
from .waits import pair_waits

#: Every state `diagnose` can report.
STATES = ("completed", "continued", "cancelled", "failed", "workflow_error", "diverged", "waiting_timer",
          "waiting_signal", "backoff", "running", "unregistered")
_SHORT_FIX = {
    "different_call": "restore the old step for runs recorded before the change, or guard "
                      "the change with `if ctx.patched(\"<change-id>\"):`",
    "different_arguments": "build the arguments only from the input and recorded results, or "
                           "guard the change with `if ctx.patched(\"<change-id>\"):`",
    "history_not_consumed": "keep the removed step for runs that recorded it, behind "
                            "`if ctx.patched(\"<change-id>\"):`"}


@dataclass(frozen=True)
class Diagnosis:
    """Why one run is where it is. `str(d)` is the sentence.

    Attributes: `state` (one of `STATES`), `sentence`, `events` (the history rows behind
    it), `attempts` (the attempt rows of the activity concerned, if any), `at` (when it
    ended), `since` (when the current wait or backoff began), `until` (when it ends: a
    timer's firing, a signal's deadline, the next attempt), and `facts` (the details as
    plain values: activity, attempt, max_attempts, position, error_class, ...). Times are
    seconds on the run's clock; the sentence gives them relative to the run's start.
    """

    run_id: str
    state: str
    sentence: str
    events: pd.DataFrame
    attempts: pd.DataFrame
    at: float | None = None
    since: float | None = None
    until: float | None = None
    facts: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return self.sentence

    def __repr__(self) -> str:
        lines = [f"Diagnosis(run {self.run_id!r}: {self.state})", f"  {self.sentence}"]
        for row in self.events.itertuples(index=False):
            lines.append(f"  #{row.position} {row.kind} {row.name!r}"
                         f"{'' if row.ok in (True, None) else ' (failed)'}"
                         f" at {duration_words(row.recorded_at)}")
        for row in self.attempts.itertuples(index=False):
            lines.append(f"  attempt {row.attempt}: {row.outcome}"
                         f"{f' ({row.error})' if isinstance(row.error, str) else ''}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        parts = [f"<p><b>{html.escape(self.state)}</b>: {html.escape(self.sentence)}</p>"]
        for title, frame in (("events", self.events), ("attempts", self.attempts)):
            if len(frame):
                cells = frame.astype(str).apply(lambda column: column.str.slice(0, 80))
                parts.append(f"<details open><summary>{title}</summary>"
                             f"{cells.to_html(index=False)}</details>")
        return "\n".join(parts)


def diagnose(run) -> Diagnosis:
    """Why `run` is where it is: one sentence plus the events behind it.

    Use it when a status is not enough: ``print(dl.diagnose(engine.run(run_id)))``. It
    reads only the `Run` (history, attempts, wake-ups, error), so it needs no engine.

    Cases, by `state`: completed (its result), continued (as which run), failed (the error
    and, for an activity, its attempt history), workflow_error (workflow code raised, and
    where), diverged (parked on a version mismatch: position, recorded versus requested,
    the fix), waiting_timer (until when), waiting_signal (which, since when, its deadline
    or none), backoff (attempt n of m, the next attempt), running (work due now, or an
    activity in flight), unregistered (its engine will not run it: nobody registered its
    workflow in this process, and the fix). Returns a `Diagnosis`.

    Whatever the state, the sentence ends with what a typo leaves silent: a fault rule whose
    activity name matched nothing in the run (`facts["unmatched_rules"]`), and a signal
    that arrived under a name no `ctx.wait_signal` asked for
    (`facts["unconsumed_signals"]`).
    """
    return _with_notes(run, _state(run))


def _state(run) -> Diagnosis:
    if run.status == "completed":
        return _completed(run)
    if run.status == "continued":
        return _continued(run)
    if run.status == "cancelled":
        return _cancelled(run)
    if run.status == "diverged":
        return _diverged(run)
    if run.status == "failed":
        return _failed(run)
    if getattr(run, "source", "durablelab") == "temporal":
        found = _temporal_task_trouble(run)
        if found is not None:
            return found
    if getattr(run, "workflow_registered", None) is False:
        return _unregistered(run)
    return _unfinished(run)


# --- what a typo leaves silent -----------------------------------------------------------


_ENDED = ("completed", "failed", "continued", "cancelled", "diverged")


def _names_met(run) -> set[str]:
    """The activities and waits the run met: what a fault rule's name can match."""
    names = set(run.history["name"].dropna()) if len(run.history) else set()
    if len(run.attempts):
        names |= set(run.attempts["activity"].dropna())
    return {str(n) for n in names}


def unmatched_rules(run) -> list[tuple[int, object]]:
    """The (index, rule) pairs of the run's fault plan whose activity name or glob matched
    no activity or wait of the run ([] when the run carries no plan)."""
    plan = getattr(run, "faults", None)
    return [] if plan is None else plan.unmatched(_names_met(run))


def unconsumed_signals(run) -> pd.DataFrame:
    """The signals that arrived for the run and that no `ctx.wait_signal` consumed: the
    k-th signal of a name is consumed by the k-th wait of that name that received one."""
    signals = getattr(run, "signals", None)
    if signals is None or not len(signals):
        return pd.DataFrame(columns=["seq", "name", "signal_id", "arrived_at"])
    history = run.history
    received = history[history.kind.eq("signal_received")]["name"].value_counts()
    rank = signals.groupby("name").cumcount()
    taken = signals["name"].map(received).fillna(0)
    return signals[rank >= taken].reset_index(drop=True)


def _with_notes(run, found: Diagnosis) -> Diagnosis:
    notes, facts = [], {}
    # Only an ended run has met every name it will: one still running may reach the rest.
    rules = unmatched_rules(run) if run.status in _ENDED else []
    if rules:
        met = sorted(_names_met(run) & set(run.attempts["activity"].dropna())) \
            if len(run.attempts) else []
        shown = "; ".join(f"rule {i} {type(rule).__name__}({rule.activity!r})"
                          for i, rule in rules)
        notes.append(f"Fault plan: {shown} matched no activity or wait of this run, so "
                     f"{'it' if len(rules) == 1 else 'they'} never applied (its activities: "
                     f"{', '.join(repr(n) for n in met) or 'none'}); check the name.")
        facts["unmatched_rules"] = [i for i, _ in rules]
    left = unconsumed_signals(run)
    ended = run.status in _ENDED
    waited = set(run.history[run.history.kind.eq("wait_signal")]["name"]) \
        if len(run.history) else set()
    if not ended:       # a signal of a name the code waits for is buffered for its next wait
        left = left[~left["name"].isin(waited)]
    if len(left):
        parts = []
        for name, rows in left.groupby("name", sort=False):
            count = f"{len(rows)} signals" if len(rows) > 1 else "a signal"
            when = _rel(run, rows["arrived_at"].iloc[0])
            if name in waited:
                parts.append(f"{count} {name!r} arrived and no later wait read "
                             f"{'them' if len(rows) > 1 else 'it'}")
            elif ended:
                parts.append(f"{count} {name!r} arrived {when}, and no ctx.wait_signal "
                             f"asked for that name")
            else:
                parts.append(f"{count} {name!r} arrived {when}, and no ctx.wait_signal has "
                             f"asked for that name so far")
        asked = sorted(waited)
        notes.append(f"Signals never read: {'; '.join(parts)}"
                     f"{' (the code waits for ' + ', '.join(map(repr, asked)) + ')' if asked else ''}"
                     f"; check the name given to engine.signal().")
        facts["unconsumed_signals"] = list(left["name"])
    if not notes:
        return found
    return replace(found, sentence=" ".join([found.sentence, *notes]),
                   facts={**found.facts, **facts})


def _unregistered(run) -> Diagnosis:
    function = run.workflow.rpartition(":")[2].rpartition(".")[2]
    return _make(run, "unregistered", (
        f"Not being run: its workflow {run.workflow} is not registered in this process, so "
        f"the engine left the run as the store recorded it ({run.status}) and scheduled "
        f"nothing; it stands at position {len(run.history)} of its history. A store is data "
        f"and never chooses the code that runs. Import the workflow and open the engine with "
        f"workflows=[{function}] (or decorate it with @dl.workflow before opening) to resume "
        f"it."), run.history.tail(1), workflow=run.workflow)


# --- ended runs ------------------------------------------------------------------------------


def _completed(run) -> Diagnosis:
    return _make(run, "completed", f"Completed {_rel(run, run.ended_at)} with result "
                 f"{_short(run.result)}.", run.history.tail(1), at=run.ended_at,
                 result=run.result)


def _continued(run) -> Diagnosis:
    after = (run.result or {}).get("continued_as") if isinstance(run.result, dict) else None
    return _make(run, "continued", f"Continued as new run {after!r} {_rel(run, run.ended_at)}, "
                 f"after {len(run.history)} events; that run carries on from here.",
                 run.history.tail(1), at=run.ended_at, continued_as=after)


def _cancelled(run) -> Diagnosis:
    error, history = run.error, run.history
    reason = getattr(error, "reason", None)
    told = history[history.kind.eq("cancelled")]
    where = (f"; its code was told at position {int(told.position.iloc[-1])}"
             if len(told) else "")
    abandoned = run.attempts[run.attempts.outcome.eq("canceled")]
    dropped = (f", and {len(abandoned)} attempt(s) in flight were abandoned "
               f"({', '.join(sorted(set(abandoned.activity)))})" if len(abandoned) else "")
    return _make(run, "cancelled", f"Cancelled {_rel(run, run.ended_at)}"
                 f"{f' ({reason})' if reason else ''}{where}{dropped}.",
                 told if len(told) else history.tail(1), abandoned, at=run.ended_at,
                 reason=reason)


def _failed(run) -> Diagnosis:
    error, at = run.error, run.ended_at
    if isinstance(error, ActivityFailed):
        attempts = run.attempts[run.attempts.position == error.position]
        tried = ", ".join(f"{a.attempt if not pd.isna(a.attempt) else '?'}: {a.outcome}"
                          for a in attempts.itertuples(index=False)) or "none recorded"
        cause = _cause(error.cause_class, error.cause_message)
        if getattr(run, "source", "") == "temporal":
            where = f" (position {error.position})" if error.position else ""
            which = f" on attempt {error.attempts}" if error.attempts else ""
            sentence = (f"Failed {_rel(run, at)}: activity {error.activity!r}{where} failed "
                        f"for good{which} [{tried}; Temporal's history holds no earlier "
                        f"attempts]: {cause}.")
        else:
            why = ("its error is not retryable" if error.error_class == "NonRetryable"
                   else "its retries are spent")
            sentence = (f"Failed {_rel(run, at)}: activity {error.activity!r} (position "
                        f"{error.position}) failed for good after {error.attempts} attempt(s) "
                        f"[{tried}], {why}: {cause}.")
        return _make(run, "failed", sentence, _at(run, error.position), attempts, at=at,
                     activity=error.activity, position=error.position,
                     attempts=error.attempts, error_class=error.error_class,
                     cause_class=error.cause_class, message=_first(error.cause_message))
    if isinstance(error, WorkflowError):
        where = error.location or "an unknown line"
        return _make(run, "workflow_error", (
            f"Failed {_rel(run, at)} because workflow code raised "
            f"{_cause(error.cause_class, error.cause_message)} at {where}; it is not retried, "
            f"because the same code would raise again on every replay."),
            run.history.tail(1), at=at, cause_class=error.cause_class,
            message=_first(error.cause_message), location=error.location)
    name = type(error).__name__ if error is not None else "no recorded error"
    text = _first(getattr(error, "message", None) or str(error or "")).rstrip(".")
    # A time-out or cancellation often follows an activity that failed: say which. One
    # that never ended, or was canceled with the run, did not fail: it is not blamed.
    history = run.history
    failed = history[history.kind.eq("activity") & history.ok.eq(False)
                     & history.outcome.notna() & ~history.outcome.isin(["canceled"])]
    before, rows = "", run.history.tail(1)
    if len(failed):
        last = failed.iloc[-1]
        before = (f"; the last activity to fail was {last['name']!r} (position "
                  f"{int(last.position)}, {_cause(last.error_class, _error_of(last))})")
        rows = pd.concat([failed.tail(1), rows]).drop_duplicates("position")
    return _make(run, "failed", f"Failed {_rel(run, at)}: {name}"
                 f"{': ' + text if text else ''}{before}.", rows, at=at,
                 error_class=name, message=text)


def _diverged(run) -> Diagnosis:
    error = run.error
    if not isinstance(error, NonDeterminismError):
        return _make(run, "diverged", "Diverged: replay stopped matching the code, but the "
                     "run carries no NonDeterminismError to say where.", run.history.tail(0))
    position, recorded, requested = error.position, error.recorded, error.requested
    asked = ("the code returned there" if requested is None
             else f"the code now asks for {_call(requested)}")
    if error.reason == "different_arguments":
        asked = "the code now makes that call with different arguments"
    sentence = (f"Parked on a version mismatch at position {position}: history recorded "
                f"{_call(recorded)} but {asked}; fix: "
                f"{_SHORT_FIX.get(error.reason, 'guard the change with ctx.patched()')}, then "
                f"open an engine with that code to resume it.")
    return _make(run, "diverged", sentence, _at(run, position), position=position,
                 recorded=recorded, requested=requested, reason=error.reason,
                 call_site=error.call_site, hint=error.hint)


# --- unfinished runs -------------------------------------------------------------------------


def _unfinished(run) -> Diagnosis:
    history = run.history
    retry = _pending_retry(run)
    if retry is not None:
        return _backoff(run, retry)
    waits = [start for start, end in pair_waits(history) if end is None]   # still open
    signal = [w for w in waits if w.kind == "wait_signal"]
    if signal:
        return _waiting_signal(run, signal[-1])
    # An activity row without an outcome is still open (only imported histories have one).
    inflight = history[history.kind.eq("activity") & history.outcome.isna()]
    timers = [w for w in waits if w.kind == "sleep"]
    if timers and not len(inflight):
        return _waiting_timer(run, min(timers, key=lambda w: _deadline(w) or float("inf")),
                              len(timers))
    if len(inflight):
        return _temporal_inflight(run, inflight, timers)
    started = _open_started(run)
    if started is not None:
        return started
    if getattr(run, "source", "durablelab") == "temporal":
        return _make(run, "running", (
            f"Running: the history ends {_rel(run, run.latest_at)} with nothing open that "
            f"Temporal records (no timer, no activity), so the code is waiting for something "
            f"the history does not show: a signal, an update or a condition."),
            history.tail(1), since=run.latest_at)
    if not len(history) and not len(run.wakeups):
        return _make(run, "running", "Running: started but its code has not run yet; the "
                     "first wake-up is due now (code runs inside run_until_idle() or "
                     "advance()).", history, since=run.started_at)
    last = history.tail(1)
    where = f"after position {int(last.position.iloc[0])}" if len(last) else "at its start"
    return _make(run, "running", f"Running {where}: its next step is due now or an activity "
                 f"attempt is in flight.", last, since=run.latest_at)


def _ended_positions(history) -> set:
    """Positions whose step has ended: every event's, but a start_activity's or
    start_child's only once its end (which names it as `handle`) is recorded."""
    ends = set(history.handle.dropna().astype(int)) if "handle" in history else set()
    started = history.kind.isin(["start_activity", "start_child"])
    return set(history.position[~started]) | (set(history.position[started]) & ends)


def _open_started(run) -> Diagnosis | None:
    """What a run waits for among the activities and children it started, or None."""
    history = run.history
    started = history[history.kind.isin(["start_activity", "start_child"])]
    if not len(started):
        return None
    ended = _ended_positions(history)
    open_ = started[~started.position.isin(ended)]
    if not len(open_):
        return None
    flying = run.attempts[run.attempts.outcome.eq("in_flight")]
    parts = []
    for row in open_.itertuples(index=False):
        what = ("child " + row.name.rpartition(":")[2] if row.kind == "start_child"
                else repr(row.name))
        attempt = flying[flying.position == row.position]
        how = (f"attempt {int(attempt.attempt.iloc[0])} in flight, started "
               f"{_rel(run, float(attempt.started_at.iloc[0]))}" if len(attempt)
               else "its child run working" if row.kind == "start_child"
               else "between attempts")
        parts.append(f"{what} at position {int(row.position)} ({how})")
    kinds = "activities" if open_.kind.eq("start_activity").all() else "started steps"
    return _make(run, "running", f"Running: waiting for {len(open_)} of {len(started)} "
                 f"{kinds}: {'; '.join(parts)}.", open_, flying, since=run.latest_at,
                 open=[int(p) for p in open_.position], started=len(started))


def _pending_retry(run):
    """The last failed attempt of an activity whose event is not recorded yet, or None."""
    attempts = run.attempts
    if not len(attempts) or "delay" not in attempts:
        return None
    recorded = _ended_positions(run.history)
    open_ = attempts[~attempts.position.isin(recorded) & attempts.delay.notna()
                     & attempts.outcome.ne("crashed")]
    return None if not len(open_) else open_.iloc[-1]


def _backoff(run, last) -> Diagnosis:
    position, n = int(last.position), int(last.attempt)
    limit = None if pd.isna(last.max_attempts) else int(last.max_attempts)
    of = f" of {limit}" if limit else ""
    next_at = float(last.ended_at) + float(last.delay)
    rows = run.attempts[(run.attempts.position == position)
                        & run.attempts.outcome.ne("crashed")]
    verb = "In retry backoff" if run.status == "waiting" else "Running"
    tail = (f"attempt {n + 1}{of} is due {_rel(run, next_at)}" if run.status == "waiting" else
            f"attempt {n + 1}{of} was due {_rel(run, next_at)} and is due now or in flight")
    sentence = (f"{verb}: activity {last.activity!r} (position {position}) failed attempt "
                f"{n}{of} ({last.outcome}: {_first(last.error)}); {tail}.")
    return _make(run, "backoff" if run.status == "waiting" else "running", sentence,
                 run.history.tail(0), rows, since=float(last.ended_at), until=next_at,
                 activity=last.activity, position=position, attempt=n, max_attempts=limit,
                 next_attempt=n + 1, next_attempt_at=next_at)


def _deadline(wait) -> float | None:
    """The deadline a wait's start row recorded, or None."""
    value = wait.value
    return value.get("deadline") if isinstance(value, dict) else None


def _waiting_timer(run, row, count: int) -> Diagnosis:
    until = _deadline(row)
    seconds = row.value.get("seconds") if isinstance(row.value, dict) else None
    temporal = getattr(run, "source", "durablelab") == "temporal"
    what = (f"ctx.sleep({duration_words(seconds)})" if not temporal or seconds is None
            else f"Temporal {row.name} ({duration_words(seconds)})")
    more = f" (the first of {count} open timers)" if count > 1 else ""
    fires = f"fires {_rel(run, until)}" if until is not None else "has no recorded deadline"
    return _make(run, "waiting_timer", f"Waiting on a durable timer{more}: {what} started "
                 f"{_rel(run, row.recorded_at)} and {fires}.", _rows(run, [row.position]),
                 since=row.recorded_at, until=until, seconds=seconds, name=row.name)


def _waiting_signal(run, row) -> Diagnosis:
    deadline = _deadline(row)
    end = (f"its deadline is {_rel(run, deadline)}, when wait_signal returns None"
           if deadline is not None else "no deadline: it may wait forever")
    return _make(run, "waiting_signal", f"Waiting for signal {row.name!r} "
                 f"{_since(run, row.recorded_at)}; {end}.", _rows(run, [row.position]),
                 since=row.recorded_at, until=deadline, signal=row.name, deadline=deadline)


def _temporal_inflight(run, inflight, timers) -> Diagnosis:
    first = inflight.iloc[0]
    also = f", and {len(timers)} timer(s) are open" if timers else ""
    many = f" ({len(inflight)} activities are open)" if len(inflight) > 1 else ""
    return _make(run, "running", (
        f"Running: activity {first['name']!r} (position {int(first.position)}) was scheduled "
        f"{_rel(run, first.recorded_at)} and has not finished{many}{also}; Temporal's history "
        f"does not show whether it is running, waiting for a worker or backing off between "
        f"retries."), inflight, since=float(first.recorded_at), activity=first["name"],
        position=int(first.position))


def _temporal_task_trouble(run) -> Diagnosis | None:
    """An open Temporal run whose last workflow task failed or timed out and no later task
    started: the code keeps failing (or diverging), or no worker is taking the task."""
    history = run.history
    trouble = history[history.kind.isin(["workflow_task_failed", "workflow_task_timed_out"])]
    if not len(trouble):
        return None
    last = trouble.iloc[-1]
    if (run.wakeups.woke_at > last.recorded_at).any():
        return None
    rows = history[history.position == last.position]
    if last.kind == "workflow_task_timed_out":
        return _make(run, "running", (
            f"Running, but stalled: its last workflow task timed out "
            f"{_rel(run, last.recorded_at)} ({_error_of(last)}) and no worker has started one "
            f"since; is a worker polling its task queue?"), rows, since=last.recorded_at)
    if "NonDeterministic" in str(last["name"]):
        return _make(run, "diverged", (
            f"Parked on a version mismatch: the last workflow task failed "
            f"{_rel(run, last.recorded_at)} with a non-determinism error ({_error_of(last)});"
            f" fix: deploy code that replays this history (guard the change with a version "
            f"marker: workflow.patched / GetVersion), and the task is retried."), rows,
            since=last.recorded_at, message=_error_of(last))
    return _make(run, "workflow_error", (
        f"Stuck because workflow code keeps raising: the last workflow task failed "
        f"{_rel(run, last.recorded_at)} with {_cause(last.error_class, _error_of(last))} "
        f"({last['name']}); Temporal retries the task without recording each retry."), rows,
        since=last.recorded_at, cause_class=last.error_class, message=_error_of(last))


# --- words -----------------------------------------------------------------------------------


def _make(run, state, sentence, events, attempt_rows=None, at=None, since=None, until=None,
          **facts) -> Diagnosis:
    rows = run.attempts.iloc[0:0] if attempt_rows is None else attempt_rows
    return Diagnosis(run.run_id, state, sentence, events.reset_index(drop=True),
                     rows.reset_index(drop=True), at, since, until, facts)


def _rows(run, positions) -> pd.DataFrame:
    return run.history[run.history.position.isin(positions)]


def _at(run, position) -> pd.DataFrame:
    return _rows(run, [position])


def _rel(run, t) -> str:
    """An instant in words, relative to the run's start: "1 h 30 min after the start"."""
    if t is None or pd.isna(t):
        return "at an unknown time"
    offset = float(t) - float(run.started_at or 0.0)
    return "at the run's start" if abs(offset) < 1e-9 else f"{duration_words(offset)} after the start"


def _since(run, t) -> str:
    """ "since the run's start" or "since 2 h after the start"."""
    words = _rel(run, t)
    return "since " + (words[3:] if words.startswith("at ") else words)


def _error_of(row) -> str:
    """The first line of a history row's error message. History has no message column: an
    engine's failed activity keeps its ActivityFailed JSON in `value`, an imported
    Temporal row keeps `value["error"]`."""
    value = row["value"] if isinstance(row["value"], dict) else {}
    fields = value.get("fields") if isinstance(value.get("fields"), dict) else {}
    return _first(value.get("error") or fields.get("cause_message") or value.get("message"))


def _call(event: dict | None) -> str:
    if not event:
        return "nothing"
    return f"ctx.{event.get('kind')}({event.get('name')!r})"


def _cause(cls, message) -> str:
    first = _first(message)
    if not cls or (isinstance(cls, float) and pd.isna(cls)):
        return first or "no error recorded"
    if first.startswith(f"{cls}:"):
        return first
    return f"{cls}: {first}" if first else str(cls)


def _first(text) -> str:
    """The first line of a message ("" for None or a missing value)."""
    if not isinstance(text, str):
        text = "" if text is None or text is pd.NA or text != text else str(text)  # NaN != NaN
    return text.strip().splitlines()[0] if text.strip() else ""


def _short(value, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


__all__ = ["diagnose", "Diagnosis", "STATES"]
