"""Engine.snapshot(): the frozen facts a view reads instead of the engine's working state,
and the Run built from them (the same from a live engine and from a reopened store)."""

import dataclasses
import re
from pathlib import Path

import pytest
from pandas.testing import assert_frame_equal

import durablelab as dl
from durablelab.faults import Crash, Hang, ServerError, Timeout
from durablelab.run import Run
from durablelab.snapshot import AttemptRow, CrashFault, EventRow, InFlight, RunSnapshot

NONE = dl.RetryPolicy(max_attempts=4, jitter="none", initial=2.0)
PACKAGE = Path(dl.__file__).parent


def step(x, idempotency_key=None):
    return {"x": x, "key": idempotency_key}


def story(ctx, inp):
    a = ctx.activity("fetch", step, 1, policy=NONE)
    ctx.sleep(30)
    ok = ctx.wait_signal("approval", timeout=100)
    b = ctx.activity("charge", step, 2, policy=NONE, start_to_close=5)
    return [a, b, ok]


def hang(ctx, inp):
    ctx.activity("first", step, 1)
    return ctx.activity("stuck", step, 2)


CRASHES = [Crash("fetch", point="after_effect"), Crash("charge", point="before_activity"),
           Timeout("charge", attempts=[1])]


def crashed_run(path, durability="sync"):
    engine = dl.Engine(path, durability=durability, workflows=[story])
    engine.start(story, {"v": 4}, run_id="crashed", faults=CRASHES)
    engine.start(story, {"v": 5}, run_id="bystander")
    engine.advance(40)
    engine.crash()
    engine.signal("crashed", "approval", True, signal_id="a")
    engine.run_until_idle()
    return engine


def test_a_snapshot_is_frozen_and_its_values_are_copies():
    engine = dl.Engine()
    engine.start(story, {"v": [1]}, run_id="r", faults=[ServerError("fetch", attempts=[1])])
    engine.advance(0.5)
    snap = engine.snapshot("r")
    assert isinstance(snap, RunSnapshot) and snap.status == "waiting"
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.status = "completed"
    assert isinstance(snap.events, tuple) and isinstance(snap.retried, tuple)
    assert snap.retried == (AttemptRow(1, "fetch", 1, 0.0, 0.0, "transient", "Transient",
                                       snap.retried[0].error, 2.0, 4),)
    snap.input["v"].append(2)                  # a decoded value is the reader's own copy
    assert snap.input == {"v": [1]}
    engine.run_until_idle()                    # the engine carries on; the snapshot does not
    assert (snap.status, len(snap.events), snap.wakeups[-1].reason) == ("waiting", 0, "start")
    later = engine.snapshot("r")
    assert later.status == "completed" and [e.kind for e in later.events] == [
        "activity", "sleep", "timer_fired", "wait_signal", "signal_timeout", "activity"]
    assert all(isinstance(e, EventRow) for e in later.events)
    assert later.events[0].loads() == {"x": 1, "key": "r:1"}


def test_run_is_built_from_the_snapshot_alone():
    engine = dl.Engine()
    engine.start(hang, None, run_id="hung", faults=[Hang("stuck")])
    engine.run_until_idle()
    snap = engine.snapshot("hung")
    assert snap.inflight == InFlight(2, "stuck", 1, 0.0)
    run = Run.from_snapshot(snap)
    live = engine.run("hung")
    assert (run.status, run.input, run.result, run.workflow_registered) == (
        live.status, None, None, True)
    for name in ("history", "attempts", "wakeups", "crashes"):
        assert_frame_equal(getattr(run, name), getattr(live, name))
    assert run.attempts.outcome.tolist() == ["ok", "in_flight"]
    engine.close()


def test_a_crashed_run_reads_the_same_live_and_from_its_reopened_store(tmp_path):
    engine = crashed_run(tmp_path / "runs.duckdb")
    live = {run_id: engine.run(run_id) for run_id in ("crashed", "bystander")}
    snap = engine.snapshot("crashed")
    engine.close()
    # The run's own Crash faults, where and when they fired; a worker death per crash.
    assert snap.crash_faults == (CrashFault(1, 1, "after_effect", 0.0),
                                 CrashFault(6, 1, "before_activity", 40.0),
                                 CrashFault(6, 2, "before_activity", 47.0))
    assert [(c.crashed_at, c.run_id) for c in snap.crashes] == [
        (0.0, "crashed"), (40.0, None), (40.0, "crashed"), (47.0, "crashed")]
    assert snap.crashes[1].cause == "engine.crash()"
    attempts = live["crashed"].attempts
    # A crash before or during an attempt sorts before the attempt that replaced it.
    assert list(zip(attempts.position, attempts.attempt, attempts.outcome)) == [
        (1, 1, "crashed"), (1, 1, "ok"), (6, 1, "crashed"), (6, 1, "timeout"),
        (6, 2, "crashed"), (6, 2, "ok")]
    reopened = dl.Engine(tmp_path / "runs.duckdb", workflows=[story])
    for run_id, run in live.items():
        loaded = reopened.run(run_id)
        assert (loaded.status, loaded.result, loaded.started_at, loaded.ended_at) == (
            run.status, run.result, run.started_at, run.ended_at)
        for name in ("history", "attempts", "wakeups", "crashes"):
            assert_frame_equal(getattr(loaded, name), getattr(run, name))
    assert reopened.snapshot("crashed") == snap
    reopened.close()


def test_a_snapshot_of_an_unknown_or_damaged_run_says_so():
    engine = dl.Engine()
    with pytest.raises(dl.RunNotFoundError, match="No run 'nope'"):
        engine.snapshot("nope")
    engine.close()
    with pytest.raises(dl.DurableLabError, match="closed"):
        engine.snapshot("nope")


#: Modules that are views: they read `Run`s and snapshots, never the engine's state.
VIEWS = ["run.py", "compare.py", "diagnose.py", "export.py", "snapshot.py", "durations.py",
         "waits.py",
         *[f"viz/{p.name}" for p in (PACKAGE / "viz").glob("*.py")]]


@pytest.mark.parametrize("module", VIEWS)
def test_views_never_reach_into_the_engine(module):
    text = (PACKAGE / module).read_text()
    found = re.findall(r"RunState|engine\._\w+|\._state\b|\.inflight\[|fault_rows|"
                       r"from \.+engine import|from \.+ import __version__", text)
    assert found == [], f"{module} reads engine internals: {found}"
