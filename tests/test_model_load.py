"""The research agent of lesson 15 does what the lesson says of it, and `model_load` counts
what a simulated model received: a fan-out without a limit storms the model's rate limit,
the same fan-out with limit=2 meets no 429, and two charges started at once open crash
windows that sequential charges do not."""

from __future__ import annotations

import functools

import pytest

import durablelab as dl
from durablelab.examples import research
from durablelab.sim import SimLLM, TokenBucket
from durablelab.viz.load import model_load, model_load_plot


def run_agent(limit, seed=0, **request):
    clock = dl.VirtualClock()
    world = research.world(clock)
    with dl.Engine(clock=clock, world=world) as engine:
        run_id = engine.start(research.research, research.request(limit=limit, **request),
                              run_id="agent", seed=seed, faults=research.LATENCY)
        engine.run_until_idle()
        return engine.run(run_id), world


def test_the_agent_reads_two_at_a_time_and_the_child_writes_the_report():
    run, world = run_agent(limit=2)
    assert run.status == "completed" and len(run.result["sources"]) == len(research.LIBRARY)
    assert run.ended_at == pytest.approx(8.5)   # 0.5 buying, 6 x 1 s reading, 2 drafting
    assert world.llm.usage["rate_limited"] == 0
    assert [e["op"] for e in world.payments.effects] == ["charge", "charge"]


@pytest.mark.parametrize("seed", range(3))
def test_a_fan_out_without_a_limit_storms_the_model_and_ends_later(seed):
    storm, storm_world = run_agent(limit=None, seed=seed)
    calm, calm_world = run_agent(limit=2, seed=seed)
    assert storm.status == calm.status == "completed"
    assert storm_world.llm.usage["rate_limited"] >= 10     # ten refused in the first second
    assert storm.ended_at > calm.ended_at
    load = model_load(storm_world.llm)
    first = load.iloc[0]
    assert (first.start, first.answered, first.refused) == (0.0, 2, 10)
    assert load.requests.sum() == len(storm_world.llm.calls)
    assert (model_load(calm_world.llm).refused == 0).all()


def test_a_crash_between_two_concurrent_charges_charges_again_unless_keys_are_honoured():
    def charged_once(run, world):
        assert run.status == "completed"
        assert world.payments.duplicate_effects == 0

    small = research.request(limit=2, documents=3)
    ignored = dl.explore_crashes(research.research, small, charged_once,
                                 world=functools.partial(research.world, honor_keys=False))
    assert {(int(r.position), r.point) for r in ignored.broken.itertuples()} == {
        (1, "after_effect"), (1, "after_record"), (2, "before_activity"), (2, "after_effect")}
    assert dl.explore_crashes(research.research, small, charged_once,
                              world=functools.partial(research.world, honor_keys=True)).ok


def test_model_load_bins_the_ledger_by_virtual_second_from_the_origin():
    calls = [{"at": at, "outcome": outcome} for at, outcome in
             [(10.0, "ok"), (10.5, "rate_limited"), (10.99, "ok"), (11.0, "malformed"),
              (13.2, "rate_limited")]]
    load = model_load(calls, origin=10.0)
    assert load.to_dict("records") == [
        {"start": 0.0, "answered": 2, "refused": 1, "requests": 3},
        {"start": 1.0, "answered": 1, "refused": 0, "requests": 1},
        {"start": 3.0, "answered": 0, "refused": 1, "requests": 1}]
    assert list(model_load(calls, every=2.0, origin=10.0).requests) == [4, 1]


def test_model_load_reads_a_simulated_model_s_own_ledger():
    clock = dl.VirtualClock()
    llm = SimLLM(clock=clock, rate_limit=TokenBucket(1.0, 1))
    llm.complete("a")
    with pytest.raises(dl.RateLimited):
        llm.complete("b")
    assert model_load(llm).to_dict("records") == [
        {"start": 0.0, "answered": 1, "refused": 1, "requests": 2}]


@pytest.mark.parametrize("every", [0, -1.0, float("nan"), float("inf"), True, "1"])
def test_model_load_refuses_a_bin_that_is_not_seconds_above_zero(every):
    with pytest.raises(dl.DurableLabError, match="every=.*seconds > 0") as info:
        model_load([], every=every)
    assert isinstance(info.value, ValueError)


def test_model_load_refuses_what_is_not_a_model_or_its_ledger():
    with pytest.raises(dl.DurableLabError, match="neither a dl.sim.SimLLM") as info:
        model_load({"at": 1.0})
    assert isinstance(info.value, TypeError)


def test_model_load_plot_refuses_no_models_and_end_times_of_unknown_labels():
    with pytest.raises(dl.DurableLabError, match="at least one label") as info:
        model_load_plot({})
    assert isinstance(info.value, TypeError)
    with pytest.raises(dl.DurableLabError, match=r"ended_at names \['limit=3'\]") as info:
        model_load_plot({"limit=2": []}, ended_at={"limit=3": 1.0})
    assert isinstance(info.value, ValueError)


def test_model_load_plot_draws_a_panel_per_model_with_labelled_axes_and_a_legend():
    run, world = run_agent(limit=None)
    fig = model_load_plot({"limit=None": world.llm, "limit=2": run_agent(limit=2)[1].llm},
                          ended_at={"limit=None": run.ended_at})
    axes = fig.axes
    assert len(axes) == 2
    assert axes[0].get_ylabel() == "requests to the model per second"
    assert all(ax.get_xlabel() == "virtual time (s)" for ax in axes)
    assert axes[0].get_title().startswith(f"limit=None: {len(world.llm.calls)} requests")
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["answered", "refused: 429, rate limited", "the run ended"]
