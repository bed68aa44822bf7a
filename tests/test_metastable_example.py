"""durablelab.examples.metastable, the world of lesson 18's metastable failure: its arrivals,
the collapse it shows without backoff, and the ways out it shows with them (on a short run,
so the suite stays quick; the lesson runs the full 80 s)."""

import math

import pytest

import durablelab as dl
from durablelab.errors import BadType, BadValue
from durablelab.examples import metastable


def test_arrivals_are_a_poisson_process_twice_as_dense_in_the_trigger():
    at = metastable.arrivals(0)
    assert at == sorted(at) and 0 < at[0] and at[-1] < metastable.UNTIL
    inside = sum(20 <= t < 25 for t in at)
    before = sum(t < 20 for t in at)
    assert before == pytest.approx(40 * 20, rel=0.1)
    assert inside == pytest.approx(80 * 5, rel=0.15)
    assert metastable.arrivals(0) == at and metastable.arrivals(1) != at
    calm = metastable.arrivals(0, trigger=None)
    assert len(calm) == pytest.approx(40 * 80, rel=0.05)


def test_without_a_trigger_only_the_throttle_holds_goodput_back():
    experiment = metastable.sweep(trigger=None, until=20.0)
    good = metastable.goodput(experiment, window=(10.0, 20.0)).droplevel("seed")
    for name in ("no backoff", "backoff + jitter", "retry quota"):
        assert good[name] == pytest.approx(40, rel=0.15)
    # A throttle counts a request when it is made and an accept when its answer is back,
    # 1-2 s later here: from a cold start it refuses most requests itself, and its window
    # remembers those refusals (lesson 18 explains it; gRPC counts at the answer instead).
    assert good["throttle"] < 20


def test_a_long_spike_collapses_retries_at_once_and_a_quota_recovers():
    policies = {name: metastable.POLICIES[name] for name in ("no backoff", "retry quota")}
    experiment = metastable.sweep(policies=policies, trigger=(5.0, 15.0), until=40.0)
    good = metastable.goodput(experiment, window=(30.0, 40.0)).droplevel("seed")
    assert good["no backoff"] == 0
    assert good["retry quota"] > 30
    series = experiment.series(every=5.0)
    late = series[(series.policy == "no backoff") & (series.start == 30.0)].iloc[0]
    assert late.seen > 2.5 * late.offered      # three tries of every request reach the server


def test_the_same_sweep_gives_the_same_series():
    a = metastable.sweep(trigger=(2.0, 4.0), until=8.0).series(every=1.0)
    b = metastable.sweep(trigger=(2.0, 4.0), until=8.0).series(every=1.0)
    assert a.equals(b)


@pytest.mark.parametrize("options, argument, error", [
    ({"rate": 0}, "rate", BadValue), ({"spike": -1.0}, "spike", BadValue),
    ({"until": math.inf}, "until", BadValue), ({"rate": "40"}, "rate", BadType),
    ({"trigger": (25.0, 20.0)}, "trigger", BadValue),
    ({"trigger": (-1.0, 5.0)}, "trigger", BadValue), ({"trigger": 20}, "trigger", BadValue),
])
def test_bad_arrivals_are_refused(options, argument, error):
    with pytest.raises(error) as info:
        metastable.arrivals(0, **options)
    assert info.value.argument == argument
    assert isinstance(info.value, dl.DurableLabError)
