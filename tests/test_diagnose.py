"""dl.diagnose: why a run is where it is, built from real engine runs on a virtual clock."""

import copy
import html
import json
from pathlib import Path

import pandas as pd
import pytest

import durablelab as dl
from durablelab.diagnose import STATES, Diagnosis, diagnose
from durablelab.run import ATTEMPT_COLUMNS, CRASH_COLUMNS, HISTORY_COLUMNS, WAKEUP_COLUMNS
from durablelab.importers.temporal import load_temporal

DAY = 86400.0
FLAKY = dl.RetryPolicy(max_attempts=4, jitter="none")   # waits 1, 2, 4 s between attempts
HISTORIES = Path(__file__).resolve().parents[2] / "shared" / "external" / "temporal-histories"
needs_histories = pytest.mark.skipif(not HISTORIES.is_dir(),
                                     reason=f"the shared Temporal histories are not at "
                                            f"{HISTORIES}")


def gateway_timeout(order_id):
    raise TimeoutError("gateway did not answer")


def check(run_id, engine) -> Diagnosis:
    found = diagnose(engine.run(run_id))
    assert found.state in STATES
    assert str(found) == found.sentence
    assert found.sentence in repr(found) and html.escape(found.sentence) in found._repr_html_()
    return found


def test_completed_gives_the_result(engine):
    def greet(ctx, name):
        return ctx.activity("greet", lambda n: f"hello {n}", name)
    run_id = engine.start(greet, "ada")
    engine.run_until_idle()
    found = check(run_id, engine)
    assert found.state == "completed"
    assert "'hello ada'" in found.sentence and found.at == 0.0
    assert list(found.events.kind) == ["activity"]


def test_waiting_on_a_timer_says_until_when_from_the_start(engine):
    def nap(ctx, _):
        ctx.sleep(90 * 60)
    run_id = engine.start(nap, None)
    engine.advance(60)
    found = check(run_id, engine)
    assert found.state == "waiting_timer"
    assert found.until == 5400.0 and found.since == 0.0
    assert "ctx.sleep(1 h 30 min)" in found.sentence
    assert "fires 1 h 30 min after the start" in found.sentence
    assert list(found.events.kind) == ["sleep"]


def test_waiting_on_a_signal_with_a_deadline(engine):
    def approve(ctx, _):
        ctx.sleep(3600)
        return ctx.wait_signal("approval", deadline=ctx.now() + 3 * DAY)
    run_id = engine.start(approve, None)
    engine.advance(2 * 3600)
    found = check(run_id, engine)
    assert found.state == "waiting_signal"
    assert (found.facts["signal"], found.since, found.until) == ("approval", 3600.0,
                                                                3600.0 + 3 * DAY)
    assert "signal 'approval' since 1 h after the start" in found.sentence
    assert "deadline is 3 days 1 h after the start" in found.sentence


def test_waiting_on_a_signal_without_deadline_may_wait_forever(engine):
    def approve(ctx, _):
        return ctx.wait_signal("approval")
    run_id = engine.start(approve, None)
    engine.run_until_idle()
    found = check(run_id, engine)
    assert found.state == "waiting_signal" and found.until is None
    assert "no deadline: it may wait forever" in found.sentence


def test_in_backoff_says_attempt_n_of_m_and_when_the_next_one_is_due(engine):
    def pay(ctx, order):
        return ctx.activity("charge", gateway_timeout, order, policy=FLAKY)
    run_id = engine.start(pay, "o-1")
    engine.advance(1.5)          # attempt 1 at 0 s, attempt 2 at 1 s; attempt 3 due at 3 s
    found = check(run_id, engine)
    assert found.state == "backoff"
    assert found.facts == {"activity": "charge", "position": 1, "attempt": 2,
                           "max_attempts": 4, "next_attempt": 3, "next_attempt_at": 3.0}
    assert (found.since, found.until) == (1.0, 3.0)
    assert "failed attempt 2 of 4" in found.sentence
    assert "TimeoutError: gateway did not answer" in found.sentence
    assert "attempt 3 of 4 is due 3 s after the start" in found.sentence
    assert list(found.attempts.attempt) == [1, 2]


def test_failed_activity_gives_the_error_and_its_attempt_history(engine):
    def pay(ctx, order):
        return ctx.activity("charge", gateway_timeout, order, policy=FLAKY)
    run_id = engine.start(pay, "o-1")
    engine.run_until_idle()
    found = check(run_id, engine)
    assert found.state == "failed" and found.at == 7.0
    assert "activity 'charge' (position 1) failed for good after 4 attempt(s)" in found.sentence
    assert "[1: timeout, 2: timeout, 3: timeout, 4: timeout]" in found.sentence
    assert "its retries are spent: TimeoutError: gateway did not answer" in found.sentence
    assert list(found.attempts.attempt) == [1, 2, 3, 4]


def test_non_retryable_failure_says_so(engine):
    def reject(card):
        raise ValueError("card number is invalid\nsecond line not shown")
    def pay(ctx, card):
        return ctx.activity("charge", reject, card, policy=FLAKY)
    run_id = engine.start(pay, "4111")
    engine.run_until_idle()
    found = check(run_id, engine)
    assert found.state == "failed"
    assert "after 1 attempt(s) [1: non_retryable], its error is not retryable" in found.sentence
    assert found.sentence.endswith("ValueError: card number is invalid.")
    assert found.facts["error_class"] == "NonRetryable"


def test_workflow_code_raising_says_where(engine):
    def divide(ctx, _):
        ctx.activity("load", lambda: 0)
        return 1 / 0
    run_id = engine.start(divide, None)
    engine.run_until_idle()
    found = check(run_id, engine)
    assert found.state == "workflow_error"
    assert "workflow code raised ZeroDivisionError: division by zero" in found.sentence
    assert f"{__file__}:" in found.sentence and "in divide" in found.sentence
    assert found.facts["location"].startswith(__file__)
    assert "not retried" in found.sentence


def test_version_mismatch_gives_position_recorded_requested_and_the_fix(engine):
    changed = {"audit_first": False}
    def approve(ctx, _):
        if changed["audit_first"]:
            ctx.activity("audit", lambda: "ok")
        return ctx.wait_signal("approval")
    run_id = engine.start(approve, None)
    engine.run_until_idle()
    changed["audit_first"] = True           # deploy new code under a waiting run
    engine.crash()                          # a fresh worker replays with the new code
    engine.run_until_idle()
    found = check(run_id, engine)
    assert found.state == "diverged"
    assert found.facts["position"] == 1
    assert found.facts["recorded"]["kind"] == "wait_signal"
    assert found.facts["requested"] == {"kind": "activity", "name": "audit",
                                        "digest": found.facts["requested"]["digest"]}
    assert ("at position 1: history recorded ctx.wait_signal('approval') but the code now "
            "asks for ctx.activity('audit')") in found.sentence
    assert "ctx.patched(" in found.sentence
    assert list(found.events.kind) == ["wait_signal"]


def test_continued_names_the_next_run(engine):
    def count(ctx, n):
        if n < 2:
            ctx.continue_as_new(n + 1)
        return n
    run_id = engine.start(count, 0, run_id="counter")
    engine.run_until_idle()
    found = check("counter", engine)
    assert found.state == "continued" and found.facts["continued_as"] == "counter~1"
    assert "Continued as new run 'counter~1'" in found.sentence
    assert check("counter~2", engine).state == "completed"


def test_running_before_the_code_ran_and_while_an_attempt_is_in_flight(engine):
    def slow(ctx, _):
        return ctx.activity("slow", lambda: 1)
    run_id = engine.start(slow, None, faults=[dl.faults.Latency("slow", seconds=30)])
    found = check(run_id, engine)
    assert found.state == "running" and "has not run yet" in found.sentence

    def other(ctx, _):
        ctx.sleep(10)
    engine.start(other, None)               # something else due meanwhile keeps it in flight
    engine.advance(5)
    found = check(run_id, engine)
    assert found.state == "running" and "in flight" in found.sentence


def test_works_on_a_run_built_without_an_engine():
    history = pd.DataFrame([(1, "sleep", "sleep", True, {"seconds": 7200.0, "deadline": 7300.0},
                             None, 100.0, None, None, None, None, None)],
                           columns=HISTORY_COLUMNS[:-1])   # without `handle`: as before concurrency
    run = dl.Run(run_id="by-hand", workflow="m:f", status="waiting", input=None, result=None,
                 error=None, seed=0, started_at=100.0, ended_at=None, parent_run_id=None,
                 history=history, attempts=pd.DataFrame([], columns=ATTEMPT_COLUMNS),
                 wakeups=pd.DataFrame([], columns=WAKEUP_COLUMNS),
                 crashes=pd.DataFrame([], columns=CRASH_COLUMNS))
    found = diagnose(run)
    assert found.state == "waiting_timer" and found.until == 7300.0
    assert "started at the run's start and fires 2 h after the start" in found.sentence


# --- imported Temporal runs ------------------------------------------------------------------


@needs_histories
def test_temporal_timed_out_run_names_the_activity_that_failed_before():
    found = diagnose(load_temporal(HISTORIES / "ui/raw-events.descending.timed-out.json"))
    assert found.state == "failed" and found.facts["error_class"] == "RunTimedOut"
    assert found.sentence.startswith("Failed 20 min after the start: RunTimedOut")
    assert ("'activity.advanced-visibility' (position 7, TimeoutError: activity "
            "ScheduleToStart timeout)") in found.sentence
    assert list(found.events.position) == [7, 9]


@needs_histories
def test_temporal_open_runs_say_what_the_history_cannot_show():
    found = diagnose(load_temporal(HISTORIES / "sdk-go/bad-history.json"))
    assert found.state == "running" and found.facts["activity"] == "helloworldActivity"
    assert "does not show whether it is running" in found.sentence
    stalled = diagnose(load_temporal(HISTORIES / "sdk-go/partial-replay-non-command-event.json"))
    assert stalled.state == "running" and "ScheduleToStart" in stalled.sentence
    assert "no worker has started one since" in stalled.sentence


@needs_histories
def test_temporal_completed_and_continued():
    found = diagnose(load_temporal(HISTORIES / "sdk-python/hello-workflow-history.json"))
    assert found.state == "completed" and "'test'" in found.sentence
    found = diagnose(load_temporal(HISTORIES / "sdk-go/continue-as-new.json"))
    assert found.state == "continued"
    assert found.facts["continued_as"] == "74f38af0-7c7d-4aae-bc10-6c34ba946693"


@needs_histories
def test_temporal_workflow_task_that_keeps_failing_is_stuck_or_diverged():
    events = json.loads((HISTORIES / "sdk-go/gogoproto-payload-workflow.json").read_text())
    events = copy.deepcopy(events["events"][:4])      # started, task scheduled/started/failed
    found = diagnose(load_temporal({"events": events}))
    assert found.state == "workflow_error"
    assert found.sentence.startswith("Stuck because workflow code keeps raising")
    assert "unable to find workflow type" in found.sentence
    attrs = events[3]["workflowTaskFailedEventAttributes"]
    attrs["cause"] = "WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR"
    attrs["failure"]["message"] = "[TMPRL1100] nondeterministic workflow"
    found = diagnose(load_temporal({"events": events}))
    assert found.state == "diverged" and "[TMPRL1100]" in found.sentence


@needs_histories
def test_temporal_open_timer_is_waiting_with_its_deadline():
    doc = json.loads((HISTORIES / "ui/raw-events.ascending.completed.json").read_text())
    events = doc["history"]["events"][:7]             # ends right after TimerStarted (4 s)
    found = diagnose(load_temporal({"events": events}))
    assert found.state == "waiting_timer"
    assert "Temporal timer 7 (4 s)" in found.sentence
    assert found.until == pytest.approx(found.since + 4.0)


@needs_histories
def test_temporal_failed_activity_shows_only_the_attempt_temporal_recorded():
    events = json.loads((HISTORIES / "sdk-go/side-effect.json").read_text())["events"]
    cause = {"message": "card declined", "applicationFailureInfo": {"type": "CardDeclined"}}
    events[6]["activityTaskStartedEventAttributes"]["attempt"] = 3
    events[7] = {"eventId": "8", "eventTime": events[7]["eventTime"],
                 "eventType": "ActivityTaskFailed", "activityTaskFailedEventAttributes": {
                     "failure": cause, "scheduledEventId": "6", "startedEventId": "7",
                     "retryState": "RetryStateMaximumAttemptsReached"}}
    events[11] = {"eventId": "12", "eventTime": events[11]["eventTime"],
                  "eventType": "WorkflowExecutionFailed",
                  "workflowExecutionFailedEventAttributes": {"failure": {
                      "message": "activity error", "cause": cause, "activityFailureInfo": {
                          "scheduledEventId": "6",
                          "activityType": {"name": "helloworldActivity"}}}}}
    found = diagnose(load_temporal({"events": events}))
    assert found.state == "failed"
    assert ("activity 'helloworldActivity' (position 3) failed for good on attempt 3 "
            "[3: transient; Temporal's history holds no earlier attempts]: CardDeclined: "
            "card declined.") in found.sentence
    assert list(found.attempts.attempt) == [3]


# --- what a typo leaves silent: a rule that matched nothing, a signal nothing read ---------
# The Run carries its plan (`faults`) and inbox (`signals`) from its RunSnapshot; these
# tests give them to a real run's view, as `Engine.snapshot` does, and as a Run built by
# hand may.

def _fetch(vendor_id):
    return {"vendor": vendor_id}


def _approved(ctx, vendor_id):
    ctx.activity("fetch_documents", _fetch, vendor_id, policy=FLAKY)
    decision = ctx.wait_signal("approval", timeout=DAY)
    return {"approved": bool(decision and decision.get("approved"))}


def _with(run, faults=None, signals=()):
    from dataclasses import replace
    from durablelab.run import SIGNAL_COLUMNS
    return replace(run, faults=faults,
                   signals=pd.DataFrame(list(signals), columns=SIGNAL_COLUMNS))


def test_a_rule_whose_name_matches_nothing_in_the_run_is_named(engine):
    plan = dl.FaultPlan([dl.faults.ServerError("fetch_documnets", attempts=[1]),
                         dl.faults.RateLimit("fetch_*", attempts=[2]),
                         dl.faults.Crash("approval", point="during_wait")])
    run_id = engine.start(_approved, "v-1", faults=plan)
    engine.run_until_blocked()
    engine.signal(run_id, "approval", {"approved": True})
    engine.run_until_idle()
    found = diagnose(_with(engine.run(run_id), faults=plan))
    assert found.state == "completed"
    assert found.facts["unmatched_rules"] == [0]
    assert ("Fault plan: rule 0 ServerError('fetch_documnets') matched no activity or wait "
            "of this run, so it never applied (its activities: 'fetch_documents'); check the "
            "name.") in found.sentence
    assert found.sentence.startswith("Completed")


def test_a_plan_whose_rules_all_match_adds_nothing(engine):
    plan = dl.FaultPlan([dl.faults.ServerError("fetch_*", attempts=[1])])
    run_id = engine.start(_approved, "v-1", faults=plan)
    engine.run_until_blocked()
    engine.signal(run_id, "approval", {"approved": True})
    engine.run_until_idle()
    run = engine.run(run_id)
    assert str(diagnose(_with(run, faults=plan))) == str(diagnose(run))
    assert "unmatched_rules" not in diagnose(_with(run, faults=plan)).facts


def test_a_signal_sent_under_a_name_no_wait_asks_for_is_named(engine):
    run_id = engine.start(_approved, "v-1")
    engine.run_until_blocked()
    assert engine.signal(run_id, "aproval", {"approved": True}) is True    # a typo, accepted
    engine.run_until_idle()                                              # the wait times out
    run = _with(engine.run(run_id), signals=[(1, "aproval", None, 0.0)])
    found = diagnose(run)
    assert run.result == {"approved": False}
    assert found.facts["unconsumed_signals"] == ["aproval"]
    assert ("Signals never read: a signal 'aproval' arrived at the run's start, and no "
            "ctx.wait_signal asked for that name (the code waits for 'approval'); check the "
            "name given to engine.signal().") in found.sentence


def test_a_waiting_run_names_a_stray_signal_but_not_one_buffered_for_its_wait(engine):
    run_id = engine.start(_approved, "v-1")
    engine.run_until_blocked()
    run = engine.run(run_id)
    early = diagnose(_with(run, signals=[(1, "approval", "a", 5.0)]))
    assert "unconsumed_signals" not in early.facts      # a wait of that name may read it
    stray = diagnose(_with(run, signals=[(1, "approval", "a", 5.0), (2, "aprove", None, 6.0)]))
    assert stray.state == "waiting_signal" and stray.facts["unconsumed_signals"] == ["aprove"]
    assert "no ctx.wait_signal has asked for that name so far" in stray.sentence


def test_a_consumed_signal_is_not_named(engine):
    run_id = engine.start(_approved, "v-1")
    engine.run_until_blocked()
    engine.signal(run_id, "approval", {"approved": True}, signal_id="click-1")
    engine.run_until_idle()
    run = _with(engine.run(run_id), signals=[(1, "approval", "click-1", 0.0)])
    assert "unconsumed_signals" not in diagnose(run).facts
    late = _with(engine.run(run_id), signals=[(1, "approval", "click-1", 0.0),
                                              (2, "approval", "click-2", 9.0)])
    assert "a signal 'approval' arrived and no later wait read it" in diagnose(late).sentence


def test_a_snapshot_carries_the_plan_and_the_signals_into_the_run(engine):
    from dataclasses import replace
    from durablelab.run import Run
    from durablelab.snapshot import SignalRow
    plan = dl.FaultPlan([dl.faults.ServerError("fetch_documents", attempts=[1])])
    run_id = engine.start(_approved, "v-1", faults=plan)
    engine.run_until_blocked()
    snapshot = replace(engine.snapshot(run_id), faults_json=plan.to_json(),
                       signals=(SignalRow(1, "approval", "click-1", 3.0),))
    run = Run.from_snapshot(snapshot)
    assert run.faults == plan
    assert run.signals.to_dict("records") == [
        {"seq": 1, "name": "approval", "signal_id": "click-1", "arrived_at": 3.0}]
    bare = Run.from_snapshot(replace(snapshot, faults_json=None, signals=()))
    assert bare.faults is None and bare.signals.empty


@pytest.mark.parametrize("position", [[], [1, "a"], "1", True, 2.5, None])
def test_an_exported_error_with_fields_of_the_wrong_type_still_reads(engine, tmp_path, position):
    """A stranger's export may hold anything in an error's fields: a number that is not one
    reads as missing (diagnose raised pandas' 'Lengths must match to compare')."""
    def pay(ctx, order):
        return ctx.activity("charge", gateway_timeout, order, policy=FLAKY)
    run_id = engine.start(pay, "o-1")
    engine.run_until_idle()
    path = tmp_path / "runs.jsonl"
    dl.export([engine.run(run_id)], path)
    lines = path.read_text().splitlines()
    record = json.loads(lines[1])
    record["data"]["error"]["fields"].update(position=position, attempts="two", line=[])
    lines[1] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    (run,) = dl.load(path)
    assert run.error.position is None and run.error.attempts is None
    assert run.error.activity == "charge"
    found = diagnose(run)
    assert found.state == "failed" and "charge" in found.sentence
