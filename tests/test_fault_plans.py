"""The shipped fault plans load, and do what their names promise."""

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
