"""Latency distributions and fault windows (`between=`): the world of the retry research."""

import math
import statistics

import pytest

import durablelab as dl
from durablelab.draws import Draws
from durablelab.faults import Crash, FaultPlan, Latency, ServerError, draw_key


class Fixed:
    def __init__(self, *us):
        self.us = list(us)

    def random(self):
        return self.us.pop(0)

    def uniform(self, a, b):
        return a + (b - a) * self.random()


def test_each_latency_distribution_from_known_draws():
    assert Latency("x", seconds=2.0).draw(Fixed()) == 2.0
    assert Latency("x", seconds=2.0, max_seconds=4.0).draw(Fixed(0.25)) == 2.5
    # Box-Muller: u1 = 0.5, u2 = 0 gives z = sqrt(2 ln 2) = 1.1774...
    normal = Latency("x", seconds=0.010, distribution="normal", sd=0.002)
    assert normal.draw(Fixed(0.5, 0.0)) == 0.010 + 0.002 * math.sqrt(2 * math.log(2))
    # a draw below zero is folded: u2 = 0.5 gives z = -1.1774..., 0.001 - 1.1774 -> 1.1764
    folded = Latency("x", seconds=0.001, distribution="normal", sd=1.0)
    assert folded.draw(Fixed(0.5, 0.5)) == pytest.approx(math.sqrt(2 * math.log(2)) - 0.001)
    # exponential: u = 1 - e**-1 is the mean exactly
    expo = Latency("x", seconds=3.0, distribution="exponential")
    assert expo.draw(Fixed(1 - math.exp(-1))) == pytest.approx(3.0)
    assert expo.draw(Fixed(0.0)) == 0.0


def test_normal_and_exponential_have_the_mean_and_spread_they_are_given():
    normal = Latency("x", seconds=10.0, distribution="normal", sd=2.0)
    draws = [normal.draw(Draws(f"n{i}", drawn=1)) for i in range(4000)]
    assert statistics.fmean(draws) == pytest.approx(10.0, abs=0.1)
    assert statistics.stdev(draws) == pytest.approx(2.0, abs=0.1)
    expo = Latency("x", seconds=0.1, distribution="exponential")
    draws = [expo.draw(Draws(f"e{i}", drawn=1)) for i in range(4000)]
    assert statistics.fmean(draws) == pytest.approx(0.1, rel=0.05)
    assert min(draws) >= 0.0


def test_an_attempt_lasts_the_latency_drawn_for_it(engine):
    rule = Latency("call", seconds=0.010, distribution="normal", sd=0.002)
    def wf(ctx, _):
        return ctx.activity("call", lambda: "ok")
    engine.start(wf, None, run_id="a", seed=5, faults=[rule])
    engine.run_until_idle()
    expected = rule.draw(Draws(draw_key(5, 0, 1, 1), drawn=1))
    assert engine.run("a").attempts["ended_at"][0] == expected
    assert 0.004 < expected < 0.016


def test_a_rule_fires_only_inside_its_window(engine):
    calls = []
    def service(t):
        calls.append(t)
        return "ok"
    def wf(ctx, _):
        seen = []
        for t in (0, 5, 10, 12, 19.5, 20, 30):
            ctx.sleep(t - ctx.now())
            try:
                ctx.activity("call", service, t, policy=dl.RetryPolicy(max_attempts=1))
                seen.append("ok")
            except dl.ActivityFailed:
                seen.append("failed")
        return seen
    engine.start(wf, None, run_id="w", faults=[ServerError("call", between=(10, 20))])
    engine.run_until_idle()
    run = engine.run("w")
    assert run.result == ["ok", "ok", "failed", "failed", "failed", "ok", "ok"]
    assert calls == [0, 5, 20, 30]


def test_a_crash_window_kills_the_worker_only_inside_it(engine):
    def wf(ctx, _):
        for _ in range(4):
            ctx.activity("step", lambda: "ok")
            ctx.sleep(10)
        return "done"
    engine.start(wf, None, run_id="c",
                 faults=[Crash("step", point="before_activity", between=(15, 25))])
    engine.run_until_idle()
    run = engine.run("c")
    assert run.status == "completed"
    crashes = engine.store.fetch("SELECT crashed_at FROM crashes")
    assert [row[0] for row in crashes] == [20.0]          # steps at 0, 10, 20, 30


def test_windows_and_distributions_round_trip_through_json():
    plan = FaultPlan([ServerError("call", between=(20, 25), p=0.5),
                      Latency("call", seconds=0.1, distribution="exponential"),
                      Latency("net", seconds=0.01, distribution="normal", sd=0.002)])
    again = FaultPlan.from_json(plan.to_json())
    assert again.rules == plan.rules and again.to_json() == plan.to_json()
    assert '"between":[20.0,25.0]' in plan.to_json()
    # a plan without the new keywords writes what it always wrote
    assert FaultPlan([Latency("x", seconds=2)]).to_json() == (
        '{"version":1,"rules":[{"type":"Latency","activity":"x","seconds":2}]}')


def test_the_activity_comes_first_then_the_rules_own_fields():
    assert Latency("fetch", 2.0).seconds == 2.0
    assert Crash("charge", "after_effect").point == "after_effect"
    with pytest.raises(TypeError):
        ServerError("call", [1])         # attempts= is a keyword: [1] is not a status


@pytest.mark.parametrize("make, argument, kind, words", [
    (lambda: ServerError("x", between=(25, 20)), "between", ValueError, "ends before it starts"),
    (lambda: ServerError("x", between=(5, 5)), "between", ValueError, "ends before it starts"),
    (lambda: ServerError("x", between=(0, math.inf)), "between", ValueError, "finite"),
    (lambda: ServerError("x", between=(1, 2, 3)), "between", TypeError, "(start, end)"),
    (lambda: ServerError("x", between=("a", 2)), "between", TypeError, "(start, end)"),
    (lambda: Latency("x", distribution="gamma"), "distribution", ValueError, "uniform, normal"),
    (lambda: Latency("x", distribution="normal"), "sd", ValueError, "needs sd="),
    (lambda: Latency("x", sd=0.1), "sd", ValueError, "goes with distribution='normal'"),
    (lambda: Latency("x", distribution="normal", sd=-1), "sd", ValueError, "sd=-1"),
    (lambda: Latency("x", seconds=1, max_seconds=2, distribution="exponential"),
     "max_seconds", ValueError, "the mean"),
])
def test_bad_windows_and_distributions_are_refused(make, argument, kind, words):
    with pytest.raises(kind, match=None) as info:
        make()
    assert words in str(info.value)
    assert isinstance(info.value, dl.DurableLabError) and info.value.argument == argument


def test_a_bad_window_in_a_plan_file_names_the_file_and_rule(tmp_path):
    path = tmp_path / "spike.json"
    path.write_text('{"version": 1, "rules": [{"type": "ServerError", "activity": "x", '
                    '"between": [30, 20]}]}')
    with pytest.raises(ValueError, match=r"spike.json, rule 0: .*ends before it starts"):
        FaultPlan.from_json(path)


def latencies(plan, runs=20, seed=0):
    def wf(ctx, _):
        return ctx.activity("call", lambda: "ok")
    with dl.Engine() as engine:
        for i in range(runs):
            engine.start(wf, None, run_id=f"client-{i}", seed=seed, faults=plan)
        engine.run_until_idle()
        return [engine.run(f"client-{i}").attempts["ended_at"][0]
                - engine.run(f"client-{i}").attempts["started_at"][0] for i in range(runs)]


def test_runs_sharing_a_seed_meet_the_same_faults_unless_the_plan_draws_per_run():
    rule = Latency("call", seconds=0.010, distribution="normal", sd=0.002)
    same = latencies(FaultPlan([rule]))
    assert len(set(same)) == 1                   # a fair comparison: every run, one draw
    apart = latencies(FaultPlan([rule], per_run=True))
    assert len(set(apart)) == 20
    assert apart == [rule.draw(Draws(draw_key(0, 0, 1, 1, f"client-{i}"), drawn=1))
                     for i in range(20)]


def test_a_per_run_plan_round_trips_and_older_plans_keep_their_bytes():
    plan = FaultPlan([ServerError("x", p=0.5)], per_run=True)
    assert plan.to_json() == ('{"version":1,"rules":[{"type":"ServerError","activity":"x",'
                              '"p":0.5}],"per_run":true}')
    assert FaultPlan.from_json(plan.to_json()).per_run is True
    assert "per_run" not in FaultPlan([ServerError("x", p=0.5)]).to_json()
    with pytest.raises(ValueError, match="'per_run' must be true or false"):
        FaultPlan.from_json('{"version": 1, "rules": [], "per_run": "yes"}')
    with pytest.raises(TypeError, match="per_run=1 must be True or False"):
        FaultPlan([], per_run=1)
