"""What the views say, defined once: durations in words (`durablelab.durations`), waits
paired from history (`durablelab.waits`), and how far a run got (`Run.latest_at`), the
same in compare, diagnose and the timeline."""

import dataclasses
import math

import pandas as pd
import pytest
from hypothesis import given, strategies as st

import durablelab as dl
from durablelab.compare import compare
from durablelab.durations import UNITS, duration_text, duration_words
from durablelab.faults import Hang, Latency, ServerError
from durablelab.viz import plots
from durablelab.waits import pair_waits

SIZES = dict(UNITS) | {"day": 86400.0}


@pytest.mark.parametrize("seconds, text", [
    (0, "0 s"), (4, "4 s"), (12.5, "12.5 s"), (59.99, "59.99 s"), (60, "1 min"),
    (150, "2 min 30 s"), (3605, "1 h 5 s"), (5400, "1 h 30 min"), (86400, "1 day"),
    (90061, "1 day 1 h"), (3 * 86400, "3 days"), (None, "?"), (float("nan"), "?"),
    (pd.NA, "?"), (float("inf"), "forever"), (float("-inf"), "-inf s")])
def test_duration_words_say_up_to_two_whole_units(seconds, text):
    assert duration_words(seconds) == text


@pytest.mark.parametrize("seconds, text", [
    (0, "0 s"), (12.5, "12.5 s"), (90, "1.5 min"), (3600, "1 h"), (5400, "1.5 h"),
    (86400, "1 day"), (2 * 86400, "2 days"), (200 * 86400, "200 days")])
def test_duration_text_says_one_unit(seconds, text):
    assert duration_text(seconds) == text


@given(st.floats(min_value=60, max_value=1e8))
def test_duration_words_drop_less_than_their_last_unit(seconds):
    parts = duration_words(seconds).split()
    stated = [(int(count), SIZES[unit]) for count, unit in zip(parts[::2], parts[1::2])]
    assert 1 <= len(stated) <= 2 and [s for _, s in stated] == sorted(
        [s for _, s in stated], reverse=True)
    said = sum(count * size for count, size in stated)
    assert said <= round(seconds) < said + stated[-1][1]


@given(st.floats(min_value=0, max_value=1e8))
def test_duration_text_is_within_three_figures_of_the_seconds(seconds):
    count, unit = duration_text(seconds).split()
    said = float(count.replace(",", "")) * SIZES[unit]
    assert math.isclose(said, seconds, rel_tol=6e-3, abs_tol=5e-3)


def history(*rows):
    return pd.DataFrame([(i + 1, kind, name, {"deadline": deadline}, float(i))
                         for i, (kind, name, deadline) in enumerate(rows)],
                        columns=["position", "kind", "name", "value", "recorded_at"])


def test_waits_pair_first_in_first_out_per_name():
    frame = history(("sleep", "sleep", 10.0), ("wait_signal", "a", None),
                    ("wait_signal", "b", 50.0), ("sleep", "sleep", 20.0),
                    ("timer_fired", "sleep", None), ("signal_received", "b", None),
                    ("signal_timeout", "zzz", None),        # ends nothing: no such wait
                    ("timer_canceled", "sleep", None))      # a Temporal import's end
    pairs = [(start.position, None if end is None else end.position)
             for start, end in pair_waits(frame)]
    assert pairs == [(1, 5), (2, None), (3, 6), (4, 8)]


def story(ctx, _):
    ctx.activity("fetch", lambda: 1, policy=dl.RetryPolicy(max_attempts=3, jitter="none"))
    ctx.sleep(60)
    ctx.wait_signal("approval", timeout=3600)
    return ctx.activity("stuck", lambda: 2)


@pytest.fixture(scope="module")
def runs():
    engine = dl.Engine()
    engine.start(story, None, run_id="signal", faults=[Latency("fetch", seconds=7),
                                                       ServerError("fetch", attempts=[1])])
    engine.start(story, None, run_id="timer")
    engine.start(story, None, run_id="hung", faults=[Hang("stuck")])
    engine.advance(20)
    engine.signal("hung", "approval", True, signal_id="s")
    engine.advance(100)
    found = {run_id: engine.run(run_id) for run_id in ("signal", "timer", "hung")}
    engine.close()
    return found


def test_diagnose_and_the_timeline_see_the_same_open_waits(runs):
    for run in runs.values():
        drawn = [(w.kind, w.name, w.start) for w in plots.waits(run.history) if w.open]
        diagnosis = dl.diagnose(run)
        if diagnosis.state == "waiting_signal":
            assert drawn == [("signal", diagnosis.facts["signal"], diagnosis.since)]
        elif diagnosis.state == "waiting_timer":
            assert drawn == [("timer", diagnosis.facts["name"], diagnosis.since)]
        else:
            assert drawn == []
    assert [dl.diagnose(runs[r]).state for r in ("signal", "timer", "hung")] == [
        "waiting_signal", "waiting_signal", "running"]


def test_compare_diagnose_and_the_timeline_agree_how_far_a_run_got(runs):
    signal = runs["signal"]
    # attempt 1 ended at 7 s, attempt 2 (after a 1 s backoff) at 8 + 7 = 15 s, then the
    # 60 s timer fired at 75 s and the signal wait began
    assert signal.attempts.ended_at.tolist() == [7.0, 15.0]
    assert signal.latest_at == 75.0 == signal.history.recorded_at.max()
    frame = compare(list(runs.values()))
    for run_id, run in runs.items():
        assert run.ended_at is None
        assert frame.loc[run_id, "virtual_duration"] == run.latest_at - run.started_at
        assert plots._latest(run) >= run.latest_at
    hung = dl.diagnose(runs["hung"])
    assert (hung.state, hung.since) == ("running", runs["hung"].latest_at)
    # a wait's deadline is drawn, though it is no recorded fact
    assert plots._latest(signal) == 75.0 + 3600


def test_latest_at_of_a_run_that_recorded_nothing_is_its_start():
    engine = dl.Engine()
    engine.start(story, None, run_id="new")
    run = engine.run("new")
    assert (run.latest_at, len(run.history), len(run.wakeups)) == (run.started_at, 0, 0)
    assert compare(run).loc["new", "virtual_duration"] == 0.0
    engine.close()


def test_an_attempt_that_ended_after_the_last_event_counts_everywhere(runs):
    hung = runs["hung"]
    later = pd.concat([hung.attempts, pd.DataFrame(
        [{"position": 9, "activity": "late", "attempt": 1, "started_at": 130.0,
          "ended_at": 140.0, "outcome": "transient"}])], ignore_index=True)
    run = dataclasses.replace(hung, attempts=later)
    assert run.latest_at == 140.0 > hung.latest_at
    assert compare(run).loc["hung", "virtual_duration"] == 140.0 - run.started_at
    assert dl.diagnose(run).since == 140.0
    assert plots._latest(run) == 140.0
