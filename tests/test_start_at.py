"""engine.start(start_at=): a run that arrives later in virtual time (open-loop load)."""

import math

import pytest

import durablelab as dl
from durablelab.errors import BadType, BadValue


def two_steps(ctx, seconds):
    first = ctx.now()
    ctx.activity("work", lambda s: dl.sim.after(s, value=s), seconds)
    return [first, ctx.now()]


def test_a_run_starts_at_its_instant_and_its_duration_counts_from_there():
    engine = dl.Engine()
    now = engine.start(two_steps, 1.0, run_id="now")
    later = engine.start(two_steps, 1.0, run_id="later", start_at=5.0)
    engine.run_until_idle()
    assert engine.run("now").result == [0.0, 1.0]
    run = engine.run("later")
    assert run.result == [5.0, 6.0]
    assert (run.started_at, run.ended_at) == (5.0, 6.0)
    rows = engine.runs().set_index("run_id")
    assert rows.loc["later", "started_at"] == 5.0


def test_the_time_out_counts_from_start_at():
    engine = dl.Engine()
    engine.start(two_steps, 3.0, run_id="t", start_at=10.0, timeout=2.0)
    engine.run_until_idle()
    run = engine.run("t")
    assert run.status == "failed" and isinstance(run.error, dl.RunTimedOut)
    assert run.ended_at == 12.0


def test_a_fresh_worker_still_waits_for_start_at(tmp_path):
    path = tmp_path / "later.duckdb"
    engine = dl.Engine(path)
    engine.start(two_steps, 1.0, run_id="l", start_at=7.0)
    engine.advance(2.0)
    engine.crash()
    engine.run_until_idle()
    assert engine.run("l").result == [7.0, 8.0]
    engine.close()


@pytest.mark.parametrize("start_at, error, words", [
    (-1.0, BadValue, "start_at=-1.0 must be seconds >= 0"), (math.nan, BadValue, "start_at"),
    (math.inf, BadValue, "start_at"), ("5", BadType, "start_at"), (True, BadType, "start_at")])
def test_bad_start_at_is_refused(start_at, error, words):
    engine = dl.Engine()
    with pytest.raises(error, match=words):
        engine.start(two_steps, 1.0, start_at=start_at)
    assert engine.runs().empty


def test_start_at_in_the_past_after_time_moved_is_refused():
    engine = dl.Engine()
    engine.advance(10)
    with pytest.raises(BadValue, match=r"start_at=5.0 is before now \(t=10s\)"):
        engine.start(two_steps, 1.0, start_at=5.0)
