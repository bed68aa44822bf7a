"""Importing real Temporal histories (recorded by Temporal's own SDK test suites).

The histories live outside the project, in ../shared/external/temporal-histories (see its
README); they are never copied here. The counts asserted below were read off the JSON
files by hand (event types, attempts, marker details), not off the importer.
"""

import copy
import json
from pathlib import Path

import pandas as pd
import pytest

from durablelab import ActivityFailed, DurableLabError, RunTimedOut, WorkflowError
from durablelab.errors import error_from_json
from durablelab.importers.temporal import (LAST_ATTEMPT_NOTE, TemporalHistoryError, TemporalRunEnded,
                                 decode_payloads, load_temporal)

HISTORIES = Path(__file__).resolve().parents[2] / "shared" / "external" / "temporal-histories"
FILES = sorted(HISTORIES.glob("**/*.json"))

needs_histories = pytest.mark.skipif(
    not HISTORIES.is_dir(),
    reason=f"the shared Temporal histories are not at {HISTORIES} (a clone with shared/ "
           f"beside it has them)")


def load(name: str):
    return load_temporal(HISTORIES / name)


def kinds(run) -> dict:
    return run.history.kind.value_counts().to_dict()


def raw(name: str) -> dict:
    return json.loads((HISTORIES / name).read_text())


# --- every file imports ---------------------------------------------------------------------


@needs_histories
@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_shared_history_imports(path):
    run = load_temporal(path)
    assert run.source == "temporal"
    assert run.status in ("completed", "failed", "continued", "running")
    assert list(run.history.position) == list(range(1, len(run.history) + 1))
    assert run.history.kind.iloc[0] == "workflow_execution_started"
    # every Temporal event lands somewhere: in a history row or as a wake-up's task events
    events = raw(path.relative_to(HISTORIES).as_posix())
    events = events.get("events") or events["history"]["events"]
    in_rows = {i for ids in run.history.value.map(lambda v: v["event_ids"]) for i in ids}
    task_events = {int(e["eventId"]) for e in events
                   if e["eventType"].replace("_", "").upper().endswith(
                       ("WORKFLOWTASKSCHEDULED", "WORKFLOWTASKSTARTED", "WORKFLOWTASKCOMPLETED"))}
    assert in_rows | task_events == set(range(1, len(events) + 1))
    assert not in_rows & task_events
    assert len(run.wakeups) == sum(1 for e in events
                                   if e["eventType"] in ("WorkflowTaskStarted",
                                                         "EVENT_TYPE_WORKFLOW_TASK_STARTED"))


# --- counts read off the files ----------------------------------------------------------------


@needs_histories
def test_go_proto_payloads_13_activities_12_timers_and_retried_attempts_not_invented():
    run = load("sdk-go/gogoproto-payload-workflow.json")
    assert run.status == "completed" and run.result == 12
    assert kinds(run) == {"workflow_execution_started": 1, "workflow_task_failed": 1,
                          "activity": 13, "sleep": 12, "timer_fired": 12,
                          "workflow_execution_completed": 1}
    assert len(run.wakeups) == 27
    # one attempts row per activity, with the attempt number Temporal recorded
    assert len(run.attempts) == 13
    assert list(run.attempts.attempt) == [1, 1, 3, 1, 3, 1, 3, 1, 3, 1, 3, 1, 3]
    assert set(run.attempts.outcome) == {"ok"}
    assert run.notes[0].startswith(LAST_ATTEMPT_NOTE)
    assert "6 activities" in run.notes[0]
    sleeps = run.history[run.history.kind == "sleep"]
    assert set(sleeps.value.map(lambda v: v["seconds"])) == {1.0}
    # the workflow task that failed (the worker did not know the workflow type) is kept
    failed = run.history[run.history.kind == "workflow_task_failed"].iloc[0]
    assert not failed.ok
    assert "unable to find workflow type" in failed.value["error"]
    assert run.wakeups.reason.iloc[1] == "recovery"


@needs_histories
def test_go_continue_as_new_is_continued_as_the_new_run():
    run = load("sdk-go/continue-as-new.json")
    assert run.status == "continued"
    assert run.result == {"continued_as": "74f38af0-7c7d-4aae-bc10-6c34ba946693"}
    assert run.input is True
    assert kinds(run) == {"workflow_execution_started": 1,
                          "workflow_execution_continued_as_new": 1}
    assert len(run.wakeups) == 1 and run.notes == ()


@needs_histories
def test_go_version_markers_become_patched_with_their_change_ids():
    run = load("sdk-go/version-loop-workflow-10.json")
    patched = run.history[run.history.kind == "patched"]
    assert list(patched.name) == [f"versionID:{i}" for i in range(10)]
    assert kinds(run)["upsert_workflow_search_attributes"] == 10
    assert kinds(run)["sleep"] == kinds(run)["timer_fired"] == 1
    assert run.status == "completed" and len(run.wakeups) == 2


@needs_histories
def test_go_side_effect_marker_keeps_its_recorded_value():
    run = load("sdk-go/side-effect.json")
    marker = run.history[run.history.kind == "marker"]
    assert list(marker.name) == ["SideEffect"]
    assert decode_payloads(marker.value.iloc[0]["details"]) == {"data": 81, "side-effect-id": 1}
    activity = run.history[run.history.kind == "activity"].iloc[0]
    assert activity["name"] == "helloworldActivity" and activity.ok
    assert decode_payloads(activity.value["result"]) == "Hello test!"
    assert decode_payloads(activity.value["input"]) == "test"


@needs_histories
def test_go_loop_of_64_versioned_timers():
    run = load("sdk-go/workflow_loop_task.json")
    assert kinds(run)["patched"] == 64
    assert kinds(run)["sleep"] == kinds(run)["timer_fired"] == 64
    assert len(run.wakeups) == 65 and run.status == "completed"


@needs_histories
def test_python_signals_timer_activity_and_update():
    run = load("sdk-python/test_replayer_event_tracing.json")
    signals = run.history[run.history.kind == "signal_received"]
    assert list(signals.name) == ["dosig", "dosig"]
    assert [decode_payloads(v["value"]) for v in signals.value] == ["before", "1"]
    assert [v["seq"] for v in signals.value] == [1, 2]
    assert kinds(run)["sleep"] == kinds(run)["timer_fired"] == kinds(run)["activity"] == 1
    assert kinds(run)["workflow_execution_update_accepted"] == 1
    assert list(run.wakeups.reason) == ["start", "activity", "signal", "update", "timer"]
    # sticky tasks go to the worker that has the run cached: nothing to replay
    assert list(run.wakeups.replayed) == [0, 0, 0, 0, 0]
    assert run.wakeups.recorded.sum() == 5   # timer, activity, update x2, completion
    timer = run.history[run.history.kind == "sleep"].iloc[0]
    assert timer.value["seconds"] == pytest.approx(0.1)
    assert timer.value["deadline"] == pytest.approx(timer.recorded_at + 0.1)


@needs_histories
def test_python_agent_histories_count_their_model_activities():
    assert kinds(load("sdk-python/research-workflow-history.json"))["activity"] == 12
    assert kinds(load("sdk-python/tools-workflow-history.json"))["activity"] == 3
    assert load("sdk-python/hello-workflow-history.json").result == "test"


@needs_histories
def test_python_cancelled_run_is_failed_with_a_note():
    run = load("sdk-python/customer-service-workflow-history.json")
    assert kinds(run)["activity"] == 6
    assert kinds(run)["workflow_execution_update_completed"] == 4
    assert run.status == "failed"
    assert isinstance(run.error, TemporalRunEnded) and run.error.ended_by == "canceled"
    assert any("canceled" in note for note in run.notes)
    # an export writes the error as JSON; loading it back finds the same class
    again = error_from_json(json.loads(json.dumps(run.error.to_json())))
    assert type(again) is TemporalRunEnded and again.ended_by == "canceled"


@needs_histories
def test_ui_timed_out_history_in_descending_order():
    run = load("ui/raw-events.descending.timed-out.json")
    assert run.status == "failed"
    assert isinstance(run.error, RunTimedOut) and run.error.timeout == 1200.0
    assert run.ended_at == pytest.approx(1200.001292125, abs=1e-9)
    assert any("timed the workflow execution out" in note for note in run.notes)
    activity = run.history[run.history.kind == "activity"].iloc[0]
    assert not activity.ok and activity.outcome == "timeout"
    assert activity.error_class == "TimeoutError"
    assert activity.value["error"] == "activity ScheduleToStart timeout"
    # no worker ever started it: Temporal recorded no attempt number, and none is made up
    assert len(run.attempts) == 1 and pd.isna(run.attempts.attempt.iloc[0])
    assert kinds(run)["workflow_task_timed_out"] == 1
    assert kinds(run)["sleep"] == kinds(run)["timer_fired"] == 1
    assert len(run.wakeups) == 2


@needs_histories
def test_ui_retried_workflow_completed_on_its_third_attempt():
    run = load("ui/raw-events.ascending.failed.json")
    assert run.status == "completed" and run.result == "Success!"
    assert run.parent_run_id == "7e00b341-c579-4bb5-9e28-810d34ef4329"
    assert any("attempt 3" in note and "failing on attempt 2" in note for note in run.notes)


@needs_histories
def test_ui_completed_history_with_marker_timer_and_activity():
    run = load("ui/raw-events.ascending.completed.json")
    assert list(run.history.kind) == [
        "workflow_execution_started", "patched", "upsert_workflow_search_attributes", "sleep",
        "timer_fired", "activity", "workflow_execution_completed"]
    assert run.history.name.iloc[1] == "initial version"
    assert run.input == [1656707328774263086, "canary"]
    assert list(run.attempts.attempt) == [1]


@needs_histories
def test_open_histories_are_running_and_an_unstarted_activity_has_no_attempt():
    run = load("sdk-go/bad-history.json")
    assert run.status == "running" and run.ended_at is None
    activity = run.history[run.history.kind == "activity"].iloc[0]
    assert not activity.ok and activity.outcome is None      # open: no outcome yet
    assert len(run.attempts) == 0
    assert any("without a close event" in note for note in run.notes)
    trip = load("sdk-go/partial-replay-non-command-event.json")
    assert trip.status == "running"
    assert decode_payloads(trip.history.value.iloc[1]["value"]) == {"ID": "", "Total": 10}


@needs_histories
def test_activity_attempts_note_appears_only_when_an_activity_ran_more_than_once():
    # An activity whose last attempt is its first has no earlier attempts to miss.
    for name in ("ui/raw-events.ascending.completed.json", "sdk-go/side-effect.json"):
        assert not any(LAST_ATTEMPT_NOTE in note for note in load(name).notes)


# --- spellings, shapes, payloads -------------------------------------------------------------


def pascal_to_screaming(kind: str) -> str:
    return "EVENT_TYPE_" + "".join(f"_{c}" if c.isupper() and i else c
                                   for i, c in enumerate(kind)).upper()


@needs_histories
@pytest.mark.parametrize("name", ["sdk-go/side-effect.json",
                                  "sdk-python/test_replayer_complete_history.json",
                                  "ui/raw-events.descending.timed-out.json"])
def test_both_event_type_spellings_parse_to_the_same_run(name):
    doc = raw(name)
    other = copy.deepcopy(doc)
    for event in other.get("events") or other["history"]["events"]:
        event["eventType"] = pascal_to_screaming(event["eventType"])
    assert other != doc
    a, b = load_temporal(doc, run_id="r"), load_temporal(other, run_id="r")
    pd.testing.assert_frame_equal(a.history, b.history)
    pd.testing.assert_frame_equal(a.attempts, b.attempts)
    pd.testing.assert_frame_equal(a.wakeups, b.wakeups)
    assert (a.status, a.result, a.input, a.notes) == (b.status, b.result, b.input, b.notes)


@needs_histories
def test_wrapper_and_bare_events_give_the_same_run_and_so_do_both_orders():
    doc = raw("ui/raw-events.ascending.completed.json")
    bare = {"events": doc["history"]["events"]}
    reversed_ = {"events": list(reversed(doc["history"]["events"]))}
    runs = [load_temporal(d, run_id="r") for d in (doc, bare, reversed_, json.dumps(bare))]
    for run in runs[1:]:
        pd.testing.assert_frame_equal(run.history, runs[0].history)


@needs_histories
def test_payloads_kept_encoded_byte_for_byte_and_decoded_for_display():
    name = "sdk-go/side-effect.json"
    recorded = next(e for e in raw(name)["events"] if e["eventType"] == "ActivityTaskCompleted")
    original = recorded["activityTaskCompletedEventAttributes"]["result"]
    run = load(name)
    value = run.history[run.history.kind == "activity"].value.iloc[0]
    assert json.dumps(value["result"]) == json.dumps(original)      # encoded, as recorded
    assert value["result"]["payloads"][0]["data"] == "IkhlbGxvIHRlc3QhIg=="
    assert decode_payloads(value["result"]) == "Hello test!"         # decoded, to read
    close = run.history.value.iloc[-1]["attributes"]
    assert close == raw(name)["events"][-1]["workflowExecutionCompletedEventAttributes"]


def test_decode_payloads_leaves_binary_payloads_as_a_short_placeholder():
    binary = {"metadata": {"encoding": "YmluYXJ5L3Byb3RvYnVm",              # binary/protobuf
                           "messageType": "dGVtcG9yYWwuRm9v"},            # temporal.Foo
              "data": "CgNmb28="}
    assert decode_payloads(binary) == "<binary/protobuf temporal.Foo payload, 5 bytes>"
    null = {"metadata": {"encoding": "YmluYXJ5L251bGw="}}                   # binary/null
    assert decode_payloads({"payloads": [null]}) is None
    assert decode_payloads({"payloads": []}) is None
    broken = {"metadata": {"encoding": "anNvbi9wbGFpbg=="}, "data": "bm90IGpzb24="}
    assert decode_payloads(broken) == "<json/plain payload, 8 bytes>"
    two = {"payloads": [{"metadata": {"encoding": "anNvbi9wbGFpbg=="}, "data": "MQ=="}] * 2}
    assert decode_payloads({"input": two, "n": 3}) == {"input": [1, 1], "n": 3}


@needs_histories
def test_go_json_protobuf_payloads_decode_as_json():
    run = load("sdk-go/gogoproto-payload-workflow.json")
    listing = decode_payloads(run.history[run.history.kind == "activity"].value.iloc[0]["result"])
    assert isinstance(listing, dict) and "executions" in listing


# --- bad input ---------------------------------------------------------------------------------


def problem(source) -> TemporalHistoryError:
    with pytest.raises(TemporalHistoryError) as info:
        load_temporal(source)
    assert isinstance(info.value, DurableLabError)
    return info.value


@needs_histories
def test_truncated_file_names_the_file_and_says_truncated(tmp_path):
    text = (HISTORIES / "sdk-go/side-effect.json").read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(text[: len(text) // 2])
    error = problem(cut)
    assert error.path == str(cut)
    assert error.problem.startswith("not JSON") and "truncated" in error.problem
    assert str(cut) in str(error)


def test_wrong_shapes_name_the_problem():
    assert "unknown shape" in problem('{"workflow": 1}').problem
    assert "unknown shape" in problem("[1, 2]").problem
    assert "unknown shape" in problem({"history": {"events": "x"}}).problem
    assert "no events" in problem('{"events": []}').problem
    assert problem('{"events": []}').path == "<JSON text>"
    assert "no such file" in problem("/nonexistent/history.json").problem


@needs_histories
def test_event_missing_event_type_or_time_or_events_missing():
    events = raw("sdk-go/side-effect.json")["events"]
    no_type = copy.deepcopy(events)
    del no_type[5]["eventType"]
    assert problem({"events": no_type}).problem == "event 6 is missing eventType"
    bad_time = copy.deepcopy(events)
    bad_time[2]["eventTime"] = "yesterday"
    assert "event 3 (WorkflowTaskStarted) has no usable eventTime" in problem(
        {"events": bad_time}).problem
    assert "events 4 to 4 are missing" in problem({"events": events[:3] + events[4:]}).problem
    assert "incomplete" in problem({"events": events[1:]}).problem
    paged = {"history": {"events": events}, "nextPageToken": "abc"}
    assert "nextPageToken" in problem(paged).problem


@needs_histories
def test_reference_to_a_missing_scheduled_event_is_an_error():
    events = copy.deepcopy(raw("sdk-go/side-effect.json")["events"])
    events[6]["activityTaskStartedEventAttributes"]["scheduledEventId"] = "3"
    assert "refers to scheduledEventId 3" in problem({"events": events}).problem


@needs_histories
def test_failed_workflow_becomes_activity_failed_or_workflow_error():
    events = copy.deepcopy(raw("sdk-go/side-effect.json")["events"])
    cause = {"message": "card declined", "applicationFailureInfo": {"type": "CardDeclined",
                                                                     "nonRetryable": True}}
    events[7] = {"eventId": "8", "eventTime": events[7]["eventTime"],
                 "eventType": "ActivityTaskFailed",
                 "activityTaskFailedEventAttributes": {
                     "failure": cause, "scheduledEventId": "6", "startedEventId": "7",
                     "retryState": "RETRY_STATE_NON_RETRYABLE_FAILURE"}}
    closing = {"eventId": "12", "eventTime": events[11]["eventTime"],
               "eventType": "WorkflowExecutionFailed"}
    events[11] = {**closing, "workflowExecutionFailedEventAttributes": {"failure": {
        "message": "activity error", "cause": cause, "activityFailureInfo": {
            "scheduledEventId": "6", "activityType": {"name": "helloworldActivity"},
            "retryState": "RETRY_STATE_NON_RETRYABLE_FAILURE"}}}}
    run = load_temporal({"events": events})
    assert run.status == "failed" and isinstance(run.error, ActivityFailed)
    assert (run.error.activity, run.error.position, run.error.attempts) == (
        "helloworldActivity", 3, 1)
    assert run.error.cause_class == "CardDeclined"
    assert run.attempts.outcome.tolist() == ["non_retryable"]
    events[11] = {**closing, "workflowExecutionFailedEventAttributes": {"failure": {
        "message": "boom", "stackTrace": "main.Workflow(...)\n\tworkflow.go:12",
        "applicationFailureInfo": {"type": "PanicError"}}}}
    run = load_temporal({"events": events})
    assert isinstance(run.error, WorkflowError)
    assert (run.error.cause_class, run.error.location) == ("PanicError", "main.Workflow(...)")


# --- references Temporal writes pointing elsewhere; model usage in agent runs ---------------


def events_of(name: str) -> dict:
    return copy.deepcopy(raw(name))


def attrs(event: dict) -> dict:
    return next(v for k, v in event.items() if k.endswith("EventAttributes"))


@needs_histories
def test_a_run_cancelled_by_another_workflow_imports():
    # As Temporal records a cancel that another workflow asked for: the request names the
    # event of *that* workflow's history which asked (118 there), not one of this history.
    doc = events_of("sdk-python/customer-service-workflow-history.json")
    request = doc["events"][60]
    assert request["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED"
    attrs(request).update(externalInitiatedEventId="118", externalWorkflowExecution={
        "workflowId": "support-supervisor", "runId": "0197c196-aaaa-7000-8000-000000000001"})
    run = load_temporal(doc)
    assert run.status == "failed" and run.error.ended_by == "canceled"
    assert run.error.reason == "a cancel request from workflow 'support-supervisor' (its event 118)"
    row = run.history[run.history.kind == "workflow_execution_cancel_requested"].iloc[0]
    assert row.value["attributes"]["externalInitiatedEventId"] == "118"


@needs_histories
def test_an_update_whose_task_reference_points_forward_imports():
    # In an update-heavy run Temporal can write an event whose workflowTaskCompletedEventId
    # is later than its own id: the update's completion (event 15) credited to the task
    # that completed at event 18.
    doc = events_of("sdk-python/customer-service-workflow-history.json")
    completed = doc["events"][14]
    assert completed["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED"
    attrs(completed)["workflowTaskCompletedEventId"] = "18"
    run = load_temporal(doc)
    before = load("sdk-python/customer-service-workflow-history.json")
    assert run.status == before.status and len(run.history) == len(before.history)
    # the row counts for the wake-up of that later task, not for the one before it
    assert run.wakeups.recorded.sum() == before.wakeups.recorded.sum()
    assert not run.wakeups.recorded.equals(before.wakeups.recorded)


@needs_histories
@pytest.mark.parametrize("key", ["scheduledEventId", "startedEventId"])
def test_a_task_reference_to_a_later_event_is_still_damage(key):
    doc = events_of("sdk-python/hello-workflow-history.json")
    end = next(e for e in doc["events"]
               if e["eventType"] == "EVENT_TYPE_ACTIVITY_TASK_COMPLETED")
    attrs(end)[key] = str(int(end["eventId"]) + 1)
    with pytest.raises(TemporalHistoryError, match=f"refers to {key} .*a later event"):
        load_temporal(doc)


@needs_histories
def test_a_reference_that_is_no_number_is_damage_wherever_it_points():
    doc = events_of("sdk-python/customer-service-workflow-history.json")
    attrs(doc["events"][60])["externalInitiatedEventId"] = "soon"
    with pytest.raises(TemporalHistoryError, match="externalInitiatedEventId 'soon', which is "
                                                   "not an event id"):
        load_temporal(doc)


@needs_histories
def test_openai_agents_model_usage_counts_in_compare():
    from durablelab import compare
    # research: 12 invoke_model_activity results, their usage summed by hand from the
    # decoded payloads (input 156 + 445 + ... + 3781, output 264 + 153 + ... + 1111)
    run = load("sdk-python/research-workflow-history.json")
    row = compare([run]).loc[run.run_id]
    assert (row.model_calls, row.input_tokens, row.output_tokens, row.tokens) == (
        12, 8389, 4806, 13195)
    assert row.cost == 0.0 and any("Temporal records no price" in n for n in run.notes)
    # the test model of the other agent histories reports zero tokens: calls still count
    tools = load("sdk-python/tools-workflow-history.json")
    assert compare([tools]).loc[tools.run_id, ["model_calls", "tokens"]].tolist() == [2, 0]
    # a plain activity (say_hello returns text) is no model call
    hello = load("sdk-python/test_replayer_complete_history.json")
    assert compare([hello]).loc[hello.run_id, "model_calls"] == 0
    assert not any("Model usage" in n for n in hello.notes)


def test_model_usage_reads_the_names_frameworks_use():
    from durablelab.importers.temporal import model_usage
    assert model_usage({"usage": {"requests": 1, "input_tokens": 5, "output_tokens": 7}}) == {
        "input_tokens": 5, "output_tokens": 7}
    assert model_usage({"usage": {"prompt_tokens": 3, "completion_tokens": 4}}) == {
        "input_tokens": 3, "output_tokens": 4}
    for result in ("text", {"usage": "n/a"}, {"usage": {"input_tokens": -1, "output_tokens": 2}},
                   {"usage": {"input_tokens": True, "output_tokens": 2}}, {"usage": {}}):
        assert model_usage(result) is None


@needs_histories
def test_concurrent_activities_of_a_real_history_get_lanes_of_their_own():
    """The research agent ran ten model calls at once: ten lanes, numbered in start order,
    so no bar hides another."""
    from durablelab.viz.plots import _lanes, activity_attempts
    run = load("sdk-python/research-workflow-history.json")
    lanes = _lanes(run)
    assert lanes == ["invoke_model_activity"] + [f"invoke_model_activity ·{k}"
                                                  for k in range(2, 11)]
    attempts = activity_attempts(run)
    for _, lane in attempts.groupby("lane"):
        spans = lane.sort_values("started_at")
        assert (spans.started_at.iloc[1:].values >= spans.ended_at.iloc[:-1].values).all()
