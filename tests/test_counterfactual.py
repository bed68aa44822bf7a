"""dl.counterfactual: the same workflow and input against exactly the failures a run's
attempts record, under other policies; also for a run loaded from an export."""

import functools

import pytest

import durablelab as dl
from durablelab.lab.counterfactual import failures_plan
from durablelab.examples import onboarding as ob
from durablelab.faults import Crash, Fail, Hang, Malformed, RateLimit, ServerError
from durablelab.sim import Payments

FRAME = ["position", "activity", "attempt", "started_at", "ended_at", "outcome",
         "error_class", "error", "delay"]
POLICY = dl.RetryPolicy(max_attempts=3, initial=2.0)     # full jitter: seeded draws
WORLD = {}


def fresh_payments(clock=None, failure_rate=0.0):
    WORLD["payments"] = Payments(failure_rate=failure_rate, seed=4)
    return WORLD["payments"]


def charge(customer, idempotency_key=None):
    return WORLD["payments"].charge(customer, 25.0, idempotency_key=idempotency_key)


def summarize(text, feedback=None):
    return {"summary": text[:10]}


def lookup(customer):
    return {"customer": customer}


def checkout(ctx, order):
    profile = ctx.activity("lookup", lookup, order["customer"], policy=POLICY,
                           start_to_close=30)
    receipt = ctx.activity("charge", charge, profile["customer"], policy=POLICY)
    note = ctx.activity("summarize", summarize, receipt["id"], policy=POLICY)
    ctx.sleep(60)
    return {"receipt": receipt["id"], "note": note}


LAST_NIGHT = dl.FaultPlan([
    Hang("lookup", attempts=1),                              # a time-out at 30 s
    ServerError("charge", attempts=[1, 2], status=503),
    RateLimit("summarize", attempts=1, retry_after=7),
    Malformed("summarize", attempts=2, kind="schema"),
    Crash("charge", point="after_effect", attempts=3, times=1),
    Crash("sleep", point="during_wait", times=1),
])


def record(plan=LAST_NIGHT, failure_rate=0.0, seed=5):
    fresh_payments(failure_rate=failure_rate)
    with dl.Engine() as engine:
        run_id = engine.start(checkout, {"customer": "c-9"}, run_id="last-night",
                              faults=plan, seed=seed)
        engine.run_until_idle()
        return engine.run(run_id)


def frame(run):
    return run.attempts[FRAME].reset_index(drop=True)


def test_plan_pins_each_recorded_failure_to_its_attempt():
    run = record()
    plan = failures_plan(run)
    kinds = [(type(r).__name__, r.activity, r.position, r.attempts) for r in plan.rules]
    assert kinds == [("Hang", "lookup", (1,), (1,)),
                     ("Fail", "charge", (2,), (1,)),
                     ("Fail", "charge", (2,), (2,)),
                     ("Crash", "charge", (2,), (3,)),
                     ("Fail", "summarize", (3,), (1,)),
                     ("Fail", "summarize", (3,), (2,)),
                     ("Crash", "sleep", (4,), None)]
    fails = [r for r in plan.rules if isinstance(r, Fail)]
    assert [f.error for f in fails] == ["Transient", "Transient", "RateLimited",
                                        "ModelOutputError"]
    assert fails[2].retry_after == 7.0
    assert fails[0].message == "injected HTTP 503 server error"


def test_counterfactual_under_the_same_policies_meets_the_recorded_faults_exactly():
    run = record()
    assert run.status == "completed" and len(run.crashes) == 2
    again = dl.counterfactual(run, checkout, world=fresh_payments)
    assert again.status == "completed" and again.result == run.result
    assert frame(again).equals(frame(run))           # same attempts, errors and delays
    assert list(again.crashes.point) == list(run.crashes.point)
    assert WORLD["payments"].duplicate_effects == 0
    assert not any("past the record" in note for note in again.notes)


def test_fewer_attempts_give_up_on_the_recorded_failure():
    run = record()
    again = dl.counterfactual(run, checkout, policies={"charge": dl.RetryPolicy(max_attempts=2)},
                              world=fresh_payments)
    assert again.status == "failed"
    assert again.error.activity == "charge" and again.error.attempts == 2
    assert again.error.cause_message == "injected HTTP 503 server error"


def test_more_attempts_survive_and_say_which_attempts_ran_for_real():
    outage = dl.FaultPlan([ServerError("charge", status=503)])     # every attempt, all night
    run = record(outage)
    assert run.status == "failed" and run.error.attempts == 3
    again = dl.counterfactual(run, checkout, policies=dl.RetryPolicy(max_attempts=5),
                              world=fresh_payments)
    assert again.status == "completed"
    charges = again.attempts[again.attempts.activity == "charge"]
    assert list(charges.outcome) == ["transient"] * 3 + ["ok"]
    assert "charge at position 2 (attempt 4)" in again.notes[-1]


def test_failures_a_real_service_gave_are_met_in_a_healthy_world():
    run = record(plan=None, failure_rate=0.5, seed=1)
    failed = run.attempts[run.attempts.outcome != "ok"]
    assert len(failed) and failed.error.str.startswith("ServiceUnavailable").all()
    again = dl.counterfactual(run, checkout, world=fresh_payments)   # no failure rate now
    assert frame(again).equals(frame(run))


def test_counterfactual_of_a_run_loaded_from_an_export(tmp_path):
    run = record()
    path = tmp_path / "last-night.jsonl"
    dl.export(run, path)
    (loaded,) = dl.load(path)
    policy = dl.RetryPolicy(max_attempts=6, jitter="none")
    from_store = dl.counterfactual(run, checkout, policies=policy, world=fresh_payments)
    from_file = dl.counterfactual(loaded, checkout, policies=policy, world=fresh_payments)
    assert frame(from_file).equals(frame(from_store))
    assert from_file.status == "completed"


def test_counterfactual_sends_the_signals_the_run_received():
    world = functools.partial(ob.fresh_world, honor_keys=True)
    world()
    with dl.Engine() as engine:
        run_id = engine.start(ob.onboard_vendor, {"vendor_id": "v-42"}, run_id="onb",
                              faults=[Fail("create_vendor", status=500, attempts=1)])
        engine.advance(3600)              # the approver clicks an hour into the wait
        engine.signal(run_id, "approval", {"approved": True}, signal_id="click-1")
        engine.run_until_idle()
        run = engine.run(run_id)
    assert run.status == "completed"
    again = dl.counterfactual(run, ob.onboard_vendor, world=world)
    assert again.status == "completed" and again.result == run.result
    assert ob.world.erp.duplicate_effects == 0 and len(ob.world.erp.effects) == 1


def test_counterfactual_refuses_another_workflow():
    run = record()
    with pytest.raises(ValueError, match=r"recorded workflow test_counterfactual:checkout"):
        dl.counterfactual(run, ob.onboard_vendor)
    with pytest.raises(TypeError, match="world is a factory"):
        dl.counterfactual(run, checkout, world=Payments())
