"""Simulated services: ledgers, idempotency keys, and failures of their own."""

import pytest

import durablelab as dl
from durablelab.sim import Payments, ServiceUnavailable


def test_keys_make_a_repeated_request_one_effect():
    honoring, ignoring = Payments(honor_keys=True), Payments(honor_keys=False)
    for service in (honoring, ignoring):
        first = service.charge("c-1", 5, idempotency_key="run:1")
        again = service.charge("c-1", 5, idempotency_key="run:1")
        assert len(service.calls) == 2
    assert first != again and ignoring.duplicate_effects == 1
    assert len(honoring.effects) == 1 and honoring.duplicate_effects == 0


def test_failure_rate_is_seeded_and_fails_before_any_effect():
    def outcomes(seed):
        service = Payments(failure_rate=0.4, seed=seed)
        seen = []
        for n in range(50):
            try:
                service.charge("c", n)
                seen.append("ok")
            except ServiceUnavailable:
                seen.append("503")
        return seen, service
    first, service = outcomes(1)
    assert first == outcomes(1)[0] and first != outcomes(2)[0]
    assert 10 < first.count("503") < 30
    assert len(service.effects) == first.count("ok") and len(service.calls) == 50


def test_a_failing_service_is_retried_as_transient(engine):
    payments = Payments(failure_rate=0.5, seed=3)
    def charge(amount, idempotency_key=None):
        return payments.charge("c-1", amount, idempotency_key=idempotency_key)
    def wf(ctx, _):
        return ctx.activity("charge", charge, 10, policy=dl.RetryPolicy(max_attempts=10))
    run_id = engine.start(wf, None)
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "completed" and len(payments.effects) == 1
    assert set(run.attempts["outcome"][:-1]) <= {"transient"}
    assert len(run.attempts) == len(payments.calls)


def test_bad_failure_rate():
    with pytest.raises(ValueError, match="failure_rate=2"):
        Payments(failure_rate=2)
