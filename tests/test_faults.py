"""Fault plans: JSON in and out, clear errors for bad plans, and rules that fire exactly
where the plan says."""

import json

import pytest

import durablelab as dl
from durablelab.faults import ConnectionReset, Crash, FaultPlan, Latency, RateLimit, ServerError


def calls_and_attempts(engine, plan, seed=0, n_steps=1, attempts=4):
    calls = []
    def wf(ctx, _):
        for i in range(n_steps):
            ctx.activity(f"step_{i}", lambda i=i: calls.append(i) or i,
                         policy=dl.RetryPolicy(max_attempts=attempts, jitter="none"))
    run_id = engine.start(wf, None, faults=plan, seed=seed)
    engine.run_until_idle()
    return calls, engine.run(run_id)


def test_plan_round_trips_through_json():
    plan = FaultPlan([RateLimit("model_*", attempts=[1, 2], retry_after=30), ServerError("erp"),
                      ConnectionReset("*", p=0.25, times=2), Latency("bank", seconds=2),
                      Crash("charge", point="after_effect", times=1)])
    text = plan.to_json()
    assert json.loads(text)["version"] == 1
    again = FaultPlan.from_json(text)
    assert again == plan and again.to_json() == text


def test_plan_loads_from_a_file(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text('{"version": 1, "rules": [{"type": "Crash", "activity": "charge", '
                    '"point": "after_record"}]}')
    assert FaultPlan.from_json(path).rules == [Crash("charge", point="after_record")]
    assert FaultPlan.from_json(str(path)).rules == [Crash("charge", point="after_record")]


@pytest.mark.parametrize("rules, message", [
    ([{"type": "Crash", "activity": "x", "pointt": "after_effect"}],
     r"rule 0 \(Crash\): unknown field 'pointt'"),
    ([{"type": "Flood", "activity": "x"}], r"rule 0: unknown type 'Flood'"),
    ([{"type": "Crash", "activity": "x", "point": "midway"}], r"rule 0: .*point='midway'"),
    ([{"type": "RateLimit", "activity": "x"}, {"type": "ServerError", "activity": "y", "p": 2}],
     r"rule 1: .*p=2 must be a probability"),
    ([{"type": "ServerError"}], r"rule 0: .*activity"),
    ([{"type": "ServerError", "activity": "x", "attempts": [0]}], r"attempts count from 1"),
])
def test_bad_plan_file_names_file_rule_and_field(tmp_path, rules, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"version": 1, "rules": rules}))
    with pytest.raises(ValueError, match=message) as info:
        FaultPlan.from_json(path)
    assert str(path) in str(info.value)


def test_bad_plan_top_level(tmp_path):
    with pytest.raises(ValueError, match="unknown key 'rulez'"):
        FaultPlan.from_json('{"version": 1, "rulez": []}')
    with pytest.raises(ValueError, match="version 2 is not supported"):
        FaultPlan.from_json('{"version": 2, "rules": []}')
    with pytest.raises(ValueError, match="not valid JSON"):
        FaultPlan.from_json('{"version": 1, "rules": [')
    with pytest.raises(ValueError, match="cannot read"):
        FaultPlan.from_json(tmp_path / "missing.json")


def test_rule_fires_only_on_the_named_attempts_and_activity(engine):
    plan = FaultPlan([ServerError("step_1", attempts=[1, 2])])
    calls, run = calls_and_attempts(engine, plan, n_steps=3)
    assert calls == [0, 1, 2]
    outcomes = run.attempts[["activity", "attempt", "outcome"]].values.tolist()
    assert outcomes == [["step_0", 1, "ok"], ["step_1", 1, "transient"],
                        ["step_1", 2, "transient"], ["step_1", 3, "ok"], ["step_2", 1, "ok"]]


def test_times_limits_firings_per_run(engine):
    plan = FaultPlan([ConnectionReset("step_*", times=2)])
    calls, run = calls_and_attempts(engine, plan, n_steps=3)
    assert (run.attempts["outcome"] == "transient").sum() == 2
    fired = engine.store.fetch("SELECT type, position, attempt FROM faults")
    assert fired == [("ConnectionReset", 1, 1), ("ConnectionReset", 1, 2)]


def test_probability_draws_are_a_pure_function_of_the_seed():
    plan = FaultPlan([ServerError("step_*", p=0.3)])
    def outcomes(seed):
        with dl.Engine() as engine:
            return calls_and_attempts(engine, plan, seed=seed, n_steps=20, attempts=10)[1] \
                .attempts["outcome"].tolist()
    by_seed = [outcomes(seed) for seed in range(5)]
    assert outcomes(1) == by_seed[1]
    assert by_seed[1] != by_seed[2]
    failures = sum(o.count("transient") for o in by_seed)
    attempts = sum(len(o) for o in by_seed)
    assert 0.15 < failures / attempts < 0.45


def test_first_failure_rule_decides_and_latency_adds_time(engine):
    plan = FaultPlan([Latency("step_0", seconds=3, attempts=[1]), RateLimit("step_0", attempts=[1]),
                      ServerError("step_0", attempts=[1])])
    calls, run = calls_and_attempts(engine, plan)
    first = run.attempts.iloc[0]
    assert first["outcome"] == "rate_limited" and first["ended_at"] == 3.0
    assert engine.store.fetch("SELECT type FROM faults ORDER BY rule") == [("Latency",), ("RateLimit",)]


def test_crash_after_effect_repeats_the_call_with_the_same_key(engine):
    keys = []
    def charge(idempotency_key=None):
        keys.append(idempotency_key)
        return "charged"
    def wf(ctx, _):
        return ctx.activity("charge", charge)
    run_id = engine.start(wf, None, run_id="pay", faults=[Crash("charge", point="after_effect")])
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.result == "charged"
    assert keys == ["pay:1", "pay:1"]
    assert list(run.attempts["outcome"]) == ["ok", "crashed"] or \
        sorted(run.attempts["outcome"]) == ["crashed", "ok"]
    assert engine.store.fetch("SELECT point FROM crashes") == [("after_effect",)]
