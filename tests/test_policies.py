"""Policy overrides (`start(policies=)`), the RetryPolicy JSON form, unlimited attempts,
and the simulated world a run reaches as `ctx.world`."""

import json

import pytest
from hypothesis import given, strategies as st

import durablelab as dl

CODE_POLICY = dl.RetryPolicy(max_attempts=2, initial=1.0, jitter="none")


_FAILS = {"fetch": 0, "model_call": 0}


def failing_by_name(name):
    def fn(tag):
        _CALLS.setdefault(name, 0)
        _CALLS[name] += 1
        if _CALLS[name] <= _FAILS[name]:
            raise ConnectionError("503 upstream")
        return "ok"
    return fn


_CALLS: dict = {}
fetch_fn, model_fn = failing_by_name("fetch"), failing_by_name("model_call")


def workflow(ctx, _):
    a = ctx.activity("fetch", fetch_fn, "f", policy=CODE_POLICY)   # explicit policy
    b = ctx.activity("model_call", model_fn, "m")                  # the default policy
    return [a, b]


def run_with(engine, fails, **start):
    _CALLS.clear()
    _FAILS.update(fails)
    run_id = engine.start(workflow, None, **start)
    engine.run_until_idle()
    return engine.run(run_id)


def test_without_policies_the_code_policy_holds(engine):
    run = run_with(engine, {"fetch": 5, "model_call": 0})
    assert run.status == "failed"
    assert _CALLS == {"fetch": 2}                 # CODE_POLICY: 2 attempts


def test_one_policy_replaces_explicit_and_default_policies(engine):
    policy = dl.RetryPolicy(max_attempts=6, initial=0.5, jitter="none")
    run = run_with(engine, {"fetch": 5, "model_call": 4}, policies=policy)
    assert run.status == "completed" and run.result == ["ok", "ok"]
    assert _CALLS == {"fetch": 6, "model_call": 5}
    assert set(run.attempts["max_attempts"].dropna()) == {6}
    # the delays are the override's (0.5, 1, 2, 4, 8), not the code's (1 s)
    fetch = run.attempts[run.attempts.activity == "fetch"]
    assert list(fetch["delay"][:5]) == [0.5, 1.0, 2.0, 4.0, 8.0]


def test_globs_first_match_decides_and_unmatched_keep_their_policy(engine):
    never = dl.RetryPolicy(max_attempts=1)
    many = dl.RetryPolicy(max_attempts=9, initial=0.1, jitter="none")
    run = run_with(engine, {"fetch": 1, "model_call": 3},
                   policies={"model*": many, "*_call": never})
    assert run.status == "completed"
    assert _CALLS == {"fetch": 2, "model_call": 4}   # fetch kept CODE_POLICY (2 attempts)
    run = run_with(engine, {"fetch": 0, "model_call": 1}, policies={"*_call": never,
                                                                    "model*": many})
    assert run.status == "failed" and _CALLS == {"fetch": 1, "model_call": 1}


def test_policies_are_stored_with_the_run_and_survive_a_new_engine(db_path):
    policy = dl.RetryPolicy(max_attempts=7, initial=60.0, jitter="none")
    with dl.Engine(db_path) as engine:
        _CALLS.clear()
        _FAILS.update({"fetch": 3, "model_call": 0})
        run_id = engine.start(workflow, None, policies={"fetch": policy})
        engine.advance(0)        # the first attempt failed; the run waits 60 s to retry
        assert _CALLS == {"fetch": 1}
        stored = engine.store.fetch("SELECT options FROM runs")[0][0]
    assert json.loads(stored)["policies"] == {"fetch": policy.to_dict()}
    with dl.Engine(db_path, workflows=[workflow]) as engine:   # a fresh worker, recovering
        engine.run_until_idle()
        run = engine.run(run_id)
    assert run.status == "completed" and _CALLS == {"fetch": 4, "model_call": 1}
    assert set(run.attempts["max_attempts"].dropna()) == {7}


def test_policies_hold_across_a_crash(engine):
    plan = dl.FaultPlan([dl.faults.Crash("fetch", point="before_activity", attempts=[2])])
    run = run_with(engine, {"fetch": 4, "model_call": 0}, faults=plan,
                   policies=dl.RetryPolicy(max_attempts=5, initial=1.0, jitter="none"))
    assert run.status == "completed"
    assert _CALLS["fetch"] == 5


def test_unlimited_attempts_end_only_at_the_run_timeout(engine):
    policy = dl.RetryPolicy(max_attempts=None, initial=1.0, max_interval=100, jitter="none")
    run = run_with(engine, {"fetch": 10**9, "model_call": 0}, policies=policy,
                   timeout=3600.0)
    assert run.status == "failed" and isinstance(run.error, dl.RunTimedOut)
    # attempts start at 0, 1, 3, 7, ..., 127 s (waits 1, 2, 4, ..., 64), then every 100 s
    # up to 3527 s: 8 + 34 attempts before the hour is up
    assert _CALLS["fetch"] == 8 + (3600 - 127) // 100 == 42
    assert run.attempts["max_attempts"].isna().all()


def test_start_rejects_bad_policies_naming_them(engine):
    with pytest.raises(dl.DurableLabError, match="not a dl.RetryPolicy") as info:
        engine.start(workflow, None, policies={"fetch": 3})
    assert isinstance(info.value, ValueError)
    with pytest.raises(ValueError, match="non-empty"):
        engine.start(workflow, None, policies={})
    with pytest.raises(ValueError, match="glob"):
        engine.start(workflow, None, policies={"": dl.RetryPolicy()})
    assert engine.runs().empty      # nothing was recorded


def test_max_attempts_none_is_allowed_but_zero_is_not():
    assert dl.RetryPolicy(max_attempts=None).allows(10**6)
    with pytest.raises(ValueError, match="max_attempts=0 must be an int >= 1, or None"):
        dl.RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="max_attempts=True"):
        dl.RetryPolicy(max_attempts=True)


# --- the JSON form --------------------------------------------------------------------------
policies = st.builds(
    dl.RetryPolicy,
    max_attempts=st.none() | st.integers(1, 50),
    initial=st.floats(0, 1e4, allow_nan=False),
    backoff=st.floats(1, 10, allow_nan=False),
    max_interval=st.floats(0, 1e5, allow_nan=False),
    jitter=st.sampled_from(["full", "none"]),
    non_retryable=st.lists(st.sampled_from(["KeyError", "PermissionError", "Refused"]),
                           max_size=3).map(tuple),
    model_output_budget=st.integers(0, 5),
    breaker=st.none() | st.builds(dl.CircuitBreaker, failures=st.integers(1, 9),
                                  reset_after=st.floats(0, 600, allow_nan=False)))


@given(policies)
def test_json_round_trip_gives_an_equal_policy(policy):
    assert dl.RetryPolicy.from_json(policy.to_json()) == policy
    assert dl.RetryPolicy.from_dict(json.loads(policy.to_json())) == policy


def test_json_form_names_classes_by_name():
    policy = dl.RetryPolicy(non_retryable=(KeyError, "Refused"))
    assert policy.to_dict()["non_retryable"] == ["KeyError", "Refused"]
    back = dl.RetryPolicy.from_json(policy.to_json())
    assert back.is_non_retryable(KeyError("x")) and not back.is_non_retryable(OSError())


def test_json_form_is_strict_about_unknown_keys():
    with pytest.raises(dl.DurableLabError, match="unknown key 'retries'.*max_attempts, initial"):
        dl.RetryPolicy.from_json('{"retries": 3}')
    with pytest.raises(ValueError, match="backoff=0.5 must be a number >= 1"):
        dl.RetryPolicy.from_dict({"backoff": 0.5})
    with pytest.raises(ValueError, match="not valid JSON"):
        dl.RetryPolicy.from_json("{")
    with pytest.raises(ValueError, match="breaker="):
        dl.RetryPolicy.from_dict({"breaker": {"failures": 2, "reset": 1}})
    assert dl.RetryPolicy.from_dict({}) == dl.RetryPolicy()


# --- ctx.world -------------------------------------------------------------------------------
class Counter:
    def __init__(self):
        self.calls = 0

    def hit(self):
        self.calls += 1
        return self.calls


def uses_world(ctx, _):
    first = ctx.activity("hit", ctx.world.hit)
    ctx.sleep(10)
    second = ctx.activity("hit", ctx.world.hit)
    return [first, second, ctx.world.calls]


def test_ctx_world_is_the_engines_world_and_a_crash_does_not_reset_it():
    world = Counter()
    plan = dl.FaultPlan([dl.faults.Crash("hit", point="after_effect", times=1)])
    with dl.Engine(world=world) as engine:
        run_id = engine.start(uses_world, None, faults=plan)
        engine.run_until_idle()
        run = engine.run(run_id)
    # The first hit's effect happened before the crash and ran again after it: the world
    # kept counting (3 calls), while history holds what each recorded attempt returned.
    assert run.status == "completed" and run.result == [2, 3, 3]
    assert world.calls == 3
    assert "world" not in json.dumps(run.history["value"].tolist())


def test_ctx_world_is_none_without_one(engine):
    def reads_world(ctx, _):
        return ctx.world is None
    run_id = engine.start(reads_world, None)
    engine.run_until_idle()
    assert engine.run(run_id).result is True
