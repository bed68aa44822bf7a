"""bench/peers.py's fan-out figure checks that each system really had its activities in
flight at once before it reports a time; those checks must tell a fan-out from a sequence."""

import importlib.util
from pathlib import Path

import durablelab as dl

PATH = Path(__file__).resolve().parent.parent / "bench" / "peers.py"
spec = importlib.util.spec_from_file_location("peers_bench", PATH)
peers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(peers)


def test_most_in_flight_counts_overlaps_of_half_open_intervals():
    assert peers.most_in_flight([(0, 10), (5, 15), (10, 20)]) == 2
    assert peers.most_in_flight([(0, 5), (1, 5), (2, 5), (3, 9)]) == 4
    assert peers.most_in_flight([(0, 1), (1, 2), (2, 3)]) == 1   # one after another
    assert peers.most_in_flight([(0, 10), (4, 4)]) == 1          # empty: under a ms
    assert peers.most_in_flight([]) == 0


def history_of(workflow, n):
    with dl.Engine() as engine:
        run_id = engine.start(workflow, n)
        engine.run_until_idle()
        run = engine.run(run_id)
        assert run.status == "completed" and run.result == n
        return run.history


def test_a_gathered_fan_out_has_every_activity_in_flight_at_once():
    assert peers.all_started_before_any_ended(history_of(peers.dl_fanout_gather, 5), 5)
    assert peers.all_started_before_any_ended(history_of(peers.dl_fanout_map, 5), 5)


def limited_map(ctx, n):
    return len(ctx.map("step", peers.step, range(n), limit=2))


def test_a_sequence_or_a_limited_map_is_not_taken_for_a_fan_out():
    assert not peers.all_started_before_any_ended(history_of(peers.steps, 5), 5)
    assert not peers.all_started_before_any_ended(history_of(limited_map, 5), 5)
    assert not peers.all_started_before_any_ended(history_of(peers.dl_fanout_gather, 5), 4)
