"""bench/brooker.py, the plain simulation of Brooker's backoff experiment that a durablelab
reproduction is measured against, gives the figures his own simulator published."""

import importlib.util
import random
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parent.parent / "bench" / "brooker.py"
spec = importlib.util.spec_from_file_location("brooker_bench", PATH)
brooker = importlib.util.module_from_spec(spec)
spec.loader.exec_module(brooker)


class Fixed:
    def uniform(self, a, b):
        return a + (b - a) * 0.5


@pytest.mark.parametrize("strategy, waits", [
    ("none", [0, 0, 0]),
    ("exponential", [10, 20, 40]),          # min(2000, 5 * 2**n)
    ("full", [5, 10, 20]),                  # U(0, that): its middle
    ("equal", [7.5, 15, 30]),               # that / 2 + U(0, that / 2)
    ("decorrelated", [10, 17.5, 28.75]),    # U(5, 3 * previous), previous from 5
])
def test_each_strategy_waits_as_the_post_says(strategy, waits):
    got, previous = [], brooker.BASE
    for n in (1, 2, 3):
        previous = brooker.backoff(strategy, n, previous, Fixed())
        got.append(previous)
    assert got == waits


def test_the_cap_holds():
    assert brooker.backoff("exponential", 20, 0, Fixed()) == 2000
    assert brooker.backoff("decorrelated", 20, 5000, Fixed()) == 2000


def test_one_client_reads_writes_and_is_done():
    writes, makespan = brooker.trial(1, "none", seed=3)
    rng = random.Random(3)
    four_messages = sum(abs(rng.gauss(10, 2)) for _ in range(4))
    assert writes == 1 and makespan == four_messages


@pytest.mark.parametrize("clients, work_tolerance, time_tolerance", [(10, 0.04, 0.12),
                                                                      (50, 0.02, 0.08)])
def test_twenty_trials_land_near_the_published_means(clients, work_tolerance, time_tolerance):
    # The published spread between seeds of 100-trial means is 1.1 % on work and 2.2 % on
    # time at 50 clients, 5 % on time at 10; twenty trials spread about twice as far.
    for strategy in brooker.STRATEGIES:
        writes, makespan = brooker.experiment(clients, strategy, trials=20)
        published_writes, published_time = brooker.PUBLISHED[clients][strategy]
        assert writes == pytest.approx(published_writes, rel=work_tolerance), strategy
        assert makespan == pytest.approx(published_time, rel=time_tolerance), strategy


def test_the_posts_claims_at_100_clients():
    full = brooker.experiment(100, "full", trials=10)
    exponential = brooker.experiment(100, "exponential", trials=10)
    assert exponential[0] > 2 * full[0]        # more than twice the work
    assert exponential[1] > 10 * full[1]       # and several times as long
