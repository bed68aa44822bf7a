"""Import a Temporal workflow history (JSON) as a durablelab `Run`.

Temporal and durablelab record the same idea in different shapes. In Temporal the server
writes the history: a *workflow task* is one wake-up of the code (scheduled, started,
completed); the commands that wake-up produced become events (ActivityTaskScheduled,
TimerStarted, MarkerRecorded), and what the world answered comes back as more events
(ActivityTaskCompleted, TimerFired, WorkflowExecutionSignaled). durablelab writes one event
per `ctx` call and keeps wake-ups apart. `load_temporal` maps the first onto the second, so
the timeline, the explorer, `compare` and `diagnose` work on histories recorded by a real
Temporal cluster, and it says what Temporal does not record instead of guessing it.

Temporal event(s)                                      durablelab
-----------------------------------------------------  ---------------------------------------
ActivityTaskScheduled (+Started, +Completed / Failed / one `activity` row where it was
  TimedOut / Canceled, +CancelRequested)                 scheduled, one `attempts` row
TimerStarted / TimerFired / TimerCanceled              `sleep` / `timer_fired` / `timer_canceled`
                                                         (name "timer <timerId>")
WorkflowExecutionSignaled                              `signal_received`
MarkerRecorded "Version" (Go, Java), "core_patch"      `patched` (name: the change id: Go's
  (Python, TypeScript, .NET)                             "change-id", Java's "changeId", core's
                                                         "patch_data" {"id": ...})
MarkerRecorded "LocalActivity" (Go, Java),             one `activity` row (value["local"] True)
  "core_local_activity" (Python, TypeScript, .NET)       and its attempts row: a local activity
                                                         leaves no ActivityTask* events
StartChildWorkflowExecutionInitiated (+Started,        one `child_workflow` row, like an activity
  +Completed / Failed / ...)                             (its own lane on the timeline)
NexusOperationScheduled (+Started, +Completed ...)     one `nexus_operation` row, likewise
any other MarkerRecorded (SideEffect, ...)             `marker` (name: the marker name)
WorkflowTaskScheduled / Started / Completed            one `wakeups` row per WorkflowTaskStarted
everything else: WorkflowExecutionStarted, the close   a row whose kind is the event type in
  event, WorkflowTaskFailed / TimedOut, updates,        snake_case (`workflow_task_failed`,
  search attributes ...                                 `workflow_execution_update_accepted`)

Every row's `value` is a dict that keeps Temporal's payloads exactly as recorded (base64,
for round trips), lists the Temporal `event_ids` it came from and, for a failure, holds its
message as `error`; `decode_payloads(value)` decodes the payloads for display. An activity
whose result is a model call's answer with token counts (an agent framework's model
activity: `model_usage`) also holds them as `usage`, so `dl.compare` and `dl.ops` count its
model calls and tokens (Temporal records no price: cost 0). Positions
follow the Temporal event that opened the row; times are seconds since the first event.
The run's `input` and `result` are decoded for display; the encoded originals stay in the
first and last rows.

What Temporal does not record, and what the importer does about it:

- Attempts. An activity's retries leave no events: its one ActivityTaskStarted carries the
  number of the attempt that ended it (and the previous attempt's failure, kept as
  `value["last_failure"]`). So `attempts` has one row per activity that started or ended,
  with that number, and no earlier rows are invented. When an activity's attempt is above
  1 the run's `notes` start with `LAST_ATTEMPT_NOTE`; only then, since an activity that
  ended on attempt 1 has no earlier attempts to miss, and a note on every run would teach
  readers to skip it. An activity no worker picked up (a schedule-to-start time-out) has
  no attempt number; its row spans the time from scheduling to the time-out. An activity
  still open has no `outcome` (and `ok` False: it has no result yet) and no attempts row:
  Temporal writes an attempt's start only when it ends, so running, queued and backing
  off look the same.
- Replay. Temporal does not say how many events a worker replayed. `wakeups.replayed` is
  inferred from the task queue: a task on a sticky queue went to the worker that had the
  run cached, which replays nothing (0); any later task on the normal queue makes a worker
  rebuild the run by replaying every row before it (their count). A worker that evicted
  its cache would replay more: the number is a floor for sticky tasks, exact otherwise.
  `reason` is what made the server schedule the task (start, activity, timer, signal,
  update, child, cancel, recovery after a failed or timed-out task, or other);
  `recorded` counts the rows the task's commands and update responses produced.
- Endings durablelab has no word for. A time-out becomes status "failed" with
  `RunTimedOut`; a termination or cancellation "failed" with `TemporalRunEnded`; each with a
  note, and no activity that never ran is blamed for it. A history without a close event is
  "running", with a note.
- Failures. A failure's message is taken from deep in its cause chain (`root_failure`), its
  location from the first stack frame that is the user's code (`user_frame`).
- Damage. A task's reference to its own or a later event (`BACKWARD_REFERENCES`: an
  activity's `scheduledEventId`, `startedEventId` ...), or an activity that ends twice, is
  refused; references Temporal writes pointing elsewhere (`externalInitiatedEventId` into
  the history of the workflow that cancelled this one, a `workflowTaskCompletedEventId`
  after its own event in an update-heavy run) are kept as recorded. An end
  that names the wrong start, or a completed run with an activity that never ended, is
  imported with a note. Clock skew (times that run backwards) is normal and only noted.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import ActivityFailed, DurableLabError, RunTimedOut, TemporalRunEnded, WorkflowError
from ..run import ATTEMPT_COLUMNS, CRASH_COLUMNS, HISTORY_COLUMNS, WAKEUP_COLUMNS, Run
from .temporal_json import (TemporalHistoryError, decode_payloads, duration, enum,
                            failure_class, instant_ns, message_of, read_histories,
                            history_error, root_failure, user_frame)

LAST_ATTEMPT_NOTE = ("Temporal records only the last attempt of each activity; earlier "
                     "attempts are not in the history")

_ACTIVITY_END = {"ActivityTaskCompleted": "ok", "ActivityTaskFailed": None,
                 "ActivityTaskTimedOut": "timeout", "ActivityTaskCanceled": "canceled"}
_VERSION_MARKERS = ("Version", "core_patch")
_LOCAL_ACTIVITY_MARKERS = ("LocalActivity", "core_local_activity")
_CHILD_END = {"ChildWorkflowExecutionCompleted": "ok", "ChildWorkflowExecutionFailed": None,
              "ChildWorkflowExecutionTimedOut": "timeout",
              "ChildWorkflowExecutionCanceled": "canceled",
              "ChildWorkflowExecutionTerminated": "terminated"}
_NEXUS_END = {"NexusOperationCompleted": "ok", "NexusOperationFailed": None,
              "NexusOperationTimedOut": "timeout", "NexusOperationCanceled": "canceled"}
# What made the server schedule a workflow task: the wake-up's reason.
_TRIGGERS = {"WorkflowExecutionStarted": "start", "TimerFired": "timer",
             "WorkflowExecutionSignaled": "signal", "WorkflowExecutionCancelRequested": "cancel",
             "WorkflowTaskFailed": "recovery", "WorkflowTaskTimedOut": "recovery",
             "WorkflowExecutionUpdateAdmitted": "update", **{k: "activity" for k in _ACTIVITY_END},
             **{k: "nexus" for k in ("NexusOperationStarted", *_NEXUS_END)}}
_CLOSE = {"WorkflowExecutionCompleted": "completed", "WorkflowExecutionFailed": "failed",
          "WorkflowExecutionTimedOut": "failed", "WorkflowExecutionTerminated": "failed",
          "WorkflowExecutionCanceled": "failed", "WorkflowExecutionContinuedAsNew": "continued"}


def load_temporal(source, run_id: str | None = None):
    """Import a Temporal workflow history as a read-only `Run` (source "temporal"), or a
    JSON list of histories as a list of runs.

    Use it to look at a run recorded by a real Temporal cluster with durablelab's views:
    `run.timeline()`, `dl.diagnose(run)`, `dl.compare([...])`.

    Args:
        source: a path to a JSON file (str or Path), JSON text, or the already-parsed
            object. Accepted shapes: `{"events": [...]}` (what `temporal workflow show
            --output json` writes) and `{"history": {"events": [...]}}` (the raw API
            response), events in ascending or descending order, event types spelled
            "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED" or "ActivityTaskScheduled"; or a JSON
            list of such histories (how Temporal's features repository stores them).
        run_id: the run id to show; by default the history's own run id
            (originalExecutionRunId), else the file name. For a list, the i-th run gets
            "{run_id}#{i}" when its history names no run id of its own.

    Returns a `Run` whose `notes` carry what the history cannot tell (earlier activity
    attempts, how it ended when durablelab has no word for it, clock skew, references
    that do not match); a list of runs for a list of histories.

    Raises `TemporalHistoryError` naming the file and the problem: not JSON (a truncated
    file), an unknown shape, no events, an event without eventType, eventId or eventTime,
    missing events, a reference to an event that is not there or comes later, or an
    activity that ends twice.
    """
    label, histories, many = read_histories(source)
    base = run_id or (Path(label).stem if not label.startswith("<") else "temporal-run")
    runs = []
    for i, events in enumerate(histories, 1):
        start = events[0]["attrs"]
        own = run_id if run_id and not many else None
        own = own or _text(start.get("originalExecutionRunId")) or _text(
            start.get("workflowId"))
        if not own:
            own = f"{base}#{i}" if many else base
        where = f"{label} (history #{i})" if many else label
        importer = _Importer(events, where, own)
        try:
            runs.append(importer.run())
        except _MISFITS as exc:
            raise misfit(where, importer.at, exc) from None
    return runs if many else runs[0]


#: What a field of the wrong type or value raises in the importer (an object where a name
#: was, text where a number was, a number past float's range): the file is refused, naming
#: the event, rather than shown as a traceback. Checked field by field where views need a
#: type (names, ids); this is the net under every other field a crafted file may bend.
_MISFITS = (TypeError, AttributeError, ValueError, KeyError, IndexError, OverflowError,
            RecursionError)


def misfit(label: str, event: dict | None, exc: BaseException) -> TemporalHistoryError:
    where = ("its start or close event" if event is None
             else f"event {event['id']} ({event['type']})")
    return history_error(label, f"{where} holds a field of a type or value Temporal does not "
                         f"write ({type(exc).__name__}: {str(exc)[:120]}), so the history is "
                         f"damaged or was edited (export it again from Temporal)")


# Token counts under the names agent frameworks record them by: the OpenAI Agents SDK and
# Pydantic AI ("input_tokens"), the chat-completions API ("prompt_tokens"), older Pydantic
# AI ("request_tokens").
_TOKENS = {"input_tokens": ("input_tokens", "prompt_tokens", "request_tokens"),
           "output_tokens": ("output_tokens", "completion_tokens", "response_tokens")}


def model_usage(result) -> dict | None:
    """``{"input_tokens", "output_tokens"}`` of a model call's decoded result, or None.

    An agent framework on Temporal records each model call as an activity whose result
    carries the call's usage: the OpenAI Agents SDK's `invoke_model_activity` returns a
    ModelResponse ``{"output", "usage": {"requests", "input_tokens", "output_tokens",
    ...}, "response_id"}``. Reading it lets `dl.compare` and `dl.ops` count the run's model
    calls and tokens; a result without a usage dict of token counts is not a model call.
    """
    usage = result.get("usage") if isinstance(result, dict) else None
    if not isinstance(usage, dict):
        return None
    found = {}
    for key, names in _TOKENS.items():
        value = next((usage[n] for n in names if n in usage), None)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            return None
        found[key] = int(value)
    return found


def _snake(kind: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower()


def _key(name) -> str:
    """A details key without case or separators: "activity_type", "ActivityType" and
    "activityType" all become "activitytype"."""
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def _change_id(details: dict) -> str:
    """The change id of a version marker: Go writes "change-id", Java "changeId", the core
    SDKs (Python, TypeScript, .NET) a "patch_data" payload holding {"id": ...}."""
    for key in ("change-id", "changeId", "patch_id", "id"):
        if key in details:
            return str(decode_payloads(details[key]))
    data = decode_payloads(details.get("patch_data"))
    if isinstance(data, dict) and data.get("id") is not None:
        return str(data["id"])
    return "(change id not recorded)"


def _text(value) -> str | None:
    """A name or id the history holds as text, or None when it holds something else (a
    crafted file's object or number): a run id views look runs up by must be a string."""
    return value if isinstance(value, str) and value else None


def _field(attrs: dict, *keys) -> Any:
    """attrs[k1][k2]..., or None where a level is missing or not an object."""
    for key in keys:
        if not isinstance(attrs, dict):
            return None
        attrs = attrs.get(key)
    return attrs


def _instant(value) -> int | None:
    """Nanoseconds since the epoch of a time in a local activity marker: RFC 3339 text,
    {"seconds", "nanos"} (core SDKs) or epoch milliseconds (Java)."""
    if isinstance(value, str):
        return instant_ns(value)
    if isinstance(value, dict) and "seconds" in value:
        try:
            return int(value["seconds"]) * 10**9 + int(value.get("nanos") or 0)
        except (TypeError, ValueError):
            return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return int(value * 10**6)
    return None


# --- mapping ---------------------------------------------------------------------------------


class _Importer:
    """One pass over the events, building history rows, attempts and wake-ups."""

    def __init__(self, events: list[dict], label: str, run_id: str):
        self.events, self.label, self.run_id = events, label, run_id
        self.t0 = events[0]["ns"]
        self.rows: list[dict] = []
        self.by_event: dict[int, dict] = {}       # first Temporal event id -> its row
        self.wakeups: list[dict] = []
        self.tasks: dict[int, dict] = {}          # scheduled/started/completed id -> wake-up
        self.queues: dict[int, str] = {}          # task scheduled id -> task queue kind
        self.reasons: list[str] = []
        self.signals = 0
        self.close: dict | None = None
        self.last_task_completed: int | None = None
        self.last_task_started: float = 0.0
        self.model_calls: list[str] = []          # activities whose result held model usage
        self.notes: list[str] = []
        self.at: dict | None = None               # the event being read, for errors

    def t(self, event: dict) -> float:
        return (event["ns"] - self.t0) / 1e9

    def row(self, event, kind, name, value, ok=True, **extra) -> dict:
        if not isinstance(name, str):   # views group, look up and draw rows by name
            raise history_error(self.label, f"event {event['id']} ({event['type']}) names its "
                                f"{kind.replace('_', ' ')} with {type(name).__name__} "
                                f"{str(name)[:40]!r}, not text, so the history is damaged or "
                                f"was edited")
        value = {**value, "event_ids": [event["id"]]}
        if event["meta"]:
            value["user_metadata"] = event["meta"]
        task = event["attrs"].get("workflowTaskCompletedEventId")
        if task is None and kind.startswith("workflow_execution_update"):
            task = self.last_task_completed   # update responses ride on the task before
        if extra.get("error"):
            value["error"] = extra["error"]   # history has no message column: views read it here
        row = {"kind": kind, "name": name, "ok": ok, "value": value,
               "recorded_at": self.t(event), "attempt": None, "outcome": None,
               "error_class": None, "error": None, "task": task and int(task), **extra}
        self.rows.append(row)
        self.by_event[event["id"]] = row
        return row

    def find(self, event, ref_key: str, kinds: tuple, attach: bool = True) -> dict:
        ref = event["attrs"].get(ref_key)
        found = self.by_event.get(int(ref)) if str(ref).isdigit() else None
        if found is None or found["kind"] not in kinds:
            raise history_error(self.label, f"event {event['id']} ({event['type']}) refers to "
                                f"{ref_key} {ref}, which is not a {' or '.join(kinds)} "
                                f"event here")
        if attach:
            found["value"]["event_ids"].append(event["id"])
        return found

    def run(self) -> Run:
        back = [(b, a) for b, a in zip(self.events, self.events[1:]) if a["ns"] < b["ns"]]
        if back:
            worst = max(back, key=lambda pair: pair[0]["ns"] - pair[1]["ns"])
            self.notes.append(
                f"Event times run backwards {len(back)} time(s) (most at event "
                f"{worst[1]['id']}, {(worst[0]['ns'] - worst[1]['ns']) / 1e9:g}s before event "
                f"{worst[0]['id']}): the clocks of Temporal's hosts differ a little; times "
                f"are shown as recorded.")
        for event in self.events:
            self.at = event
            reason = _TRIGGERS.get(event["type"])
            if reason is None and event["type"].startswith(("ChildWorkflowExecution",
                                                            "StartChildWorkflowExecutionFailed")):
                reason = "child"
            if reason:
                self.reasons.append(reason)
            handler = getattr(self, "on_" + event["type"], None)
            (handler or self.other)(event, event["attrs"])
        for row in self.rows:   # wake-ups count the rows their commands produced
            wake = self.tasks.get(row["task"])
            if wake is not None:
                wake["recorded"] += 1
        self.at = None
        return self.build()

    # workflow tasks: wake-ups, not history rows
    def on_WorkflowTaskScheduled(self, event, attrs):
        self.queues[event["id"]] = enum((attrs.get("taskQueue") or {}).get("kind"),
                                        "TASK_QUEUE_KIND_")

    def on_WorkflowTaskStarted(self, event, attrs):
        # A sticky task goes to the worker that has the run cached, so it replays nothing;
        # a later task on the normal queue makes some worker replay everything before it.
        scheduled = int(attrs.get("scheduledEventId") or 0)
        sticky = self.queues.get(scheduled) == "Sticky" or not self.wakeups
        wake = {"woke_at": self.t(event), "reason": self.reasons[0] if self.reasons else "other",
                "replayed": 0 if sticky else len(self.rows) - 1, "recorded": 0}
        self.reasons = []
        self.last_task_started = wake["woke_at"]
        self.wakeups.append(wake)
        self.tasks[scheduled] = self.tasks[event["id"]] = wake

    def on_WorkflowTaskCompleted(self, event, attrs):
        wake = self.tasks.get(int(attrs.get("startedEventId") or 0))
        if wake is not None:
            self.tasks[event["id"]] = wake
        self.last_task_completed = event["id"]

    def on_WorkflowTaskFailed(self, event, attrs):
        failure = attrs.get("failure") or {}
        self.row(event, "workflow_task_failed", enum(attrs.get("cause"),
                 "WORKFLOW_TASK_FAILED_CAUSE_") or "workflow task", {"attributes": attrs},
                 ok=False, error_class=failure_class(failure), error=message_of(failure))

    def on_WorkflowTaskTimedOut(self, event, attrs):
        timeout = enum(attrs.get("timeoutType"), "TIMEOUT_TYPE_")
        self.row(event, "workflow_task_timed_out", "workflow task", {"attributes": attrs},
                 ok=False, error_class="TimeoutError",
                 error=f"workflow task {timeout} timeout" if timeout else
                 "workflow task timed out")

    def on_WorkflowExecutionUpdateAccepted(self, event, attrs):
        row = self.other(event, attrs)
        wake = self.tasks.get(int(attrs.get("acceptedRequestSequencingEventId") or 0))
        if wake is not None and wake["reason"] == "other":
            wake["reason"] = "update"
        return row

    # activities: one row each, at the scheduled event's position
    def on_ActivityTaskScheduled(self, event, attrs):
        self.row(event, "activity", (attrs.get("activityType") or {}).get("name", "?"),
                 {"activity_id": attrs.get("activityId"), "input": attrs.get("input"),
                  "result": None, "failure": None, "last_failure": None,
                  "retry_policy": attrs.get("retryPolicy")},
                 ok=False, scheduled_at=self.t(event), started_at=None, ended_at=None)

    def on_ActivityTaskStarted(self, event, attrs):
        row = self.find(event, "scheduledEventId", ("activity",))
        attempt = attrs.get("attempt")
        row["attempt"] = int(attempt) if attempt is not None else None
        row["started_at"] = self.t(event)
        row["started_event"] = event["id"]
        row["value"]["last_failure"] = attrs.get("lastFailure")

    def on_ActivityTaskCancelRequested(self, event, attrs):
        self.find(event, "scheduledEventId", ("activity",))

    def _activity_end(self, event, attrs):
        row = self.find(event, "scheduledEventId", ("activity",))
        if row.get("ended_at") is not None:
            raise history_error(self.label, f"event {event['id']} ({event['type']}) ends "
                                f"the activity scheduled at event {row['value']['event_ids'][0]}"
                                f", which already ended at event "
                                f"{row['value']['event_ids'][-2]}")
        started = int(attrs.get("startedEventId") or 0)
        if started and started != row.get("started_event"):
            began = (f"started at event {row['started_event']}" if row.get("started_event")
                     else "has no start event")
            self.notes.append(
                f"Event {event['id']} ({event['type']}) names startedEventId {started}, but "
                f"activity {row['name']!r} (scheduled at event {row['value']['event_ids'][0]})"
                f" {began}: the history looks damaged or edited; the importer trusts "
                f"scheduledEventId.")
        row["recorded_at"] = row["ended_at"] = self.t(event)
        self.end_row(row, _ACTIVITY_END[event["type"]], attrs.get("result"),
                     attrs.get("failure"), attrs.get("retryState"), "activity canceled")

    def end_row(self, row, outcome, result, failure, retry_state, canceled_text):
        """Set an activity-like row's outcome, result or failure (activities, local
        activities, child workflows, Nexus operations)."""
        row["outcome"] = outcome
        row["ok"] = outcome == "ok"
        if row["ok"]:
            row["value"]["result"] = result
            usage = model_usage(decode_payloads(result))
            if usage is not None and row["kind"] == "activity":
                row["value"]["usage"] = usage
                self.model_calls.append(row["name"])
            return
        failure = failure if isinstance(failure, dict) else {}
        row["value"]["failure"] = failure or None
        app = failure.get("applicationFailureInfo") or {}
        non_retryable = app.get("nonRetryable") or enum(
            retry_state, "RETRY_STATE_") == "NonRetryableFailure"
        if row["outcome"] is None:
            row["outcome"] = ("timeout" if "timeoutFailureInfo" in failure else
                              "canceled" if "canceledFailureInfo" in failure else
                              "non_retryable" if non_retryable else "transient")
        root = root_failure(failure)
        row["error_class"] = (failure_class(root) if failure else
                              "TerminatedError" if outcome == "terminated" else "CanceledError")
        row["error"] = row["value"]["error"] = (message_of(root) if failure else canceled_text)

    on_ActivityTaskCompleted = on_ActivityTaskFailed = _activity_end
    on_ActivityTaskTimedOut = on_ActivityTaskCanceled = _activity_end

    # timers, signals, markers
    def on_TimerStarted(self, event, attrs):
        seconds = duration(attrs.get("startToFireTimeout"))
        timer_id = attrs.get("timerId")
        self.row(event, "sleep", f"timer {timer_id}", {
            "seconds": seconds, "timer_id": timer_id,
            "deadline": None if seconds is None else self.t(event) + seconds})

    def on_TimerFired(self, event, attrs):
        started = self.find(event, "startedEventId", ("sleep",), attach=False)
        self.row(event, "timer_fired", started["name"], {"timer_id": attrs.get("timerId")})

    def on_TimerCanceled(self, event, attrs):
        started = self.find(event, "startedEventId", ("sleep",), attach=False)
        self.row(event, "timer_canceled", started["name"], {"timer_id": attrs.get("timerId")})

    def on_WorkflowExecutionSignaled(self, event, attrs):
        self.signals += 1
        self.row(event, "signal_received", attrs.get("signalName", "?"),
                 {"value": attrs.get("input"), "signal_id": None, "seq": self.signals,
                  "attributes": attrs})

    def on_MarkerRecorded(self, event, attrs):
        marker = attrs.get("markerName", "?")
        details = attrs.get("details") or {}
        value = {"marker_name": marker, "details": details, "failure": attrs.get("failure")}
        if marker in _VERSION_MARKERS:
            self.row(event, "patched", _change_id(details), value)
        elif marker in _LOCAL_ACTIVITY_MARKERS:
            self.local_activity(event, attrs, details, value)
        else:
            self.row(event, "marker", marker, value)

    def local_activity(self, event, attrs, details, value):
        # A local activity runs inside the workflow task; only its marker reaches history,
        # with what it did in the details (keys differ between Go, Java and core SDKs).
        data = decode_payloads(details.get("data"))
        data = {_key(k): v for k, v in (data if isinstance(data, dict) else {}).items()}
        meta = decode_payloads(details.get("meta"))
        meta = {_key(k): v for k, v in (meta if isinstance(meta, dict) else {}).items()}
        name = data.get("activitytype") or decode_payloads(details.get("type"))
        attempt = data.get("attempt") or meta.get("atpt")
        end = self.t(event)
        began = _instant(data.get("originalscheduletime") or meta.get("firstskd"))
        began = self.last_task_started if began is None else (began - self.t0) / 1e9
        row = self.row(event, "activity", str(name or "local activity"), {
            **value, "local": True, "activity_id": data.get("activityid") or
            decode_payloads(details.get("activityId")), "input": details.get("input"),
            "result": None, "last_failure": None, "retry_policy": None},
            ok=False, scheduled_at=min(began, end), started_at=min(began, end), ended_at=end,
            attempt=int(attempt) if str(attempt).isdigit() else None)
        failure = attrs.get("failure")
        self.end_row(row, None if failure else "ok", details.get("result"), failure, None,
                     "local activity canceled")

    # child workflows and Nexus operations: one row each, like an activity
    def on_StartChildWorkflowExecutionInitiated(self, event, attrs):
        self.row(event, "child_workflow", (attrs.get("workflowType") or {}).get("name", "?"),
                 {"workflow_id": attrs.get("workflowId"), "input": attrs.get("input"),
                  "result": None, "failure": None, "attributes": attrs},
                 ok=False, scheduled_at=self.t(event), started_at=None, ended_at=None)

    def on_StartChildWorkflowExecutionFailed(self, event, attrs):
        row = self.find(event, "initiatedEventId", ("child_workflow",))
        row["recorded_at"] = row["ended_at"] = self.t(event)
        cause = enum(attrs.get("cause"), "START_CHILD_WORKFLOW_EXECUTION_FAILED_CAUSE_")
        row.update(ok=False, outcome="non_retryable", error_class="StartChildWorkflowFailed",
                   error=f"the child did not start ({cause or 'no cause given'})")
        row["value"]["error"] = row["error"]

    def on_ChildWorkflowExecutionStarted(self, event, attrs):
        row = self.find(event, "initiatedEventId", ("child_workflow",))
        row["started_at"] = self.t(event)
        row["value"]["run_id"] = (attrs.get("workflowExecution") or {}).get("runId")

    def _child_end(self, event, attrs):
        row = self.find(event, "initiatedEventId", ("child_workflow",))
        row["recorded_at"] = row["ended_at"] = self.t(event)
        self.end_row(row, _CHILD_END[event["type"]], attrs.get("result"), attrs.get("failure"),
                     attrs.get("retryState"), "child workflow " + _CHILD_END[event["type"]]
                     if _CHILD_END[event["type"]] else "child workflow failed")

    on_ChildWorkflowExecutionCompleted = on_ChildWorkflowExecutionFailed = _child_end
    on_ChildWorkflowExecutionTimedOut = on_ChildWorkflowExecutionCanceled = _child_end
    on_ChildWorkflowExecutionTerminated = _child_end

    def on_NexusOperationScheduled(self, event, attrs):
        name = "/".join(str(attrs[k]) for k in ("service", "operation") if attrs.get(k))
        self.row(event, "nexus_operation", name or "?",
                 {"endpoint": attrs.get("endpoint"), "input": attrs.get("input"),
                  "result": None, "failure": None, "attributes": attrs},
                 ok=False, scheduled_at=self.t(event), started_at=None, ended_at=None)

    def on_NexusOperationStarted(self, event, attrs):
        self.find(event, "scheduledEventId", ("nexus_operation",))["started_at"] = self.t(event)

    def on_NexusOperationCancelRequested(self, event, attrs):
        self.find(event, "scheduledEventId", ("nexus_operation",))

    def _nexus_end(self, event, attrs):
        row = self.find(event, "scheduledEventId", ("nexus_operation",))
        row["recorded_at"] = row["ended_at"] = self.t(event)
        self.end_row(row, _NEXUS_END[event["type"]], attrs.get("result"), attrs.get("failure"),
                     None, "Nexus operation canceled")

    on_NexusOperationCompleted = on_NexusOperationFailed = _nexus_end
    on_NexusOperationTimedOut = on_NexusOperationCanceled = _nexus_end

    def other(self, event, attrs):
        if event["type"] in _CLOSE:
            self.close = event
        failure = attrs.get("failure") if isinstance(attrs.get("failure"), dict) else None
        bad = event["type"].endswith(("Failed", "TimedOut", "Terminated", "Canceled"))
        name = (attrs.get("workflowType") or {}).get("name") or attrs.get("signalName") or \
            ((attrs.get("acceptedRequest") or {}).get("input") or {}).get("name") or ""
        return self.row(event, _snake(event["type"]), name, {"attributes": attrs}, ok=not bad,
                        error_class=failure_class(failure) if failure else None,
                        error=message_of(failure) if failure else None)

    # the Run
    def build(self) -> Run:
        for position, row in enumerate(self.rows, 1):
            row["position"] = position
            if row["kind"] in ("child_workflow", "nexus_operation"):   # spans for the views
                row["value"]["started_at"] = (row["started_at"] if row["started_at"]
                                              is not None else row["scheduled_at"])
                row["value"]["ended_at"] = row["ended_at"]
        activities = [r for r in self.rows if r["kind"] == "activity"]
        attempts = [self.attempt_row(r) for r in activities
                    if r["started_at"] is not None or r["ended_at"] is not None]
        start = self.events[0]["attrs"]
        status, result, error, notes = self.ending(start)
        notes += self.notes
        if status == "completed":
            still_open = [r for r in self.rows if r["kind"] in ("activity", "child_workflow",
                                                                "nexus_operation")
                          and r.get("ended_at") is None]
            if still_open:
                notes.append(f"The run completed while {len(still_open)} "
                             f"{still_open[0]['kind'].replace('_', ' ')}(ies) it started "
                             f"never ended in this history (first: {still_open[0]['name']!r}"
                             f", event {still_open[0]['value']['event_ids'][0]}); the "
                             f"history may be damaged or edited.")
        if self.model_calls:
            names = sorted(set(self.model_calls))
            notes.append(f"Model usage (tokens) was read from the results of "
                         f"{len(self.model_calls)} model call(s) ({', '.join(names)}); "
                         f"Temporal records no price, so their cost shows as 0.")
        again = [r for r in activities if (r["attempt"] or 0) > 1]
        if again:
            notes.insert(0, f"{LAST_ATTEMPT_NOTE} ({len(again)} activit"
                         f"{'y' if len(again) == 1 else 'ies'} here ran more than once, up "
                         f"to attempt {max(r['attempt'] for r in again)}).")
        if start.get("continuedFailure") or (start.get("attempt") or 1) > 1:
            which = f"attempt {start['attempt']}" if start.get("attempt") else "a retry"
            notes.append(f"This run is {which} of its workflow: "
                         f"Temporal retried it after the previous run failed ("
                         f"{message_of(start.get('continuedFailure') or {}) or 'no message'}).")
        history = pd.DataFrame([tuple(r.get(c) for c in HISTORY_COLUMNS) for r in self.rows],
                               columns=HISTORY_COLUMNS).astype({"attempt": "Int64"})
        return Run(
            run_id=self.run_id, workflow=_text(_field(start, "workflowType", "name")) or "?",
            status=status, input=decode_payloads(start.get("input")), result=result,
            error=error, seed=0, started_at=0.0,
            ended_at=None if self.close is None else self.t(self.close),
            parent_run_id=_text(start.get("continuedExecutionRunId")), history=history,
            attempts=pd.DataFrame(attempts, columns=ATTEMPT_COLUMNS).astype(
                {"attempt": "Int64", "max_attempts": "Int64"}),
            wakeups=pd.DataFrame(self.wakeups, columns=WAKEUP_COLUMNS),
            crashes=pd.DataFrame([], columns=CRASH_COLUMNS), source="temporal",
            notes=tuple(notes))

    @staticmethod
    def attempt_row(row: dict) -> tuple:
        # One row: the attempt Temporal recorded. An activity no worker picked up (a
        # schedule-to-start time-out) has no attempt number; its row spans the wait.
        limit = (row["value"]["retry_policy"] or {}).get("maximumAttempts")
        return (row["position"], row["name"], row["attempt"],
                row["started_at"] if row["started_at"] is not None else row["scheduled_at"],
                row["ended_at"], row["outcome"], row["error_class"], row["error"], None,
                int(limit) if limit and int(limit) > 0 else None)

    def ending(self, start: dict) -> tuple[str, Any, Any, list]:
        """status, result, error and notes, from the close event."""
        if self.close is None:
            return "running", None, None, ["The history ends without a close event: the run "
                                           "was still open when it was exported."]
        kind, attrs = self.close["type"], self.close["attrs"]
        status, at = _CLOSE[kind], self.t(self.close)
        if kind == "WorkflowExecutionCompleted":
            return status, decode_payloads(attrs.get("result")), None, []
        if kind == "WorkflowExecutionContinuedAsNew":
            return status, {"continued_as": attrs.get("newExecutionRunId")}, None, []
        if kind == "WorkflowExecutionFailed":
            return status, None, self.failed(attrs.get("failure") or {}), []
        if kind == "WorkflowExecutionTimedOut":
            limit = next((d for d in (duration(start.get("workflowRunTimeout")),
                                      duration(start.get("workflowExecutionTimeout"))) if d), None)
            state = enum(attrs.get("retryState"), "RETRY_STATE_")
            error = RunTimedOut(
                f"Temporal timed the run out after {at:g}s (its workflow time-out"
                f"{f' is {limit:g}s' if limit else ''}; retry state {state}).",
                run_id=self.run_id, timeout=limit, deadline=at, waiting=None)
            return status, None, error, ["Temporal timed the workflow execution out "
                                         "(WorkflowExecutionTimedOut); durablelab shows it as "
                                         "status 'failed'."]
        ended_by = "terminated" if kind == "WorkflowExecutionTerminated" else "canceled"
        reason = attrs.get("reason") or (self.cancel_request() if ended_by == "canceled"
                                         else None)
        error = TemporalRunEnded(
            f"Temporal {ended_by} run {self.run_id!r} at {at:g}s"
            f"{f' ({reason})' if reason else ''}; its code did not fail.",
            run_id=self.run_id, ended_by=ended_by, reason=reason,
            identity=attrs.get("identity"))
        return status, None, error, [f"The run was {ended_by} in Temporal "
                                     f"({'WorkflowExecution' + ended_by.capitalize()}); "
                                     f"durablelab shows it as status 'failed'."]

    def cancel_request(self) -> str:
        """Who asked for the cancellation: another workflow names itself and the event of
        *its* history that asked (externalInitiatedEventId), a client only its identity."""
        asked = next((r for r in reversed(self.rows)
                      if r["kind"] == "workflow_execution_cancel_requested"), None)
        attrs = asked["value"]["attributes"] if asked else {}
        other = attrs.get("externalWorkflowExecution") or {}
        if other.get("workflowId"):
            event = attrs.get("externalInitiatedEventId")
            return (f"a cancel request from workflow {other['workflowId']!r}"
                    f"{f' (its event {event})' if event else ''}")
        return "a cancel request"

    def failed(self, failure: dict) -> DurableLabError:
        info = failure.get("activityFailureInfo")
        cause = root_failure(failure.get("cause") or failure) if info is not None \
            else root_failure(failure)
        message = message_of(cause) or "no message recorded"
        if info is not None:
            row = self.by_event.get(int(info.get("scheduledEventId") or 0)) or {}
            name = (info.get("activityType") or {}).get("name") or row.get("name") or \
                "an unnamed activity"
            state = enum(info.get("retryState"), "RETRY_STATE_")
            where = ", ".join([f"run {self.run_id!r}"] + (
                [f"position {row['position']}"] if row.get("position") else []))
            tried = f" on attempt {row['attempt']}" if row.get("attempt") else ""
            return ActivityFailed(
                f"Activity {name!r} ({where}) failed for good{tried}"
                f"{f' (Temporal retry state {state})' if state else ''}: "
                f"{failure_class(cause)}: {message}",
                run_id=self.run_id, activity=name, position=row.get("position"),
                attempts=row.get("attempt"), error_class=failure_class(cause),
                cause_class=failure_class(cause), cause_message=message)
        return WorkflowError(
            f"Workflow code raised {failure_class(cause)} in run {self.run_id!r}: {message}",
            run_id=self.run_id,
            workflow=(self.events[0]["attrs"].get("workflowType") or {}).get("name"),
            cause_class=failure_class(cause), cause_message=message,
            location=user_frame(failure))


__all__ = ["load_temporal", "decode_payloads", "model_usage", "TemporalHistoryError",
           "TemporalRunEnded", "LAST_ATTEMPT_NOTE"]
