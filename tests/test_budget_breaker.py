"""Budgets that stop a run, and a circuit breaker that stops hammering a failing service."""

import pytest

import durablelab as dl
from durablelab.faults import ServerError


def model_call(prompt):
    return {"text": f"answer to {prompt}", "usage": {"input_tokens": 100, "output_tokens": 50,
                                                       "cost": 0.01}}


def agent_loop(ctx, prompts):
    answers = []
    while True:                       # a loop that only a budget ends
        answers.append(ctx.activity("model", model_call, f"turn {len(answers)}")["text"])


@pytest.mark.parametrize("budget, limit, spent_at_stop", [
    (dl.Budget(model_calls=3), "model_calls", 4),
    (dl.Budget(tokens=500), "tokens", 600),
    (dl.Budget(cost=0.025), "cost", 0.03),
    (dl.Budget(turns=5), "turns", 6),
])
def test_budget_stops_a_runaway_loop_with_the_reason(engine, budget, limit, spent_at_stop):
    run_id = engine.start(agent_loop, None, budget=budget)
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "failed"
    err = run.error
    assert isinstance(err, dl.BudgetExceeded) and err.limit == limit
    assert err.spent == pytest.approx(spent_at_stop)
    assert f"budget of {limit}" in str(err)


def test_budget_counts_recorded_spend_after_a_reopen(db_path):
    def two_calls_then_wait(ctx, _):
        ctx.activity("model", model_call, "a")
        ctx.activity("model", model_call, "b")
        ctx.wait_signal("more")
        ctx.activity("model", model_call, "c")
        return "done"
    engine = dl.Engine(db_path)
    run_id = engine.start(two_calls_then_wait, None, budget=dl.Budget(model_calls=2))
    engine.run_until_idle()
    engine.close()
    engine = dl.Engine(db_path, workflows=[two_calls_then_wait])
    engine.signal(run_id, "more")
    engine.run_until_idle()
    err = engine.run(run_id).error
    assert isinstance(err, dl.BudgetExceeded) and err.spent == 3 and err.position == 5
    engine.close()


def test_bad_budget_and_timeout(engine):
    with pytest.raises(ValueError, match="tokens=-1"):
        dl.Budget(tokens=-1)
    with pytest.raises(TypeError, match="dl.Budget"):
        engine.start(agent_loop, None, budget={"tokens": 5})
    with pytest.raises(ValueError, match="timeout=0"):
        engine.start(agent_loop, None, timeout=0)


def test_breaker_opens_and_spares_the_service(engine):
    calls = []
    def flaky_service(n):
        calls.append(engine.clock.now())
        raise ConnectionError("down")
    breaker = dl.CircuitBreaker(failures=3, reset_after=60)
    policy = dl.RetryPolicy(max_attempts=10, initial=10, backoff=1, jitter="none",
                            breaker=breaker)
    def wf(ctx, n):
        return ctx.activity("service", flaky_service, n, policy=policy)
    run_ids = [engine.start(wf, n, run_id=f"r{n}") for n in range(5)]
    engine.run_until_idle()
    # 3 real failures open the breaker; later attempts fail fast without a call until
    # t=60, when one half-open attempt goes through and fails, reopening it.
    assert len(calls) == 4 and calls[-1] == 60.0
    outcomes = [o for r in run_ids for o in engine.run(r).attempts["outcome"]]
    assert outcomes.count("circuit_open") == len(outcomes) - 4
    assert all(engine.run(r).status == "failed" for r in run_ids)


def test_breaker_closes_after_a_success(engine):
    state = {"down_until": 30.0}
    calls = []
    def service():
        calls.append(engine.clock.now())
        if engine.clock.now() < state["down_until"]:
            raise ConnectionError("down")
        return "up"
    policy = dl.RetryPolicy(max_attempts=20, initial=5, backoff=1, jitter="none",
                            breaker=dl.CircuitBreaker(failures=2, reset_after=20))
    def wf(ctx, _):
        return ctx.activity("service", service, policy=policy)
    run_id = engine.start(wf, None)
    engine.run_until_idle()
    assert engine.run(run_id).result == "up"
    assert calls == [0.0, 5.0, 25.0, 45.0]   # open at 5; half-open tries at 25 (fails), 45


def test_breaker_config_is_checked():
    with pytest.raises(ValueError, match="failures=0"):
        dl.CircuitBreaker(failures=0)


def test_a_crash_resets_the_breaker_as_a_new_worker_would(engine):
    # The breaker's state is the worker's memory (breaker.py): a fresh worker starts closed.
    calls = []
    def service():
        calls.append(engine.clock.now())
        raise ConnectionError("down")
    policy = dl.RetryPolicy(max_attempts=4, initial=5, backoff=1, jitter="none",
                            breaker=dl.CircuitBreaker(failures=2, reset_after=60))
    def wf(ctx, _):
        return ctx.activity("service", service, policy=policy)
    engine.start(wf, None)
    engine.advance(7)
    assert calls == [0.0, 5.0]          # open at 5: the attempt at 10 would fail fast
    engine.crash()
    engine.advance(10)
    assert calls == [0.0, 5.0, 10.0, 15.0]   # closed again: both later attempts really call
