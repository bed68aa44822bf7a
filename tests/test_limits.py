"""Retry limits shared by runs: the AWS SDKs' retry quota and the SRE book's throttle."""

import pytest

import durablelab as dl
from durablelab.draws import Draws
from durablelab.faults import Hang
from durablelab.limits import ThrottleState


class Service:
    """Fails the first `failures` calls of each key (None: every call), and counts calls."""

    def __init__(self, failures=None):
        self.failures = failures
        self.calls = []

    def __call__(self, key):
        self.calls.append(key)
        if self.failures is None or self.calls.count(key) <= self.failures:
            raise ConnectionError("down")
        return "ok"


def start_runs(engine, service, policy, n, **start):
    def wf(ctx, key):
        return ctx.activity("call", service, key, policy=policy, start_to_close=5.0)
    return [engine.start(wf, f"k{i}", run_id=f"r{i}", **start) for i in range(n)]


def failed_for_good(engine, run_id):
    run = engine.run(run_id)
    assert run.status == "failed"
    return run.error


def test_an_empty_quota_fails_the_attempt_for_good(engine):
    service = Service()
    policy = dl.RetryPolicy(max_attempts=10, initial=1, backoff=1, jitter="none",
                            budget=dl.RetryQuota(capacity=10, retry_cost=5))
    [run_id] = start_runs(engine, service, policy, 1)
    engine.run_until_idle()
    # 10 tokens pay for two retries of 5; the third failure finds the bucket empty
    assert len(service.calls) == 3
    error = failed_for_good(engine, run_id)
    assert error.attempts == 3 and error.error_class == "Transient"
    assert "retry quota is empty (0 of 10 tokens left, a retry costs 5" in error.message
    assert "give dl.RetryQuota a larger capacity" in error.message


def test_the_quota_is_shared_by_the_runs_calling_the_activity(engine):
    service = Service()
    policy = dl.RetryPolicy(max_attempts=10, initial=1, backoff=1, jitter="none",
                            budget=dl.RetryQuota(capacity=5, retry_cost=5))
    runs = start_runs(engine, service, policy, 3)
    engine.run_until_idle()
    # r0 fails at t=0 and takes the only retry; r1 and r2 find the bucket empty; r0's
    # retry at t=1 fails and finds it empty too
    assert service.calls == ["k0", "k1", "k2", "k0"]
    assert [failed_for_good(engine, r).attempts for r in runs] == [2, 1, 1]


def test_a_retry_after_a_time_out_costs_the_timeout_cost(engine):
    service = Service(failures=0)
    policy = dl.RetryPolicy(max_attempts=10, initial=1, backoff=1, jitter="none",
                            budget=dl.RetryQuota(capacity=20, retry_cost=5, timeout_cost=10))
    [run_id] = start_runs(engine, service, policy, 1,
                          faults=dl.FaultPlan([Hang("call")]))
    engine.run_until_idle()
    # every attempt hangs until start_to_close=5: two retries of 10 tokens, then none
    assert list(engine.run(run_id).attempts["outcome"]) == ["timeout"] * 3
    assert "a retry after a time-out costs 10" in failed_for_good(engine, run_id).message


@pytest.mark.parametrize("refund, third_run", [(1, "failed"), (5, "completed")])
def test_a_first_try_success_refunds_success_refund(engine, refund, third_run):
    # r0 drains the bucket (its one retry fails too), r1 succeeds at once and refunds,
    # r2 fails once and needs 5 tokens for its retry
    outcomes = {"k0": [ConnectionError] * 2, "k1": [], "k2": [ConnectionError]}
    calls = []
    def service(key):
        calls.append(key)
        if outcomes[key]:
            raise outcomes[key].pop(0)("down")
        return "ok"
    policy = dl.RetryPolicy(max_attempts=2, initial=1, jitter="none",
                            budget=dl.RetryQuota(capacity=5, retry_cost=5, success_refund=refund))
    def wf(ctx, key):
        return ctx.activity("call", service, key, policy=policy)
    for i in range(3):      # one after another
        engine.start(wf, f"k{i}", run_id=f"r{i}")
        engine.run_until_idle()
    assert [engine.run(f"r{i}").status for i in range(3)] == ["failed", "completed", third_run]


def test_a_retry_that_succeeds_gives_its_tokens_back(engine):
    service = Service(failures=1)        # every key fails once, then answers
    policy = dl.RetryPolicy(max_attempts=3, initial=1, jitter="none",
                            budget=dl.RetryQuota(capacity=5, retry_cost=5))
    def wf(ctx, key):
        return ctx.activity("call", service, key, policy=policy)
    for i in range(4):      # each run pays 5 for its retry and gets the 5 back on success
        engine.start(wf, f"k{i}", run_id=f"r{i}")
        engine.run_until_idle()
    assert all(engine.run(f"r{i}").status == "completed" for i in range(4))
    assert engine._attempts.limits.quotas["call"].tokens == 5


def test_a_fresh_worker_starts_with_a_full_bucket(engine):
    service = Service()
    policy = dl.RetryPolicy(max_attempts=3, initial=1, jitter="none",
                            budget=dl.RetryQuota(capacity=5, retry_cost=5))
    def wf(ctx, key):
        return ctx.activity("call", service, key, policy=policy)
    engine.start(wf, "a", run_id="a")
    engine.run_until_idle()
    assert engine.run("a").error.attempts == 2
    engine.crash()          # the bucket was the worker's memory
    engine.start(wf, "b", run_id="b")
    engine.run_until_idle()
    assert engine.run("b").error.attempts == 2


def quota_workflow(ctx, key):
    return ctx.activity("call", down, key)


def down(key):
    raise ConnectionError("down")


def test_in_a_sweep_each_world_gets_its_own_bucket():
    policy = dl.RetryPolicy(max_attempts=4, initial=1, backoff=1, jitter="none",
                            budget=dl.RetryQuota(capacity=5, retry_cost=5))
    kwargs = dict(inputs=["a", "b", "c"], policies={"quota": policy}, seeds=[0],
                  fault_plans={"none": None})
    alone = dl.sweep(quota_workflow, **kwargs).frame
    shared = dl.sweep(quota_workflow, contention=True, **kwargs).frame
    assert list(alone["attempts"]) == [2, 2, 2]        # each run its own 5 tokens
    assert sorted(shared["attempts"]) == [1, 1, 2]     # one bucket for the cell


def test_the_throttle_formula_over_its_window():
    state = ThrottleState(dl.AdaptiveThrottle(k=2.0, window=10.0))
    for t in range(100):
        state.requests.append(t / 100)
    for t in range(10):
        state.accepted(t / 100)
    assert state.probability(1.0) == (100 - 2 * 10) / 101
    for t in range(50):
        state.accepted(0.5)
    assert state.probability(1.0) == 0.0               # 100 - 2 * 60 < 0: nobody refused
    # at 10.5 the window (0.5, 10.5] keeps the 49 requests after 0.5 and no accept
    assert state.probability(10.5) == 49 / 50
    assert state.probability(11.0) == 0.0              # the window passed: nothing counted
    assert len(state.requests) == 0 and len(state.accepts) == 0


def test_the_throttle_refuses_locally_with_the_books_probability(engine):
    service = Service()
    throttle = dl.AdaptiveThrottle(k=2.0, window=1000.0)
    policy = dl.RetryPolicy(max_attempts=1, throttle=throttle)
    n = 40
    runs = start_runs(engine, service, policy, n, seed=7)
    engine.run_until_idle()
    # A hard-down service accepts nothing: request i (from 0) is refused with probability
    # i / (i + 1), drawn from the run's own numbers.
    expected = [Draws(f"throttle:7:r{i}:1:1").random() < i / (i + 1) for i in range(n)]
    refused = [engine.run(r).attempts["outcome"][0] == "throttled" for r in runs]
    assert refused == expected
    assert 25 <= sum(refused) <= n - 1
    assert len(service.calls) == n - sum(refused)     # the service never saw a refusal
    throttled = runs[refused.index(True)]
    error = failed_for_good(engine, throttled)
    assert error.cause_class == "ThrottledLocally" and error.error_class == "Transient"
    # a refusal is what the client did, not the world: a counterfactual does not replay it
    assert len(dl.failures_plan(engine.run(throttled))) == 0


def test_a_healthy_service_is_never_throttled(engine):
    service = Service(failures=0)
    policy = dl.RetryPolicy(throttle=dl.AdaptiveThrottle())
    runs = start_runs(engine, service, policy, 50)
    engine.run_until_idle()
    assert all(engine.run(r).status == "completed" for r in runs)
    assert len(service.calls) == 50


def test_throttled_runs_replay_to_the_same_table_byte_for_byte():
    def table():
        service = Service()
        policy = dl.RetryPolicy(max_attempts=4, initial=1.0, throttle=dl.AdaptiveThrottle(),
                                budget=dl.RetryQuota(capacity=50))
        with dl.Engine() as engine:
            runs = start_runs(engine, service, policy, 30, seed=3)
            engine.run_until_idle()
            return [engine.run(r).attempts.to_json() for r in runs], len(service.calls)
    first = table()
    assert first == table()
    assert any('"throttled"' in attempts for attempts in first[0])


def test_limits_round_trip_through_a_policys_json():
    policy = dl.RetryPolicy(budget=dl.RetryQuota(capacity=100, timeout_cost=20),
                            throttle=dl.AdaptiveThrottle(k=1.5, window=60.0))
    assert dl.RetryPolicy.from_json(policy.to_json()) == policy
    with pytest.raises(dl.PolicyError, match="throttle="):
        dl.RetryPolicy.from_dict({"throttle": {"k": 2, "spread": 1}})
    with pytest.raises(dl.PolicyError, match="k=1"):
        dl.RetryPolicy.from_dict({"throttle": {"k": 1}})


@pytest.mark.parametrize("make, argument, kind", [
    (lambda: dl.AdaptiveThrottle(k=1.0), "k", ValueError),
    (lambda: dl.AdaptiveThrottle(k=0.5), "k", ValueError),
    (lambda: dl.AdaptiveThrottle(k=float("nan")), "k", ValueError),
    (lambda: dl.AdaptiveThrottle(k="2"), "k", TypeError),
    (lambda: dl.AdaptiveThrottle(window=-1.0), "window", ValueError),
    (lambda: dl.AdaptiveThrottle(window=0), "window", ValueError),
    (lambda: dl.AdaptiveThrottle(window=float("inf")), "window", ValueError),
    (lambda: dl.RetryQuota(capacity=-1), "capacity", ValueError),
    (lambda: dl.RetryQuota(retry_cost=float("inf")), "retry_cost", ValueError),
    (lambda: dl.RetryQuota(success_refund=True), "success_refund", TypeError),
    (lambda: dl.RetryPolicy(budget=500), "budget", ValueError),
    (lambda: dl.RetryPolicy(throttle=dl.RetryQuota()), "throttle", ValueError),
])
def test_bad_limits_are_refused_naming_the_argument(make, argument, kind):
    with pytest.raises(kind, match=f"{argument}=") as info:
        make()
    assert isinstance(info.value, dl.DurableLabError) and info.value.argument == argument


def test_a_policy_prints_its_limits_only_when_it_has_them():
    assert repr(dl.RetryPolicy()).endswith("model_output_budget=2, breaker=None)")
    shown = repr(dl.RetryPolicy(throttle=dl.AdaptiveThrottle(k=3.0)))
    assert shown.endswith("breaker=None, throttle=AdaptiveThrottle(k=3.0, window=120.0))")
