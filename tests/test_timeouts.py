"""Time-outs: per attempt, in total, for the run, and heartbeats that notice a dead worker."""

import pytest

import durablelab as dl
from durablelab.faults import Crash, Hang, Latency, Malformed, Timeout

POLICY = dl.RetryPolicy(max_attempts=3, jitter="none")


def one_activity(engine, plan, calls, **activity_options):
    def call():
        calls.append(engine.clock.now())
        return "answer"
    def wf(ctx, _):
        return ctx.activity("call", call, policy=POLICY, **activity_options)
    run_id = engine.start(wf, None, faults=plan)
    engine.run_until_idle()
    return engine.run(run_id)


def test_timeout_runs_the_call_but_loses_its_answer(engine):
    calls = []
    run = one_activity(engine, [Timeout("call", attempts=[1])], calls, start_to_close=30)
    assert run.result == "answer"
    assert calls == [0.0, 31.0]                       # the lost attempt did run (its effect)
    first = run.attempts.iloc[0]
    assert (first["outcome"], first["ended_at"]) == ("timeout", 30.0)
    assert "start_to_close=30s" in first["error"]


def test_hang_does_not_run_the_call_and_ends_at_start_to_close(engine):
    calls = []
    run = one_activity(engine, [Hang("call", attempts=[1, 2])], calls, start_to_close=10)
    assert run.result == "answer" and calls == [21.0 + 2.0]   # 0→10, wait 1, 11→21, wait 2
    assert list(run.attempts["outcome"]) == ["timeout", "timeout", "ok"]


def test_hang_without_any_timeout_hangs_the_run(engine):
    calls = []
    run = one_activity(engine, [Hang("call")], calls)
    assert run.status == "running" and calls == []           # in flight, forever
    assert engine.clock.now() == 0.0
    assert list(run.attempts["outcome"]) == ["in_flight"]    # visible, not silently missing
    assert run.attempts["ended_at"].isna().all()


def test_run_timeout_rescues_a_hanging_run(engine):
    def wf(ctx, _):
        return ctx.activity("call", lambda: "never")
    run_id = engine.start(wf, None, faults=[Hang("call")], timeout=3600)
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "failed" and run.ended_at == 3600.0
    assert isinstance(run.error, dl.RunTimedOut)
    assert run.error.waiting == "waiting for an activity to answer"
    assert "start_to_close" in str(run.error)


def test_run_timeout_while_waiting_for_a_signal(engine):
    def wf(ctx, _):
        return ctx.wait_signal("approval")
    run_id = engine.start(wf, None, timeout=86400)
    engine.run_until_idle()
    err = engine.run(run_id).error
    assert isinstance(err, dl.RunTimedOut) and err.deadline == 86400.0
    assert "'approval'" in err.waiting


def test_run_timeout_survives_a_reopen(db_path):
    def wf(ctx, _):
        ctx.sleep(7200)
        return "slept"
    engine = dl.Engine(db_path)
    run_id = engine.start(wf, None, timeout=3600)
    engine.advance(10)
    engine.close()
    engine = dl.Engine(db_path, workflows=[wf])
    engine.run_until_idle()
    assert engine.run(run_id).status == "failed" and engine.run(run_id).ended_at == 3600.0
    engine.close()


def test_run_timeout_caps_an_attempt(engine):
    calls = []
    def wf(ctx, _):
        return ctx.activity("call", lambda: calls.append(1) or "ok")
    run_id = engine.start(wf, None, faults=[Latency("call", seconds=500)], timeout=100)
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "failed" and run.ended_at == 100.0


def test_heartbeat_notices_a_worker_lost_mid_attempt(engine):
    """A long attempt is in flight when another run's fault kills the worker. Without a
    heartbeat the fresh worker reruns it at once; with one, the loss is noticed when the
    next heartbeat is missed, and the retry starts then."""
    starts = {}
    def long_job(tag):
        starts.setdefault(tag, []).append(engine.clock.now())
        return tag
    def slow(ctx, tag):
        return ctx.activity("long_job", long_job, tag, heartbeat=20, policy=POLICY)
    def crasher(ctx, _):
        ctx.sleep(50)
        return ctx.activity("boom", lambda: "x")
    plan = [Latency("long_job", seconds=300, attempts=[1])]
    slow_id = engine.start(slow, "hb", faults=plan)
    engine.start(crasher, None, faults=[Crash("boom", point="before_activity")])
    engine.run_until_idle()
    assert starts["hb"] == [0.0, 70.0]             # died at 50; heartbeat missed at 70
    lost = engine.run(slow_id).attempts.iloc[0]
    assert (lost["outcome"], lost["started_at"], lost["ended_at"]) == ("timeout", 0.0, 70.0)
    assert "no heartbeat within 20s" in lost["error"]
    assert engine.run(slow_id).result == "hb"


def test_without_heartbeat_start_to_close_notices_the_loss(engine):
    starts = []
    def long_job():
        starts.append(engine.clock.now())
        return "done"
    def slow(ctx, _):
        return ctx.activity("long_job", long_job, start_to_close=600, policy=POLICY)
    def crasher(ctx, _):
        ctx.sleep(50)
        return ctx.activity("boom", lambda: "x")
    engine.start(slow, None, faults=[Latency("long_job", seconds=300, attempts=[1])])
    engine.start(crasher, None, faults=[Crash("boom", point="before_activity")])
    engine.run_until_idle()
    assert starts == [0.0, 600.0]


def test_malformed_output_runs_the_call_and_fails_as_model_output(engine):
    calls = []
    run = one_activity(engine, [Malformed("call", attempts=[1], kind="schema")], calls)
    assert run.result == "answer" and len(calls) == 2
    first = run.attempts.iloc[0]
    assert first["outcome"] == "malformed" and first["error_class"] == "ModelOutputError"
    assert "schema" in first["error"]


def test_malformed_kinds_are_checked():
    with pytest.raises(ValueError, match="kind='garbled'"):
        Malformed("x", kind="garbled")
    plan = dl.FaultPlan([Timeout("a"), Hang("b"), Malformed("c", kind="refusal")])
    assert dl.FaultPlan.from_json(plan.to_json()) == plan
