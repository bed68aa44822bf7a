"""Durability modes: what each commits, and what a crash takes with it."""

import pytest

import durablelab as dl
from durablelab.sim import Payments

payments = Payments(honor_keys=True)


def charge(n, idempotency_key=None):
    return payments.charge("c-1", n, idempotency_key=idempotency_key)


def three_charges(ctx, _):
    results = [ctx.activity(f"charge_{n}", charge, n)["id"] for n in (1, 2, 3)]
    ctx.wait_signal("ship")
    return results


@pytest.fixture(autouse=True)
def fresh_world():
    payments.reset()


def committed_events(engine, run_id):
    return engine.store.fetch("SELECT count(*) FROM events WHERE run_id = ?", [run_id])[0][0]


@pytest.mark.parametrize("mode", ["sync", "batch"])
def test_when_each_mode_commits(mode):
    seen = []
    with dl.Engine(durability=mode) as engine:
        def probe(n, idempotency_key=None):
            seen.append(committed_events(engine, "r"))      # what is durable before step n
            return n
        def wf(ctx, _):
            for n in range(4):
                ctx.activity(f"step_{n}", probe, n)
            ctx.wait_signal("go")
        engine.start(wf, None, run_id="r")
        engine.run_until_idle()
        seen.append(committed_events(engine, "r"))
    # sync: every earlier event is committed before the next step runs;
    # batch: nothing until the wake-up ends, then all of it at once.
    expected = {"sync": [0, 1, 2, 3, 5], "batch": [0, 0, 0, 0, 5]}[mode]
    assert seen == expected


def test_exit_mode_commits_only_when_the_run_ends():
    with dl.Engine(durability="exit") as engine:
        run_id = engine.start(three_charges, None, run_id="r")
        engine.run_until_idle()
        assert engine.run(run_id).status == "waiting"
        assert len(engine.run(run_id).history) == 4            # this engine's view
        assert committed_events(engine, run_id) == 0           # the store's
        engine.signal(run_id, "ship", True)
        engine.run_until_idle()
        assert committed_events(engine, run_id) == 5


def test_crash_loses_uncommitted_work_in_exit_mode_but_keys_hold():
    with dl.Engine(durability="exit") as engine:
        run_id = engine.start(three_charges, None, run_id="r")
        engine.run_until_idle()
        engine.crash()
        assert engine.run(run_id).history.empty                # lost with the worker
        engine.run_until_idle()                                # re-executes from the start
        run = engine.run(run_id)
        assert run.status == "waiting" and len(run.history) == 4
    assert len(payments.calls) == 6                            # every charge was sent twice
    assert len(payments.effects) == 3 and payments.duplicate_effects == 0


def test_crash_loses_nothing_acknowledged_in_sync_mode():
    with dl.Engine(durability="sync") as engine:
        run_id = engine.start(three_charges, None, run_id="r")
        engine.run_until_idle()
        before = engine.store.fetch("SELECT * FROM events ORDER BY position")
        engine.crash()
        engine.run_until_idle()
        assert engine.store.fetch("SELECT * FROM events ORDER BY position") == before
        assert len(engine.run(run_id).history) == 4
    assert len(payments.calls) == 3                            # nothing re-executed


def test_batch_mode_keeps_what_earlier_wake_ups_committed():
    def wf(ctx, _):
        ctx.activity("charge_1", charge, 1)
        ctx.sleep(60)                                          # wake-up boundary
        ctx.activity("charge_2", charge, 2)
        ctx.wait_signal("ship")
    with dl.Engine(durability="batch") as engine:
        run_id = engine.start(wf, None, run_id="r")
        engine.advance(30)
        assert committed_events(engine, run_id) == 2           # charge_1 and the sleep
        engine.crash()
        engine.run_until_idle()
        assert engine.run(run_id).status == "waiting"
    assert len(payments.calls) == 2                            # charge_1 never re-ran


WORKER = """
import sys, time
sys.path.insert(0, sys.argv[2])
import durablelab as dl
import test_durability as t
engine = dl.Engine(sys.argv[1], durability="exit")
engine.start(t.three_charges, None, run_id="r")
engine.run_until_idle()
print(engine.run("r").status, len(engine.run("r").history), flush=True)
time.sleep(120)
"""


def test_a_new_engine_on_the_file_sees_only_committed_work(db_path):
    import os, signal, subprocess, sys
    worker = subprocess.Popen([sys.executable, "-c", WORKER, db_path, os.path.dirname(__file__)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout.readline().split() == ["waiting", "4"]   # 4 events, uncommitted
    finally:
        os.kill(worker.pid, signal.SIGKILL)                            # no clean close()
        worker.wait()
    assert three_charges.__module__ == "test_durability"
    reopened = dl.Engine(db_path, workflows=[three_charges])
    assert reopened.run("r").history.empty and reopened.run("r").status == "running"
    reopened.run_until_idle()                       # exit mode: the run starts over
    assert len(reopened.run("r").history) == 4
    reopened.close()


def test_clean_close_commits_unfinished_runs_in_exit_mode(db_path):
    engine = dl.Engine(db_path, durability="exit")
    run_id = engine.start(three_charges, None, run_id="r")
    engine.run_until_idle()
    engine.close()
    reopened = dl.Engine(db_path, workflows=[three_charges])
    assert len(reopened.run(run_id).history) == 4
    reopened.signal(run_id, "ship", True)
    reopened.run_until_idle()
    assert reopened.run(run_id).result == ["ch_1", "ch_2", "ch_3"]
    reopened.close()
    assert len(payments.calls) == 3


def test_unknown_durability_is_rejected():
    with pytest.raises(ValueError, match="durability='fast'"):
        dl.Engine(durability="fast")


def test_reopened_engine_clock_does_not_run_backwards(db_path):
    engine = dl.Engine(db_path)
    engine.advance(3600)          # nothing recorded, but time passed
    engine.close()
    reopened = dl.Engine(db_path)
    assert reopened.clock.now() == 3600.0
    reopened.close()


def test_new_engine_resumes_with_the_current_definition(db_path):
    import types, sys
    module = types.ModuleType("redefined_flows")
    sys.modules["redefined_flows"] = module
    exec("def flow(ctx, _):\n    ctx.wait_signal('go')\n    return 'old'\n", module.__dict__)
    engine = dl.Engine(db_path)
    run_id = engine.start(module.flow, None)
    engine.run_until_idle()
    engine.close()
    exec("def flow(ctx, _):\n    ctx.wait_signal('go')\n    return 'new'\n", module.__dict__)
    reopened = dl.Engine(db_path)             # no workflows=: found as redefined_flows:flow
    reopened.signal(run_id, "go")
    reopened.run_until_idle()
    assert reopened.run(run_id).result == "new"
    reopened.close()
    del sys.modules["redefined_flows"]
