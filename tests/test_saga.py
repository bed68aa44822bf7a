"""Sagas: compensations run newest first as recorded activities, under injected failures
and across a crash in the middle of compensating, and a compensation that keeps failing
waits for a person (a signal with a deadline) instead of looping."""

import pytest

import durablelab as dl
from durablelab.sim import ERP

erp = ERP(honor_keys=True)
calls = []


def act(name, fail=False):
    def fn(idempotency_key=None):
        calls.append(name)
        if fail:
            raise ValueError(f"{name} refused")              # NonRetryable: fails for good
        return erp.perform(name, {}, idempotency_key)
    fn.__name__ = name
    return fn


STEPS = ["reserve", "charge", "ship"]
UNDO = {"reserve": "release", "charge": "refund", "ship": "recall"}
FAST = dl.RetryPolicy(max_attempts=3, initial=1.0, jitter="none")


def order(ctx, _):
    with ctx.saga(escalate_after=3600) as saga:
        for step in STEPS:
            ctx.activity(step, act(step), policy=FAST)
            saga.add(UNDO[step], act(UNDO[step]), policy=FAST)
        ctx.activity("confirm", act("confirm", fail=True), policy=FAST)
    return "done"


@pytest.fixture(autouse=True)
def clean():
    erp.reset()
    calls.clear()


def undo_order(run):
    names = list(run.history["name"])
    return [n for n in names if n in UNDO.values()]


def test_compensations_run_newest_first_then_the_failure_propagates(engine):
    engine.start(order, None, run_id="o")
    engine.run_until_idle()
    run = engine.run("o")
    assert run.status == "failed" and run.error.activity == "confirm"
    assert undo_order(run) == ["recall", "refund", "release"]


def test_order_holds_under_injected_transient_failures(engine):
    plan = dl.FaultPlan([dl.faults.ServerError("refund", attempts=[1, 2]),
                         dl.faults.RateLimit("recall", attempts=[1], retry_after=30)])
    engine.start(order, None, run_id="o", faults=plan)
    engine.run_until_idle()
    run = engine.run("o")
    assert undo_order(run) == ["recall", "refund", "release"]
    assert list(run.attempts.query("activity == 'refund'")["outcome"]) == [
        "transient", "transient", "ok"]
    assert calls.count("refund") == 1          # the 503s never reached the function


@pytest.mark.parametrize("point", ["after_effect", "after_record", "before_activity"])
def test_crash_in_the_middle_of_compensating_undoes_each_step_once(db_path, point):
    plan = dl.FaultPlan([dl.faults.Crash("refund", point=point)])
    engine = dl.Engine(db_path)
    engine.start(order, None, run_id="o", faults=plan)
    engine.run_until_idle()
    run = engine.run("o")
    engine.close()
    assert run.status == "failed" and undo_order(run) == ["recall", "refund", "release"]
    assert len(run.crashes) == 1
    effects = [e["op"] for e in erp.effects]
    assert effects == ["reserve", "charge", "ship", "recall", "refund", "release"]
    assert erp.duplicate_effects == 0           # a refund repeated after the crash: one key


def stuck(ctx, _):
    with ctx.saga(escalate_after=3600) as saga:
        ctx.activity("reserve", act("reserve"), policy=FAST)
        saga.add("release", act("release"), policy=FAST)
        ctx.activity("charge", act("charge"), policy=FAST)
        saga.add("refund", act("refund"), policy=dl.RetryPolicy(max_attempts=2, jitter="none"))
        ctx.activity("confirm", act("confirm", fail=True), policy=FAST)
    return "done"


REFUND_DOWN = dl.FaultPlan([dl.faults.ServerError("refund", times=2)])   # the bank, down a while


def test_a_compensation_that_keeps_failing_waits_for_a_person_not_forever(engine):
    engine.start(stuck, None, run_id="o", faults=REFUND_DOWN)
    engine.run_until_idle()                     # the deadline passes: nobody answered
    run = engine.run("o")
    assert run.status == "failed" and isinstance(run.error, dl.CompensationFailed)
    err = run.error
    assert (err.activity, err.not_run, err.waited) == ("refund", ["release"], 3600.0)
    assert "compensate:refund" in str(err) and "release" in str(err)
    assert "confirm refused" in err.failure
    assert len(run.attempts.query("activity == 'refund'")) == 2   # no loop
    assert "release" not in calls


def test_a_person_retries_the_compensation_and_the_saga_goes_on(engine):
    engine.start(stuck, None, run_id="o", faults=REFUND_DOWN)
    engine.advance(60)
    assert engine.run("o").status == "waiting"
    engine.signal("o", "compensate:refund", {"retry": True})   # the bank is back
    engine.run_until_idle()
    run = engine.run("o")
    assert run.status == "failed" and run.error.activity == "confirm"
    assert undo_order(run) == ["refund", "refund", "release"]   # failed, then done
    assert [e["op"] for e in erp.effects][-2:] == ["refund", "release"]


def test_a_person_resolves_by_hand_and_the_next_compensation_runs(engine):
    engine.start(stuck, None, run_id="o", faults=REFUND_DOWN)
    engine.advance(60)
    engine.signal("o", "compensate:refund", {"resolved": True})
    engine.run_until_idle()
    run = engine.run("o")
    assert run.error.activity == "confirm" and calls.count("release") == 1


def test_escalate_after_is_checked():
    def bad(ctx, _):
        with ctx.saga(escalate_after=0):
            pass
    engine = dl.Engine()
    engine.start(bad, None, run_id="b")
    engine.run_until_idle()
    assert "escalate_after=0" in str(engine.run("b").error)
    engine.close()
