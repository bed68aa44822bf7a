"""ctx.retry: a retry scope wider than one activity, with a durable, deterministic backoff."""

import time

import pytest

import durablelab as dl
from durablelab.draws import Draws
from durablelab.errors import BadType

ONCE = dl.RetryPolicy(max_attempts=1)
EXACT = dl.RetryPolicy(max_attempts=3, initial=1.0, backoff=2.0, jitter="none")


class Flaky:
    """Fails the first `failures` calls with `error`, then answers; counts the calls."""

    def __init__(self, failures, error=ConnectionError):
        self.failures, self.error, self.calls = failures, error, 0

    def __call__(self):
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error(f"call {self.calls} failed")
        return self.calls


def scope(ctx, label):
    first = ctx.activity("first", lambda: label, policy=ONCE)
    return [first, ctx.activity("flaky", ctx.world, policy=ONCE)]


def workflow(ctx, policy_json):
    return ctx.retry(dl.RetryPolicy.from_json(policy_json), scope, "x")


def _run(world, policy=EXACT, seed=0, run_id="r"):
    engine = dl.Engine(world=world)
    engine.start(workflow, policy.to_json(), run_id=run_id, seed=seed)
    engine.run_until_idle()
    return engine.run(run_id)


def test_the_whole_scope_runs_again_after_the_policys_delays():
    world = Flaky(2)
    run = _run(world)
    assert run.status == "completed" and run.result == ["x", 3]
    assert world.calls == 3
    sleeps = run.history[run.history.kind == "sleep"]
    assert [v["seconds"] for v in sleeps.value] == [1.0, 2.0]      # cap(1), cap(2)
    assert run.ended_at == 3.0
    # each try reads "first" again: the scope is retried whole, at new positions
    assert list(run.history.name[run.history.kind == "activity"]) == ["first", "flaky"] * 3


def test_spent_tries_raise_the_last_failure():
    world = Flaky(5)
    run = _run(world)
    assert run.status == "failed" and world.calls == 3
    assert isinstance(run.error, dl.ActivityFailed) and run.error.cause_class == "ConnectionError"
    assert run.ended_at == 3.0


def test_a_non_retryable_failure_is_not_retried():
    world = Flaky(1, error=PermissionError)
    run = _run(world)
    assert run.status == "failed" and world.calls == 1


def test_non_retryable_names_on_the_policy_stop_it():
    world = Flaky(1)
    run = _run(world, dl.RetryPolicy(max_attempts=3, non_retryable=("ConnectionError",)))
    assert run.status == "failed" and world.calls == 1


@pytest.mark.parametrize("jitter", ["full", "equal", "decorrelated"])
def test_jittered_waits_are_the_policys_draws_keyed_by_the_sleeps_position(jitter):
    policy = dl.RetryPolicy(max_attempts=4, initial=1.0, backoff=2.0, jitter=jitter)
    run = _run(Flaky(3), policy, seed=11, run_id="j")
    sleeps = run.history[run.history.kind == "sleep"]
    previous, expected = None, []
    for n, position in enumerate(sleeps.position, start=1):
        previous = dl.next_delay(policy, n, None, Draws(f"ctx.retry:11:j:{position}"), previous)
        expected.append(previous)
    assert [v["seconds"] for v in sleeps.value] == expected
    if jitter == "decorrelated":   # U(initial, 3 * initial) first: initial is the start
        assert 1.0 <= expected[0] <= 3.0


def test_same_seed_same_history_other_seed_other_waits():
    policy = dl.RetryPolicy(max_attempts=4, jitter="full")
    a = _run(Flaky(3), policy, seed=1).history
    b = _run(Flaky(3), policy, seed=1).history
    c = _run(Flaky(3), policy, seed=2).history
    assert a.to_json() == b.to_json()
    assert list(a.value[a.kind == "sleep"]) != list(c.value[c.kind == "sleep"])


def test_a_crash_during_the_backoff_resumes_it_and_runs_nothing_twice(tmp_path):
    world = Flaky(1)
    path = tmp_path / "scope.duckdb"
    engine = dl.Engine(path, world=world)
    engine.start(workflow, EXACT.to_json(), run_id="c")
    engine.advance(0.5)                      # inside the 1 s backoff
    engine.crash()
    engine.run_until_idle()
    run = engine.run("c")
    assert run.status == "completed" and world.calls == 2 and run.ended_at == 1.0
    engine.close()


def peeks_at_the_clock(ctx, _):
    time.time()
    return 1


def guarded(ctx, _):
    return ctx.retry(EXACT, peeks_at_the_clock, None)


def test_the_scope_is_workflow_code_under_the_guard():
    engine = dl.Engine()
    engine.start(guarded, None, run_id="g")
    engine.run_until_idle()
    run = engine.run("g")
    assert run.status == "failed" and isinstance(run.error, dl.DeterminismGuardError)


def bad_policy(ctx, _):
    return ctx.retry(3, scope, "x")


def bad_fn(ctx, _):
    return ctx.retry(EXACT, "scope")


@pytest.mark.parametrize("flow, argument", [(bad_policy, "policy"), (bad_fn, "fn")])
def test_bad_arguments_name_the_call(flow, argument):
    engine = dl.Engine()
    engine.start(flow, None, run_id="b")
    engine.run_until_idle()
    error = engine.run("b").error
    assert isinstance(error, dl.WorkflowError)
    assert f"ctx.retry at" in str(error) and f"{argument}=" in str(error)
