"""The importer on small histories written here, each shaped after what one Temporal SDK
records: local activity markers (Go and Java "LocalActivity", the core SDKs'
"core_local_activity"), version markers (Go "change-id", Java "changeId", core "patch_data"),
failure cause chains with the SDK's own stack frames on top, runs ended from outside,
damaged references, clock skew, child workflows, signals, updates and Nexus operations, and
a JSON list of histories. The key names come from the SDKs' sources and the shared real
histories (../shared/external/temporal-histories); no upstream file is copied here.
"""

import base64
import json
import re

import pytest
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

import durablelab as dl
from durablelab.importers.temporal import (LAST_ATTEMPT_NOTE, TemporalHistoryError, TemporalRunEnded,
                                 load_temporal)

T0 = 1_700_000_000          # 2023-11-14T22:13:20Z


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def payloads(*values) -> dict:
    return {"payloads": [{"metadata": {"encoding": b64("json/plain")},
                          "data": b64(json.dumps(v))} for v in values]}


def instant(seconds: float) -> str:
    whole, frac = divmod(round(seconds * 1e9), 10**9)
    import time
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(T0 + whole)) + f".{frac:09d}Z"


def history(*events, spelling="go") -> dict:
    """{"events": [...]} from (seconds, EventType, attributes) triples, ids from 1.
    spelling "go" writes "ActivityTaskScheduled", "core" "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"."""
    out = []
    for i, (at, kind, attrs) in enumerate(events, 1):
        spelled = kind if spelling == "go" else "EVENT_TYPE_" + re.sub(
            r"(?<!^)(?=[A-Z])", "_", kind).upper()
        out.append({"eventId": str(i), "eventTime": instant(at), "eventType": spelled,
                    kind[0].lower() + kind[1:] + "EventAttributes": attrs})
    return {"events": out}


def started(name="Greeter", **attrs):
    return (0.0, "WorkflowExecutionStarted", {"workflowType": {"name": name},
                                              "taskQueue": {"name": "q"}, **attrs})


def task(at, first_id):
    """A workflow task's three events, the first at id `first_id`."""
    return [(at, "WorkflowTaskScheduled", {"taskQueue": {"name": "q"}}),
            (at + 0.01, "WorkflowTaskStarted", {"scheduledEventId": str(first_id)}),
            (at + 0.05, "WorkflowTaskCompleted", {"scheduledEventId": str(first_id),
                                                  "startedEventId": str(first_id + 1)})]


def completed(at, task_completed_id, value="done"):
    return (at, "WorkflowExecutionCompleted", {"result": payloads(value),
                                               "workflowTaskCompletedEventId":
                                                   str(task_completed_id)})


def marker(at, name, details, task_id, failure=None):
    attrs = {"markerName": name, "details": details,
             "workflowTaskCompletedEventId": str(task_id)}
    if failure is not None:
        attrs["failure"] = failure
    return (at, "MarkerRecorded", attrs)


def placeholder_free(*texts):
    for text in texts:
        assert "None" not in text and "?" not in text and not text.rstrip(". ").endswith(":"), text


# --- local activities ------------------------------------------------------------------------


def go_local_activity(at, task_id, name, attempt=1, result=None, failure=None, seq="1"):
    # Go: details "data" (localActivityMarkerData as JSON) and "result"
    data = payloads({"activityId": seq, "activityType": name, "replayTime": instant(at),
                     "attempt": attempt, "backoff": 0})
    details = {"data": data} if failure else {"data": data, "result": payloads(result)}
    return marker(at, "LocalActivity", details, task_id, failure)


def core_local_activity(at, task_id, name, seq, scheduled, attempt=1, result=None):
    # TypeScript, Python, .NET (sdk-core): "core_local_activity", details "data" and "result"
    data = payloads({"seq": seq, "attempt": attempt, "activity_id": str(seq),
                     "activity_type": name, "backoff": None,
                     "complete_time": {"seconds": T0 + int(at), "nanos": 0},
                     "original_schedule_time": {"seconds": T0 + int(scheduled), "nanos": 0}})
    return marker(at, "core_local_activity", {"data": data, "result": payloads(result)}, task_id)


def test_go_local_activity_is_an_activity_with_its_attempt_row():
    run = load_temporal(history(
        started(), *task(0.0, 2),
        go_local_activity(0.3, 4, "LocalGreet", result="hi"),
        completed(0.3, 4)))
    row = run.history[run.history.kind == "activity"].iloc[0]
    assert (row["name"], bool(row.ok), row.outcome, row.value["local"]) == (
        "LocalGreet", True, "ok", True)
    assert dl.decode_payloads(row.value["result"]) == "hi"
    assert run.attempts[["activity", "attempt", "outcome"]].values.tolist() == [
        ["LocalGreet", 1, "ok"]]
    assert not run.history.kind.eq("marker").any()
    assert run.notes == ()


def test_java_failed_local_activity_is_not_ok_and_keeps_its_attempt():
    # Java: details "activityId", "type", "input", "result", "time", "meta" {"atpt", "firstSkd"}
    failure = {"message": "card declined", "source": "JavaSDK",
               "applicationFailureInfo": {"type": "com.shop.CardDeclined",
                                          "nonRetryable": True}}
    details = {"activityId": payloads("a-1"), "type": payloads("Charge"),
               "input": payloads(42), "time": payloads((T0 + 5) * 1000),
               "meta": payloads({"firstSkd": (T0 + 1) * 1000, "atpt": 3, "backoff": None})}
    run = load_temporal(history(
        started(), *task(0.0, 2), marker(5.0, "LocalActivity", details, 4, failure),
        completed(5.1, 4)))
    row = run.history[run.history.kind == "activity"].iloc[0]
    assert (row["name"], bool(row.ok), row.outcome, row.attempt) == (
        "Charge", False, "non_retryable", 3)
    assert row.value["error"] == "card declined" and row.error_class == "com.shop.CardDeclined"
    attempt = run.attempts.iloc[0]
    assert (attempt.started_at, attempt.ended_at) == (pytest.approx(1.0), pytest.approx(5.0))
    assert run.notes[0].startswith(LAST_ATTEMPT_NOTE)


def test_parallel_core_local_activities_are_drawn_on_the_timeline():
    run = load_temporal(history(
        started("ParallelLocal"), *task(0.0, 2),
        core_local_activity(2.0, 4, "echo", 1, scheduled=0, result="a"),
        core_local_activity(2.0, 4, "echo", 2, scheduled=0, result="b"),
        core_local_activity(3.0, 4, "shout", 3, scheduled=0, result="C"),
        completed(3.1, 4), spelling="core"))
    assert run.history.kind.value_counts()["activity"] == 3
    assert sorted(run.attempts.activity) == ["echo", "echo", "shout"]
    fig = run.timeline()
    bars = [p for p in fig.findobj(Rectangle) if str(p.get_gid()).startswith("attempt:")]
    assert len(bars) == 3
    texts = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
    assert "no activities or waits recorded" not in texts


# --- version markers -------------------------------------------------------------------------


@pytest.mark.parametrize("details, change", [
    ({"change-id": payloads("go-change"), "version": payloads(1)}, "go-change"),        # Go
    ({"changeId": payloads("java-change"), "version": payloads(1)}, "java-change"),     # Java
])
def test_version_marker_change_ids_of_go_and_java(details, change):
    run = load_temporal(history(started(), *task(0.0, 2), marker(0.1, "Version", details, 4),
                                completed(0.2, 4)))
    assert run.history[run.history.kind == "patched"].name.tolist() == [change]


def test_core_patch_marker_change_id_comes_from_patch_data():
    details = {"patch_data": payloads({"id": "my-patch", "deprecated": False})}
    run = load_temporal(history(started(), *task(0.0, 2),
                                marker(0.1, "core_patch", details, 4), completed(0.2, 4),
                                spelling="core"))
    assert run.history[run.history.kind == "patched"].name.tolist() == ["my-patch"]


# --- failures: the real message and a frame of the user's code -------------------------------

JAVA_TRACE = ("java.lang.Thread.getStackTrace(Thread.java:1610)\n"
              "io.temporal.internal.sync.WorkflowThreadImpl.run(WorkflowThreadImpl.java:99)\n"
              "com.shop.OrderWorkflowImpl.placeOrder(OrderWorkflowImpl.java:42)\n"
              "java.base/java.lang.Thread.run(Thread.java:1583)\n")


def test_java_empty_top_message_uses_the_cause_and_a_user_frame():
    failure = {"message": "", "source": "JavaSDK", "stackTrace": JAVA_TRACE,
               "cause": {"message": "refunds are not supported", "source": "JavaSDK",
                         "stackTrace": JAVA_TRACE,
                         "applicationFailureInfo": {
                             "type": "java.lang.UnsupportedOperationException"}},
               "applicationFailureInfo": {"type": "io.temporal.failure.ApplicationFailure"}}
    run = load_temporal(history(started(), *task(0.0, 2), (0.3, "WorkflowExecutionFailed", {
        "failure": failure, "workflowTaskCompletedEventId": "4"})))
    error = run.error
    assert isinstance(error, dl.WorkflowError)
    assert error.cause_class == "java.lang.UnsupportedOperationException"
    assert error.cause_message == "refunds are not supported"
    assert error.location == "com.shop.OrderWorkflowImpl.placeOrder(OrderWorkflowImpl.java:42)"
    assert str(error).endswith("refunds are not supported")
    sentence = dl.diagnose(run).sentence
    assert "refunds are not supported" in sentence and "OrderWorkflowImpl.java:42" in sentence


@pytest.mark.parametrize("trace, frame", [
    ('Traceback (most recent call last):\n'
     '  File "/app/.venv/lib/python3.11/site-packages/temporalio/worker/_workflow_instance.py",'
     ' line 2200, in _run_top_level_workflow_function\n    await coro\n'
     '  File "/app/shop/workflows.py", line 31, in run\n    raise ValueError("no stock")\n',
     'File "/app/shop/workflows.py", line 31, in run'),
    ("go.temporal.io/sdk/internal.(*workflowEnvironmentInterceptor).ExecuteWorkflow(...)\n"
     "\t/go/pkg/mod/go.temporal.io/sdk@v1.30.0/internal/workflow.go:600\n"
     "shop.OrderWorkflow(...)\n\t/src/shop/workflow.go:27\n",
     "shop.OrderWorkflow(...)"),
    ("ApplicationFailure: no stock\n"
     "    at Function.nonRetryable (/app/node_modules/@temporalio/common/lib/failure.js:9:5)\n"
     "    at orderWorkflow (/app/src/workflows.ts:14:11)\n",
     "at orderWorkflow (/app/src/workflows.ts:14:11)"),
])
def test_user_frame_skips_python_go_and_typescript_sdk_frames(trace, frame):
    failure = {"message": "no stock", "stackTrace": trace,
               "applicationFailureInfo": {"type": "ValueError"}}
    run = load_temporal(history(started(), *task(0.0, 2), (0.3, "WorkflowExecutionFailed", {
        "failure": failure, "workflowTaskCompletedEventId": "4"})))
    assert run.error.location == frame


def test_activity_failure_message_comes_from_below_the_wrapper_without_placeholders():
    # an ActivityFailure whose info names no scheduled event: no position, no attempt
    failure = {"message": "activity error", "activityFailureInfo": {
        "activityType": {"name": "Ship"}, "retryState": "RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED"},
        "cause": {"message": "", "cause": {"message": "carrier down",
                                           "applicationFailureInfo": {"type": "CarrierError"}}}}
    run = load_temporal(history(started(), *task(0.0, 2), (0.3, "WorkflowExecutionFailed", {
        "failure": failure, "workflowTaskCompletedEventId": "4"})))
    assert isinstance(run.error, dl.ActivityFailed)
    assert (run.error.cause_class, run.error.cause_message) == ("CarrierError", "carrier down")
    placeholder_free(str(run.error), dl.diagnose(run).sentence)


# --- runs ended from outside -----------------------------------------------------------------


@pytest.mark.parametrize("ending, attrs", [
    ("WorkflowExecutionTerminated", {"reason": "operator cleanup", "identity": "cli"}),
    ("WorkflowExecutionCanceled", {"workflowTaskCompletedEventId": "4"}),
])
def test_terminated_or_canceled_run_is_not_blamed_on_an_activity_that_never_started(
        ending, attrs):
    run = load_temporal(history(
        started(), *task(0.0, 2),
        (0.1, "ActivityTaskScheduled", {"activityId": "1", "activityType": {"name": "DoActivity"},
                                        "workflowTaskCompletedEventId": "4"}),
        (0.1, "TimerStarted", {"timerId": "1", "startToFireTimeout": "3600s",
                               "workflowTaskCompletedEventId": "4"}),
        (60.0, ending, attrs)))
    assert isinstance(run.error, TemporalRunEnded)
    sentence = dl.diagnose(run).sentence
    assert "DoActivity" not in sentence and "last activity" not in sentence
    placeholder_free(sentence, str(run.error), *run.notes)
    # the timer still open at the end is drawn up to the run's end, not to its deadline
    fig = run.timeline()
    ax = fig.axes[0]
    wait = next(p for p in fig.findobj(Rectangle) if str(p.get_gid()).startswith("wait:"))
    assert ax.get_xlabel() == "time (s)"
    assert wait.get_x() + wait.get_width() == pytest.approx(60.0)
    assert ax.get_xlim()[1] < 100           # the axis does not run on to the deadline


# --- damaged histories and clock skew --------------------------------------------------------


def activity_events(scheduled_ref="5", started_ref="6"):
    return [(0.1, "ActivityTaskScheduled", {"activityId": "1", "activityType": {"name": "Pay"},
                                            "workflowTaskCompletedEventId": "4"}),
            (0.2, "ActivityTaskStarted", {"scheduledEventId": scheduled_ref, "attempt": 1}),
            (0.3, "ActivityTaskCompleted", {"scheduledEventId": "5", "startedEventId": started_ref,
                                            "result": payloads(1)})]


def test_a_reference_to_a_later_event_is_refused():
    with pytest.raises(TemporalHistoryError) as info:
        load_temporal(history(started(), *task(0.0, 2), *activity_events(scheduled_ref="7")))
    assert info.value.problem.startswith("event 6 (ActivityTaskStarted) refers to "
                                         "scheduledEventId 7, a later event")
    assert "damaged or was edited" in str(info.value)


def test_an_activity_that_ends_twice_is_refused():
    events = [started(), *task(0.0, 2), *activity_events(),
              (0.4, "ActivityTaskFailed", {"scheduledEventId": "5", "startedEventId": "6",
                                           "failure": {"message": "late"}})]
    with pytest.raises(TemporalHistoryError, match="already ended at event 7"):
        load_temporal(history(*events))


def test_an_end_naming_the_wrong_start_is_flagged_in_the_notes():
    run = load_temporal(history(started(), *task(0.0, 2), *activity_events(started_ref="2"),
                                *task(0.4, 8), completed(0.5, 10)))
    assert run.status == "completed"
    assert any("startedEventId 2" in note and "damaged or edited" in note for note in run.notes)


def test_a_completed_run_with_an_activity_that_never_ended_is_flagged():
    events = [started(), *task(0.0, 2), *activity_events()[:2], completed(0.5, 4)]
    run = load_temporal(history(*events))
    assert any("never ended" in note and "'Pay'" in note for note in run.notes)


def test_event_times_that_run_backwards_are_imported_with_a_note():
    events = [started(), *task(0.0, 2), *activity_events(), *task(0.4, 8), completed(0.5, 10)]
    events[6] = (0.15, *events[6][1:])     # the start is stamped 50 ms before the scheduling
    events[5] = (0.2, *events[5][1:])
    run = load_temporal(history(*events))
    assert run.status == "completed" and len(run.attempts) == 1
    assert any("run backwards 1 time(s)" in note and "event 6" in note for note in run.notes)
    run.timeline()


# --- children, signals, updates, Nexus -------------------------------------------------------


def test_child_workflows_signals_updates_and_nexus_are_on_the_timeline():
    events = [
        started("Parent"), *task(0.0, 2),
        (1.0, "StartChildWorkflowExecutionInitiated", {
            "workflowId": "child-1", "workflowType": {"name": "Child"},
            "workflowTaskCompletedEventId": "4"}),
        (1.5, "ChildWorkflowExecutionStarted", {
            "initiatedEventId": "5", "workflowExecution": {"workflowId": "child-1",
                                                           "runId": "r-1"}}),
        (2.0, "NexusOperationScheduled", {"endpoint": "e", "service": "billing",
                                          "operation": "charge",
                                          "workflowTaskCompletedEventId": "4"}),
        (3.0, "WorkflowExecutionSignaled", {"signalName": "poke", "input": payloads(1)}),
        (9.0, "ChildWorkflowExecutionCompleted", {
            "initiatedEventId": "5", "startedEventId": "6", "result": payloads("ok")}),
        (12.0, "NexusOperationFailed", {"scheduledEventId": "7", "failure": {
            "message": "nexus operation failed", "nexusOperationExecutionFailureInfo": {},
            "cause": {"message": "card expired",
                      "applicationFailureInfo": {"type": "CardExpired"}}}}),
        *task(12.0, 11),
        (12.1, "WorkflowExecutionUpdateAccepted", {
            "protocolInstanceId": "u1", "acceptedRequestSequencingEventId": "11",
            "acceptedRequest": {"input": {"name": "set_limit"}}}),
        completed(13.0, 13)]
    run = load_temporal(history(*events))
    child = run.history[run.history.kind == "child_workflow"].iloc[0]
    assert (child["name"], child.outcome, bool(child.ok)) == ("Child", "ok", True)
    nexus = run.history[run.history.kind == "nexus_operation"].iloc[0]
    assert (nexus["name"], nexus.outcome, nexus.error_class) == (
        "billing/charge", "transient", "CardExpired")
    assert nexus.value["error"] == "card expired"
    assert len(run.attempts) == 0          # children and operations are not activity attempts
    fig = run.timeline()
    ax = fig.axes[0]
    lanes = [t.get_text() for t in ax.get_yticklabels()]
    assert lanes == ["child Child", "nexus billing/charge", "messages"]
    spans = {str(p.get_gid()).split(":")[0]: p for p in fig.findobj(Rectangle)
             if str(p.get_gid()).startswith(("child_workflow:", "nexus_operation:"))}
    assert spans["child_workflow"].get_x() == pytest.approx(1.5)
    marks = [m.get_gid() for m in fig.findobj(Line2D) if str(m.get_gid()).startswith("message:")]
    assert marks == ["message:signal_received:poke",
                     "message:workflow_execution_update_accepted:set_limit"]
    assert "no activities or waits recorded" not in [t.get_text() for t in ax.texts]


# --- a list of histories ---------------------------------------------------------------------


def test_a_json_list_of_histories_imports_as_a_list_of_runs(tmp_path):
    one = history(started("A", originalExecutionRunId="run-a"), *task(0.0, 2),
                  completed(0.1, 4, "a"))
    two = history(started("B"), *task(0.0, 2), completed(0.2, 4, "b"))
    path = tmp_path / "histories.json"
    path.write_text(json.dumps([one, {"history": two}]))
    runs = load_temporal(path)
    assert [(r.run_id, r.workflow, r.result) for r in runs] == [
        ("run-a", "A", "a"), ("histories#2", "B", "b")]
    broken = [one, {"events": two["events"][1:]}]
    with pytest.raises(TemporalHistoryError, match=r"history #2: the history starts with "
                                                   r"event 2"):
        load_temporal(broken)


# --- a stranger's file: crafted values never reach a traceback ------------------------------


def greeting(**start_attrs):
    return history(started(**start_attrs), *task(0.0, 2), *activity_events(), completed(0.4, 4))


def test_json_nested_thousands_deep_is_refused_not_a_recursion_error():
    for text in ("[" * 100_000 + "]" * 100_000, '{"events": ' + "[" * 100_000 + "]" * 100_000
                 + "}"):
        with pytest.raises(TemporalHistoryError, match="nested too deeply"):
            load_temporal(text)


@pytest.mark.parametrize("where", ["eventId", "scheduledEventId"])
@pytest.mark.parametrize("number", ["1e999", "2.5", "true"])
def test_an_event_id_that_is_infinite_fractional_or_no_number_is_refused(where, number):
    """JSON's 1e999 reads as a float infinity, which int() cannot take (OverflowError)."""
    text = json.dumps(greeting()).replace(f'"{where}": "5"' if where == "eventId" else
                                          f'"{where}": "2"', f'"{where}": {number}', 1)
    assert number in text
    with pytest.raises(TemporalHistoryError, match="no usable eventId|not an event id"):
        load_temporal(text)


def test_decode_payloads_never_raises_on_payload_data_nested_thousands_deep():
    deep = {"metadata": {"encoding": b64("json/plain")},
            "data": base64.b64encode(b"[" * 100_000 + b"]" * 100_000).decode()}
    assert dl.decode_payloads(deep) == "<json/plain payload, 200000 bytes>"
    nested = {"payloads": [deep]}
    for _ in range(990):          # as deep as json.loads lets a file go
        nested = [nested]
    assert dl.decode_payloads(nested) is not None


def test_a_start_whose_input_payload_is_nested_thousands_deep_imports():
    deep = {"payloads": [{"metadata": {"encoding": b64("json/plain")},
                          "data": base64.b64encode(b"[" * 50_000 + b"]" * 50_000).decode()}]}
    run = load_temporal(greeting(input=deep))
    assert run.input == "<json/plain payload, 100000 bytes>" and run.status == "completed"


@pytest.mark.parametrize("value", [{"a": 1}, ["x"], 5, ""])
def test_a_run_id_that_is_not_text_is_not_used(value):
    """Views look runs up by id (a dict is unhashable) and match children to parents."""
    run = load_temporal(greeting(originalExecutionRunId=value, continuedExecutionRunId=value,
                                 workflowId="greet-1"))
    assert run.run_id == "greet-1" and run.parent_run_id is None
    assert run.timeline() is not None and "Greeter" in dl.ops([run])._repr_html_()


@pytest.mark.parametrize("value", [{"a": 1}, ["x"], 5])
def test_a_workflow_name_that_is_not_text_is_refused(value):
    doc = greeting()
    doc["events"][0]["workflowExecutionStartedEventAttributes"]["workflowType"] = {"name": value}
    with pytest.raises(TemporalHistoryError, match=r"event 1 \(WorkflowExecutionStarted\) "
                                                   r"names its .* not text"):
        load_temporal(doc)


@pytest.mark.parametrize("event, key, value", [
    (0, "workflowType", 5), (0, "attempt", "twice"), (0, "attempt", [1]),
    (4, "activityType", "Pay"), (4, "activityType", {"name": ["Pay"]})])
def test_a_field_of_a_type_temporal_never_writes_names_its_event(event, key, value):
    doc = greeting()
    attrs = next(v for k, v in doc["events"][event].items() if k.endswith("Attributes"))
    attrs[key] = value
    with pytest.raises(TemporalHistoryError) as info:
        load_temporal(doc)
    assert f"event {event + 1} (" in info.value.problem or "start or close" in info.value.problem
    assert "damaged or was edited" in info.value.problem
