"""Retry timing in virtual time, error classification, and budgets."""

import json
import socket

import pytest

import durablelab as dl
from durablelab.errors import ModelOutputError, NonRetryable, RateLimited, Transient


def failing(times, error_factory):
    """An activity that fails `times` times with error_factory(), then answers 'ok'."""
    calls = []
    def fn(**kwargs):
        calls.append(kwargs)
        if len(calls) <= times:
            raise error_factory()
        return "ok"
    fn.calls = calls
    return fn


def run_one(engine, fn, policy, seed=0, run_id=None, **activity_kwargs):
    def wf(ctx, _):
        return ctx.activity("call", fn, policy=policy, **activity_kwargs)
    run_id = engine.start(wf, None, seed=seed, run_id=run_id)
    engine.run_until_idle()
    return engine.run(run_id)


def test_exact_schedule_without_jitter(engine):
    fn = failing(5, lambda: TimeoutError("slow"))
    policy = dl.RetryPolicy(max_attempts=6, initial=1.0, backoff=2.0, max_interval=10,
                            jitter="none")
    run = run_one(engine, fn, policy)
    assert run.status == "completed" and run.result == "ok"
    attempts = run.attempts
    assert list(attempts["attempt"]) == [1, 2, 3, 4, 5, 6]
    assert list(attempts["delay"][:5]) == [1.0, 2.0, 4.0, 8.0, 10.0]
    assert list(attempts["started_at"]) == [0.0, 1.0, 3.0, 7.0, 15.0, 25.0]
    assert list(attempts["outcome"]) == ["timeout"] * 5 + ["ok"]
    assert engine.clock.now() == 25.0


def test_policy_caps_match_the_docstring():
    policy = dl.RetryPolicy()
    assert [policy.cap(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]


@pytest.mark.parametrize("seed", range(40))
def test_full_jitter_stays_within_the_cap(engine, seed):
    fn = failing(4, lambda: ConnectionError("reset"))
    policy = dl.RetryPolicy(max_attempts=5, initial=2.0, backoff=3.0, max_interval=30)
    run = run_one(engine, fn, policy, seed=seed)
    delays = list(run.attempts["delay"][:4])
    for attempt, delay in enumerate(delays, start=1):
        assert 0.0 <= delay <= policy.cap(attempt)


def test_full_jitter_spreads_delays_and_is_seeded():
    def first_delays():
        with dl.Engine() as engine:
            runs = [run_one(engine, failing(1, lambda: ConnectionError("reset")),
                            dl.RetryPolicy(initial=10.0), seed=seed, run_id=f"r{seed}")
                    for seed in range(60)]
            return [run.attempts["delay"][0] for run in runs]
    first = first_delays()
    assert first == first_delays()                  # same seed and run id, same delay
    assert len(set(first)) == 60                                # spread, not lockstep
    assert 3.0 < sum(first) / len(first) < 7.0                  # mean of U(0, 10) is 5


def test_retry_after_is_honoured():
    class TooMany(Exception):
        status_code = 429
        headers = {"Retry-After": "30"}
    with dl.Engine() as engine:
        fn = failing(1, TooMany)
        run = run_one(engine, fn, dl.RetryPolicy(initial=1.0, jitter="none"))
    first = run.attempts.iloc[0]
    assert first["outcome"] == "rate_limited" and first["error_class"] == "RateLimited"
    assert first["delay"] == 30.0
    assert run.attempts.iloc[1]["started_at"] == 30.0


def test_retry_after_from_an_injected_rate_limit():
    plan = dl.FaultPlan([dl.faults.RateLimit("call", attempts=[1, 2], retry_after=45)])
    with dl.Engine() as engine:
        def wf(ctx, _):
            return ctx.activity("call", lambda: "ok", policy=dl.RetryPolicy(jitter="none"))
        run_id = engine.start(wf, None, faults=plan)
        engine.run_until_idle()
        run = engine.run(run_id)
    assert run.result == "ok"
    assert list(run.attempts["started_at"]) == [0.0, 45.0, 90.0]


def test_non_retryable_fails_after_one_attempt(engine):
    fn = failing(10, lambda: ValueError("bad vendor id"))
    run = run_one(engine, fn, dl.RetryPolicy(max_attempts=6))
    assert run.status == "failed"
    assert len(fn.calls) == 1 and len(run.attempts) == 1
    err = run.error
    assert isinstance(err, dl.ActivityFailed)
    assert err.error_class == "NonRetryable" and err.cause_class == "ValueError"
    assert err.attempts == 1 and err.activity == "call" and err.position == 1
    assert "not retryable" in str(err)


def test_retries_spent_fail_for_good_and_the_failure_replays(engine):
    fn = failing(10, lambda: TimeoutError("slow"))
    seen = []
    def wf(ctx, _):
        try:
            ctx.activity("call", fn, policy=dl.RetryPolicy(max_attempts=3, jitter="none"))
        except dl.ActivityFailed as exc:
            seen.append(exc.attempts)
            ctx.sleep(5)
            return "compensated"
    run_id = engine.start(wf, None)
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.result == "compensated"
    assert len(fn.calls) == 3
    assert seen == [3, 3]          # raised again on replay, from history, fn not called
    assert "retries are spent" in run.history.iloc[0]["value"]["message"]


def test_policy_non_retryable_overrides_classification(engine):
    class Declined(Exception):
        pass
    fn = failing(10, Declined)
    run = run_one(engine, fn, dl.RetryPolicy(non_retryable=(Declined,)))
    assert run.status == "failed" and len(fn.calls) == 1
    fn2 = failing(10, Declined)
    run = run_one(engine, fn2, dl.RetryPolicy(non_retryable=("Declined",)))
    assert run.status == "failed" and len(fn2.calls) == 1


def test_model_output_errors_have_their_own_budget_and_get_feedback(engine):
    feedback = []
    def extract(feedback=None):
        feedback_seen = feedback
        calls.append(feedback_seen)
        if len(calls) <= 2:
            json.loads("{not json")
        return {"name": "Fjord"}
    calls = feedback
    policy = dl.RetryPolicy(max_attempts=1, model_output_budget=2, jitter="none")
    run = run_one(engine, extract, policy)
    assert run.status == "completed" and run.result == {"name": "Fjord"}
    assert feedback[0] is None
    assert "JSONDecodeError" in feedback[1] and "JSONDecodeError" in feedback[2]
    assert list(run.attempts["outcome"]) == ["malformed", "malformed", "ok"]


def test_model_output_budget_spent_fails_as_model_output_error(engine):
    fn = failing(10, lambda: json.JSONDecodeError("Expecting value", "{", 1))
    run = run_one(engine, fn, dl.RetryPolicy(max_attempts=5, model_output_budget=2))
    assert run.status == "failed"
    assert run.error.error_class == "ModelOutputError"
    assert len(fn.calls) == 3                                   # 1 + a budget of 2


def test_start_to_close_times_out_a_slow_attempt(engine):
    plan = dl.FaultPlan([dl.faults.Latency("call", seconds=50, attempts=[1])])
    calls = []
    def wf(ctx, _):
        return ctx.activity("call", lambda: calls.append(1) or "ok", start_to_close=10,
                            policy=dl.RetryPolicy(jitter="none"))
    run_id = engine.start(wf, None, faults=plan)
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.result == "ok" and len(calls) == 2   # the slow attempt ran; its answer was lost
    first = run.attempts.iloc[0]
    assert first["outcome"] == "timeout" and first["ended_at"] == 10.0
    assert run.attempts.iloc[1]["started_at"] == 11.0


def test_schedule_to_close_stops_retrying(engine):
    fn = failing(10, lambda: TimeoutError("slow"))
    run = run_one(engine, fn, dl.RetryPolicy(max_attempts=10, jitter="none"),
                  schedule_to_close=10)
    assert run.status == "failed"
    assert list(run.attempts["started_at"]) == [0.0, 1.0, 3.0, 7.0]   # the next would be at 15


class Response:
    def __init__(self, status, headers=None):
        self.status_code, self.headers = status, headers or {}


class HTTPError(Exception):
    def __init__(self, status, headers=None):
        super().__init__(f"HTTP {status}")
        self.response = Response(status, headers)


@pytest.mark.parametrize("exc, expected", [
    (TimeoutError("t"), Transient),
    (socket.timeout("t"), Transient),
    (ConnectionResetError("r"), Transient),
    (HTTPError(503), Transient),
    (HTTPError(500), Transient),
    (HTTPError(429), RateLimited),
    (HTTPError(404), NonRetryable),
    (HTTPError(400), NonRetryable),
    (ValueError("v"), NonRetryable),
    (TypeError("t"), NonRetryable),
    (KeyError("k"), NonRetryable),
    (PermissionError("p"), NonRetryable),
    (json.JSONDecodeError("Expecting value", "", 0), ModelOutputError),
    (RuntimeError("anything else"), Transient),
])
def test_classify(exc, expected):
    result = dl.classify(exc)
    assert type(result) is expected
    assert result.cause_class == type(exc).__name__


def test_classify_reads_retry_after_and_pydantic():
    limited = dl.classify(HTTPError(429, {"Retry-After": "12"}))
    assert isinstance(limited, RateLimited) and limited.retry_after == 12.0
    pydantic = pytest.importorskip("pydantic")
    class Fields(pydantic.BaseModel):
        name: str
    with pytest.raises(pydantic.ValidationError) as info:
        Fields.model_validate({"name": 3})
    assert isinstance(dl.classify(info.value), ModelOutputError)


def test_classify_keeps_durablelab_errors():
    err = RateLimited("slow down", retry_after=3)
    assert dl.classify(err) is err


@pytest.mark.parametrize("kwargs, field", [
    ({"max_attempts": 0}, "max_attempts"),
    ({"initial": -1}, "initial"),
    ({"backoff": 0.5}, "backoff"),
    ({"jitter": "half"}, "jitter"),
    ({"model_output_budget": -1}, "model_output_budget"),
])
def test_bad_policy_is_rejected_by_name(kwargs, field):
    with pytest.raises(ValueError, match=field):
        dl.RetryPolicy(**kwargs)


def test_runs_sharing_a_seed_still_jitter_apart(engine):
    """Many runs started with the default seed must not retry in lockstep."""
    delays = {run_one(engine, failing(1, lambda: ConnectionError("reset")),
                      dl.RetryPolicy(initial=10.0), seed=0).attempts["delay"][0]
              for _ in range(20)}
    assert len(delays) == 20
