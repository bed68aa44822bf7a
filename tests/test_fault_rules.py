"""`position=` and `Fail`: rules that pin one attempt of one call and inject a given error
class or HTTP status, so a recorded failure can be met again."""

import json

import pytest
from hypothesis import given, settings, strategies as st

import durablelab as dl
from durablelab.faults import Crash, Fail, FaultPlan, RateLimit, draw

NO_JITTER = dl.RetryPolicy(max_attempts=4, initial=1.0, jitter="none")


def three_steps(calls):
    """A workflow calling the same activity name at positions 1, 2 and 3."""
    def wf(ctx, _):
        return [ctx.activity("step", lambda i=i: calls.append(i) or i, policy=NO_JITTER)
                for i in range(3)]
    return wf


def attempts_of(run):
    return [(int(r.position), int(r.attempt), r.outcome,
             r.error_class if isinstance(r.error_class, str) else None)
            for r in run.attempts.itertuples()]


def test_position_pins_the_rule_to_one_call_of_a_repeated_activity(engine):
    calls = []
    plan = FaultPlan([Fail("step", status=500, position=2, attempts=[1, 2])])
    run_id = engine.start(three_steps(calls), None, faults=plan, seed=3)
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "completed" and run.result == [0, 1, 2]
    assert attempts_of(run) == [(1, 1, "ok", None),
                                (2, 1, "transient", "Transient"),
                                (2, 2, "transient", "Transient"),
                                (2, 3, "ok", None),
                                (3, 1, "ok", None)]
    assert calls == [0, 1, 2]          # a Fail does not run the function
    assert list(run.attempts.error[1:3]) == ["injected HTTP 500 Internal Server Error"] * 2


@pytest.mark.parametrize("status, error_class, retried", [
    (400, "NonRetryable", False), (401, "NonRetryable", False), (404, "NonRetryable", False),
    (429, "RateLimited", True), (500, "Transient", True), (503, "Transient", True)])
def test_fail_status_decides_the_class_as_classify_would(engine, status, error_class, retried):
    calls = []
    plan = FaultPlan([Fail("step", status=status, position=1, attempts=[1])])
    run_id = engine.start(three_steps(calls), None, faults=plan)
    engine.run_until_idle()
    run = engine.run(run_id)
    first = run.attempts.iloc[0]
    assert (first.error_class, first.attempt) == (error_class, 1)
    if retried:
        assert run.status == "completed" and calls == [0, 1, 2]
    else:
        assert run.status == "failed" and calls == []
        assert isinstance(run.error, dl.ActivityFailed)
        assert run.error.error_class == "NonRetryable" and run.error.attempts == 1


def test_fail_carries_the_recorded_class_and_message(engine):
    plan = FaultPlan([Fail("step", error="ModelOutputError", message="schema: 'iban' missing",
                           attempts=[1, 2, 3])])
    run_id = engine.start(three_steps([]), None, faults=plan)
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "failed"      # three model-output errors: 1 try + a budget of 2
    assert run.error.error_class == "ModelOutputError"
    assert run.error.cause_message == "schema: 'iban' missing"
    assert list(run.attempts.outcome) == ["malformed"] * 3


def test_fail_plan_round_trips_through_json_with_positions():
    plan = FaultPlan([Fail("erp", status=404, position=[3, 5], attempts=1),
                      Fail("model", error="ModelOutputError", message="bad JSON"),
                      RateLimit("llm", position=2, retry_after=5),
                      Crash("charge", point="after_effect", position=4, times=1)])
    data = json.loads(plan.to_json())
    assert data["rules"][0] == {"type": "Fail", "activity": "erp", "attempts": [1],
                                "position": [3, 5], "status": 404}
    again = FaultPlan.from_json(plan.to_json())
    assert again == plan and again.to_json() == plan.to_json()
    assert again.rules[0].position == (3, 5) and again.rules[0].error == "NonRetryable"


@pytest.mark.parametrize("rule, message", [
    ({"type": "Fail", "activity": "x", "statuss": 404}, r"rule 0 \(Fail\): unknown field 'statuss'"),
    ({"type": "Fail", "activity": "x", "status": 200}, r"status=200 must be an HTTP error status"),
    ({"type": "Fail", "activity": "x", "error": "Oops"}, r"error='Oops' is not one of"),
    ({"type": "Fail", "activity": "x", "error": "Transient", "status": 404},
     r"contradicts status=404 \(HTTP 404 is NonRetryable\)"),
    ({"type": "Crash", "activity": "x", "position": [0]}, r"positions count from 1"),
    ({"type": "RateLimit", "activity": "x", "position": "3"}, r"position='3' must be"),
])
def test_bad_fail_or_position_names_the_file_rule_and_field(tmp_path, rule, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"version": 1, "rules": [rule]}))
    with pytest.raises(ValueError, match=message) as info:
        FaultPlan.from_json(path)
    assert str(path) in str(info.value)


def test_bad_fail_in_python_is_a_value_error():
    with pytest.raises(ValueError, match=r"Fail\('erp'\): status=True"):
        Fail("erp", status=True)
    with pytest.raises(ValueError, match="position=-1"):
        Fail("erp", position=-1)


SHARED = {}


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), positions=st.sets(st.integers(1, 3), min_size=1),
       p=st.sampled_from([0.3, 0.5, 0.8]))
def test_fail_draws_are_a_pure_function_of_seed_rule_position_attempt(seed, positions, p):
    """Where a probabilistic, position-pinned rule fires is exactly what `faults.draw` says
    for (seed, rule index, position, attempt): nothing else (other rules, other positions,
    the order of the calls) changes it."""
    plan = FaultPlan([RateLimit("other", p=0.5), Fail("step", status=503, p=p,
                                                     position=sorted(positions))])
    engine = SHARED.setdefault("engine", dl.Engine())   # one store: opening one costs more
    run_id = engine.start(three_steps([]), None, faults=plan, seed=seed)
    engine.run_until_idle()
    run = engine.run(run_id)
    failed = {(int(r.position), int(r.attempt)) for r in run.attempts.itertuples()
              if r.outcome == "transient"}
    expected, position, gave_up = set(), 1, False
    while position <= 3 and not gave_up:
        for attempt in range(1, NO_JITTER.max_attempts + 1):
            if not (position in positions and draw(seed, 1, position, attempt).random() < p):
                break          # this attempt succeeded: on to the next position
            expected.add((position, attempt))
        else:
            gave_up = True     # every attempt failed: the run failed there
        position += 1
    assert failed == expected
    assert run.status == ("failed" if gave_up else "completed")
