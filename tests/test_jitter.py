"""The jitter modes, with exact numbers: the four of Brooker's "Exponential Backoff And Jitter",
and LangGraph's additive one."""

import json

import pytest

import durablelab as dl
from durablelab.draws import Draws
from durablelab.errors import RateLimited, Transient


class Fixed:
    """A generator whose every draw is the given number: the docstring's worked examples."""

    def __init__(self, u):
        self.u = u

    def random(self):
        return self.u

    def uniform(self, a, b):
        return a + (b - a) * self.u


ERROR = Transient("down")


def delay(jitter, attempt, u, previous=None, **policy):
    return dl.next_delay(dl.RetryPolicy(jitter=jitter, **policy), attempt, ERROR, Fixed(u),
                         previous)


def test_each_formula_gives_the_docstring_numbers():
    # defaults: initial=1, backoff=2, max_interval=60; cap after attempt 3 is 4 s
    assert delay("none", 3, 0.25) == 4.0
    assert delay("full", 3, 0.25) == 1.0                  # U(0, 4)
    assert delay("equal", 3, 0.25) == 2.5                 # 4/2 + U(0, 4/2)
    assert delay("equal", 3, 0.0) == 2.0                  # never below half the cap
    # decorrelated: U(initial, 3 * previous), previous = initial after attempt 1
    first = delay("decorrelated", 1, 0.5)
    second = delay("decorrelated", 2, 0.5, previous=first)
    third = delay("decorrelated", 3, 0.5, previous=second)
    assert [first, second, third] == [2.0, 3.5, 5.75]     # U(1,3), U(1,6), U(1,10.5)
    assert delay("additive", 3, 0.25) == 4.25             # 4 + U(0, 1)
    assert delay("additive", 9, 0.5) == 60.5              # after the cap: LangGraph's order


def test_decorrelated_ignores_backoff_and_stops_at_max_interval():
    assert delay("decorrelated", 7, 0.5, previous=2.0, backoff=10.0) == 3.5
    assert delay("decorrelated", 3, 0.9, previous=40.0, max_interval=60) == 60.0
    assert delay("decorrelated", 1, 0.5, initial=0.005, max_interval=2.0) == pytest.approx(0.01)


def test_brookers_base_and_cap_give_his_numbers():
    # His exponential after the n-th failure is min(cap, base * 2**n) = 10, 20, 40 ms with
    # base 5 ms: initial=0.01 s here, since our cap counts from attempt 1.
    caps = [delay("none", n, 0.0, initial=0.01, max_interval=2.0) for n in (1, 2, 3, 9)]
    assert caps == [0.01, 0.02, 0.04, 2.0]


def test_a_rate_limit_still_waits_its_retry_after_in_every_mode():
    for jitter in dl.retry.JITTERS:
        got = dl.next_delay(dl.RetryPolicy(jitter=jitter), 1, RateLimited("429", retry_after=9),
                            Fixed(0.5))
        assert got == 9.0, jitter


def failing(times):
    calls = []
    def fn():
        calls.append(1)
        if len(calls) <= times:
            raise ConnectionError("reset")
        return "ok"
    return fn


def run_delays(jitter, seed=3, run_id="pin", **policy):
    policy.setdefault("max_attempts", 5)
    policy.setdefault("initial", 10.0)
    fn = failing(3)    # outside the workflow: its code runs again on every wake-up
    def wf(ctx, _):
        return ctx.activity("call", fn, policy=dl.RetryPolicy(jitter=jitter, **policy))
    with dl.Engine() as engine:
        engine.start(wf, None, seed=seed, run_id=run_id)
        engine.run_until_idle()
        run = engine.run(run_id)
        assert run.status == "completed"
        return list(run.attempts["delay"][:3]), list(run.attempts["started_at"])


def u(attempt, seed=3, run_id="pin"):
    """The number the engine draws for the retry after `attempt` (activity at position 1)."""
    return Draws(f"retry:{seed}:{run_id}:1:{attempt}").random()


def test_full_jitter_draws_exactly_what_it_drew_before_the_new_modes():
    # Pinned from the code before equal and decorrelated existed: notebooks depend on them.
    delays, _ = run_delays("full")
    assert delays == [4.4069367294678985, 1.6092978140285963, 38.78376467444894]


def test_equal_and_decorrelated_in_the_engine_follow_the_formulas_exactly():
    equal, _ = run_delays("equal")
    assert equal == [5 + 5 * u(1), 10 + 10 * u(2), 20 + 20 * u(3)]
    assert equal == [7.203468364733949, 10.804648907014299, 39.39188233722447]
    dec, started = run_delays("decorrelated")
    d1 = 10 + (30 - 10) * u(1)                 # U(10, 3 * 10)
    d2 = 10 + (3 * d1 - 10) * u(2)             # U(10, 3 * d1)
    d3 = min(60.0, 10 + (3 * d2 - 10) * u(3))
    assert dec == [d1, d2, d3]
    assert dec == [18.813873458935795, 13.736919907617102, 40.26176901004586]
    assert started == [0.0, d1, d1 + d2, d1 + d2 + d3]


def test_decorrelated_grows_from_the_wait_a_rate_limit_imposed():
    # The previous delay is the wait the run actually had: retry_after's 30 s, not the draw.
    calls = []
    def fn():
        calls.append(1)
        if len(calls) == 1:
            raise dl.RateLimited("429", retry_after=30.0)
        if len(calls) == 2:
            raise ConnectionError("reset")
        return "ok"
    def wf(ctx, _):
        return ctx.activity("call", fn, policy=dl.RetryPolicy(
            max_attempts=3, initial=1.0, max_interval=1000, jitter="decorrelated"))
    with dl.Engine() as engine:
        engine.start(wf, None, seed=3, run_id="pin")
        engine.run_until_idle()
        delays = list(engine.run("pin").attempts["delay"][:2])
    assert delays == [30.0, 1 + (90 - 1) * u(2)]


@pytest.mark.parametrize("seed", range(30))
def test_equal_jitter_waits_between_half_the_cap_and_the_cap(seed):
    delays, _ = run_delays("equal", seed=seed, run_id=f"r{seed}")
    for attempt, d in enumerate(delays, start=1):
        cap = min(60.0, 10.0 * 2 ** (attempt - 1))
        assert cap / 2 <= d <= cap


def test_the_new_modes_round_trip_through_json_and_old_policies_store_the_same_bytes():
    for jitter in dl.retry.JITTERS:
        policy = dl.RetryPolicy(jitter=jitter)
        assert dl.RetryPolicy.from_json(policy.to_json()) == policy
    stored = json.loads(dl.RetryPolicy().to_json())
    assert "budget" not in stored and "throttle" not in stored


def test_an_unknown_jitter_names_each_mode():
    with pytest.raises(ValueError,
                       match="'full', 'equal', 'decorrelated', 'none', 'additive'") as info:
        dl.RetryPolicy(jitter="half")
    assert isinstance(info.value, dl.DurableLabError) and info.value.argument == "jitter"
