"""The shipped fault plans load, and do what their names promise."""

import json
from pathlib import Path

import pytest

import durablelab as dl
from durablelab.sim import Payments

PLANS = Path(__file__).resolve().parent.parent / "datasets" / "faults"


@pytest.mark.parametrize("path", sorted(PLANS.glob("*.json")), ids=lambda p: p.name)
def test_shipped_plan_loads_and_round_trips(path):
    plan = dl.FaultPlan.from_json(path)
    assert len(plan) > 0
    assert dl.FaultPlan.from_json(plan.to_json()) == plan


@pytest.mark.parametrize("honor_keys, duplicates", [(True, 0), (False, 1)])
def test_crash_window_plan_duplicates_a_charge_only_without_keys(honor_keys, duplicates):
    payments = Payments(honor_keys=honor_keys)
    def charge(amount, idempotency_key=None):
        return payments.charge("c-1", amount, idempotency_key=idempotency_key)
    def checkout(ctx, amount):
        return ctx.activity("charge", charge, amount)["id"]
    with dl.Engine() as engine:
        run_id = engine.start(checkout, 42, faults=PLANS / "payment_crash_window.json")
        engine.run_until_idle()
        assert engine.run(run_id).status == "completed"
    assert len(payments.calls) == 2
    assert payments.duplicate_effects == duplicates


def peak_requests_per_second(jitter: str, runs: int = 500) -> int:
    """Peak number of requests in one virtual second over a 429 storm."""
    def call(n):
        return n
    policy = dl.RetryPolicy(max_attempts=6, initial=10, backoff=2, jitter=jitter)
    def wf(ctx, n):
        return ctx.activity("call", call, n, policy=policy)
    plan = dl.FaultPlan.from_json(PLANS / "rate_limit_storm.json")
    with dl.Engine(durability="exit") as engine:
        for n in range(runs):
            engine.start(wf, n, faults=plan, seed=n, run_id=f"storm-{n}")
        engine.run_until_idle()
        assert engine.runs().status.eq("completed").all()
        retries = engine.store.fetch(   # the first wave starts together either way
            "SELECT started_at FROM attempts WHERE attempt > 1 UNION ALL "
            "SELECT started_at FROM events WHERE kind = 'activity' AND attempt > 1")
    per_second = {}
    for (started_at,) in retries:
        per_second[int(started_at)] = per_second.get(int(started_at), 0) + 1
    return max(per_second.values())


def test_full_jitter_flattens_a_retry_storm():
    lockstep = peak_requests_per_second("none")
    jittered = peak_requests_per_second("full")
    assert lockstep >= 3 * jittered, (lockstep, jittered)


def _hop(n):
    return n


def _hops(ctx, n):
    return ctx.activity("hop", _hop, n, policy=dl.RetryPolicy(max_attempts=3, jitter="none"))


def test_a_plans_dict_form_is_accepted_as_faults():
    """A dict passed as faults= was told "not valid JSON": its JSON form as a dict is a plan."""
    plan = dl.FaultPlan([dl.faults.ServerError("hop", attempts=[1])])
    as_dict = json.loads(plan.to_json())
    assert dl.FaultPlan.from_json(as_dict) == plan
    with dl.Engine() as engine:
        run_id = engine.start(_hops, 1, faults=as_dict)
        engine.run_until_idle()
        assert engine.run(run_id).attempts.outcome.tolist() == ["transient", "ok"]
    experiment = dl.sweep(_hops, [1], fault_plans={"blip": as_dict}, seeds=range(1))
    assert experiment.frame.retries.tolist() == [1]


def test_a_dict_without_a_version_says_what_the_form_is():
    with pytest.raises(dl.DurableLabError, match=r"no 'version'.*plan.to_json\(\)"):
        dl.FaultPlan.from_json({"rules": [{"type": "ServerError", "activity": "hop"}]})


@pytest.mark.parametrize("faults, says", [
    (dl.faults.ServerError("hop"), r"is one rule: pass a list of rules, faults=\[ServerError"),
    (42, r"not a fault plan: pass a dl.FaultPlan, a list of rules, a plan's JSON text or "
         r"file, or its dict form"),
])
def test_faults_that_are_no_plan_say_what_to_pass(engine, faults, says):
    with pytest.raises(dl.DurableLabError, match=says) as caught:
        engine.start(_hops, 1, faults=faults)
    assert isinstance(caught.value, TypeError)
    assert engine.runs().empty                       # nothing was recorded
