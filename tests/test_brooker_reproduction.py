"""Brooker's experiment reproduced with the public API (durablelab.examples.brooker) gives
the work and time of the plain simulation in bench/brooker.py, on a small trial count."""

import importlib.util
from pathlib import Path

import pytest

import durablelab as dl
from durablelab.examples import brooker as reproduction

PATH = Path(__file__).resolve().parent.parent / "bench" / "brooker.py"
spec = importlib.util.spec_from_file_location("brooker_bench", PATH)
reference = importlib.util.module_from_spec(spec)
spec.loader.exec_module(reference)


def test_the_policies_wait_as_the_post_says():
    # Brooker's n-th wait (n from 1) is min(cap, base * 2**n): RetryPolicy's cap(n) with
    # initial = 2 * base; decorrelated grows from the base itself.
    expo = reproduction.POLICIES["exponential"]
    assert [expo.cap(n) for n in (1, 2, 3, 10)] == pytest.approx([0.010, 0.020, 0.040, 2.0])
    assert reproduction.POLICIES["decorrelated"].initial == 0.005
    assert reproduction.POLICIES["none"].cap(7) == 0.0


def test_network_delays_have_the_posts_mean_and_spread():
    draws = [reproduction.network(f"k{i}") for i in range(4000)]
    mean = sum(draws) / len(draws)
    sd = (sum((d - mean) ** 2 for d in draws) / len(draws)) ** 0.5
    assert mean == pytest.approx(0.010, rel=0.02) and sd == pytest.approx(0.002, rel=0.05)
    assert reproduction.network("k1") == draws[1]           # a pure function of the key


def test_one_client_reads_and_writes_once():
    writes, makespan, exp = reproduction.reproduce(1, "full", 1)
    assert writes == 1 and exp.frame.status.tolist() == ["completed"]
    assert 30 < makespan < 50    # four messages of about 10 ms


@pytest.mark.parametrize("strategy", reproduction.STRATEGIES)
def test_ten_clients_do_the_work_and_take_the_time_of_the_plain_simulation(strategy):
    # 20 trials of the reproduction against 400 of the plain simulation (whose own mean is
    # then close to exact); the post's spread at 10 clients is 5 % on time over 100 trials,
    # so 20 trials spread about twice that, on time. Work is much steadier.
    writes, makespan, _ = reproduction.reproduce(10, strategy, 20)
    ref_writes, ref_makespan = reference.experiment(10, strategy, 400)
    assert writes == pytest.approx(ref_writes, rel=0.03)
    assert makespan == pytest.approx(ref_makespan, rel=0.10)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["full", "equal", "decorrelated"])
def test_fifty_clients_match_too(strategy):
    writes, makespan, _ = reproduction.reproduce(50, strategy, 8)
    ref_writes, ref_makespan = reference.experiment(50, strategy, 200)
    assert writes == pytest.approx(ref_writes, rel=0.03)
    assert makespan == pytest.approx(ref_makespan, rel=0.10)


def test_the_same_trials_give_the_same_table():
    a = reproduction.reproduce(5, "decorrelated", 3)[2]
    b = reproduction.reproduce(5, "decorrelated", 3)[2]
    assert a.frame.equals(b.frame) and a.requests.equals(b.requests)


def test_a_worker_crash_mid_trial_is_replayed_and_every_client_writes_once(tmp_path):
    world = reproduction.Row()
    engine = dl.Engine(tmp_path / "trial.duckdb", world=world)
    ids = [engine.start(reproduction.client, "full", run_id=f"c{i}", seed=1) for i in range(6)]
    engine.advance(0.05)                   # mid-trial: reads and writes in flight
    engine.crash()                          # a fresh worker replays every run from its history
    engine.run_until_idle()
    runs = [engine.run(i) for i in ids]
    assert all(run.status == "completed" for run in runs)
    assert sorted(run.result for run in runs) == list(range(1, 7))   # each its own version
    assert world.row.version == 6
    replayed = sum(w.replayed for run in runs for w in run.wakeups.itertuples())
    assert replayed > 0
    engine.close()
