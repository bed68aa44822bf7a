"""dl.sweep(arrivals=, contention="per_seed"), Experiment.series(every=) and the cells'
makespan, on two clients of one row whose schedule is known by hand:

A reads at 0 (answer at 1) and writes at 1 (accepted, done at 2). B reads at 0 (answer at
2, version 0), writes at 2: conflict, known at 3; backs off 0.5 s; reads at 3.5 (answer at
5.5), writes at 5.5: accepted, done at 6.5."""

import math
import sys
from pathlib import Path

import pytest

import durablelab as dl
from durablelab.errors import BadValue
from durablelab.experiments.spec import Spec

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import occ_clients as oc  # noqa: E402

PAIR = [[1, 1], [2, 1]]


def _sweep(**options):
    options.setdefault("seeds", range(2))
    return dl.sweep(oc.client, options.pop("inputs", PAIR), world=oc.Row, **options)


def test_per_seed_gives_each_seed_its_own_row():
    exp = _sweep(contention="per_seed")
    assert exp.frame.virtual_duration.tolist() == [2.0, 6.5, 2.0, 6.5]
    assert exp.frame.attempts.tolist() == [2, 4, 2, 4]
    assert exp.cells.makespan.iloc[0] == 6.5


def test_one_world_per_cell_makes_the_seeds_contend():
    shared = _sweep(contention=True)
    # four clients on one row now: seed 1's reads overlap seed 0's writes
    assert shared.frame.attempts.sum() > 12
    assert shared.frame.virtual_duration.tolist() != [2.0, 6.5, 2.0, 6.5]


def test_arrivals_as_a_rate_start_input_i_at_i_over_rate():
    exp = _sweep(contention="per_seed", arrivals=0.5)
    # B starts at 2: reads version 1 (A's landed at 1), answer at 4; writes at 4, done at 5
    assert exp.frame.virtual_duration.tolist() == [2.0, 3.0, 2.0, 3.0]
    assert exp.cells.makespan.iloc[0] == 5.0
    assert exp.spec["arrivals"] == [0.0, 2.0]


def test_arrivals_as_a_function_and_isolated_runs():
    exp = _sweep(arrivals=lambda i: 10.0 * i, seeds=[0])
    assert exp.frame.virtual_duration.tolist() == [2.0, 3.0]     # alone: no conflict
    assert exp.cells.makespan.iloc[0] == 13.0                     # B: 10 + 3
    starts = exp.requests.started_at.tolist()
    assert starts == [0.0, 1.0, 10.0, 12.0]


def test_series_bins_the_hand_schedule():
    exp = _sweep(contention="per_seed")
    s = exp.series(every=1.0)
    assert list(s.columns) == ["policy", "fault_plan", "start", "offered", "seen", "goodput",
                               "retries", "refusals", "in_flight"]
    assert s.start.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    # per seed: starts at 0 (2 reads), 1 (A's write), 2 (B's write), 3.5 (read), 5.5 (write)
    assert s.offered.tolist() == [4, 2, 2, 2, 0, 2, 0]
    assert s.seen.tolist() == s.offered.tolist()
    # ok ends: 1 (A read), 2 (B read, A write), 5.5 (read), 6.5 (write); B's conflict ends at 3
    assert s.goodput.tolist() == [0, 2, 4, 0, 0, 2, 2]
    # at each bin's start: 0: 4 reads; 1: B's read, A's write (A's read ended at 1: not)
    assert s.in_flight.tolist() == [4, 4, 2, 0, 2, 2, 2]
    assert s.retries.sum() == 0 and s.refusals.sum() == 0   # the scope's tries are new
    wide = exp.series(every=4.0)
    assert wide.offered.tolist() == [10, 2] and wide.goodput.tolist() == [6, 4]


def always_fails(ctx, _):
    return ctx.activity("flaky", _fail, policy=dl.RetryPolicy(
        max_attempts=3, initial=1.0, jitter="none", budget=dl.RetryQuota(capacity=0)))


def _fail():
    raise ConnectionError("down")


def test_series_counts_a_retry_the_quota_refused_as_a_refusal():
    exp = dl.sweep(always_fails, [None], seeds=[0])
    s = exp.series()
    assert (s.offered.tolist(), s.seen.tolist(), s.retries.tolist(),
            s.refusals.tolist()) == ([1], [1], [0], [1])


def test_the_same_sweep_gives_the_same_series():
    a = _sweep(contention="per_seed", arrivals=0.25).series(0.5)
    b = _sweep(contention="per_seed", arrivals=0.25).series(0.5)
    assert a.equals(b)


def test_the_data_form_carries_arrivals_and_per_seed():
    spec = Spec(oc.client, PAIR, None, None, range(2), oc.Row, "per_seed", 100.0,
                arrivals=lambda i: 3.0 * i)
    rebuilt = Spec.from_data(spec.to_data())
    assert (rebuilt.arrivals, rebuilt.contention) == ([0.0, 3.0], "per_seed")
    assert rebuilt.describe() == spec.describe()
    plain = Spec(oc.client, PAIR, None, None, range(2), oc.Row, False, 100.0)
    assert "arrivals" not in plain.describe()      # a sweep from before still resumes


def test_per_seed_in_worker_processes_gives_the_serial_table():
    serial = _sweep(contention="per_seed", arrivals=0.5, seeds=range(4))
    parallel = _sweep(contention="per_seed", arrivals=0.5, seeds=range(4), processes=2)
    assert serial.frame.equals(parallel.frame)
    assert serial.requests.equals(parallel.requests)


# --- bad input -----------------------------------------------------------------------------
@pytest.mark.parametrize("arrivals, words", [
    (lambda i: 5.0 - i, "goes back in time at input 1: 4s, after 5s"),
    ([0.0, -1.0], "goes back in time at input 1"),
    ([-1.0, 2.0], "the clock starts at 0"),
    ([0.0, math.nan], "finite number"),
    ([0.0], "1 instants for 2 inputs"),
    (0, "a rate is runs per virtual second"),
    (-2.0, "a rate is runs per virtual second"),
    (math.inf, "a rate is runs per virtual second"),
    ("fast", "give a rate"),
    (True, "give a rate"),
])
def test_bad_arrivals_are_refused_before_anything_runs(arrivals, words):
    with pytest.raises(dl.SweepError, match=words) as info:
        _sweep(arrivals=arrivals)
    assert info.value.argument == "arrivals"


def test_an_unknown_contention_is_refused():
    with pytest.raises(dl.SweepError, match="per_seed") as info:
        _sweep(contention="per-seed")
    assert info.value.argument == "contention"


@pytest.mark.parametrize("every", [0, -1.0, math.nan, math.inf, "1", True])
def test_series_refuses_a_bad_bin(every):
    exp = _sweep(seeds=[0])
    with pytest.raises((BadValue, dl.DurableLabError), match="every="):
        exp.series(every)


def test_series_of_an_exported_experiment_says_why_not(tmp_path):
    exp = _sweep(seeds=[0])
    path = tmp_path / "exp.jsonl"
    dl.export(exp, path)
    with pytest.raises(BadValue, match="loaded from an export"):
        dl.load(path).series()
