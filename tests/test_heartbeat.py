"""dl.heartbeat / dl.last_heartbeat: activity code reports progress, the engine records it
at once, and the next attempt (after a failure, or after the worker was killed with
SIGKILL) resumes from the last details instead of starting over."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import durablelab as dl
from durablelab.faults import Crash, Latency

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import heartbeat_worker  # noqa: E402

POLICY = dl.RetryPolicy(max_attempts=3, initial=1.0, jitter="none")


def test_a_retried_attempt_reads_the_last_details_and_resumes():
    seen, flaky = [], {"item": 3, "failed": False}

    def wf(ctx, n):
        return ctx.activity("work", work, n, policy=POLICY, heartbeat=10)

    def work(n):
        start = dl.last_heartbeat()
        seen.append(("start", start))
        done = start["done"] if start else 0
        for item in range(done, n):
            if item == flaky["item"] and not flaky["failed"]:
                flaky["failed"] = True
                raise ConnectionError("reset while processing item 3")
            seen.append(item)
            dl.heartbeat({"done": item + 1})
        return {"done": n}

    engine = dl.Engine()
    run_id = engine.start(wf, 5)
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "completed" and run.result == {"done": 5}
    assert seen == [("start", None), 0, 1, 2, ("start", {"done": 3}), 3, 4]
    assert run.attempts.outcome.tolist() == ["transient", "ok"]


def test_details_survive_a_simulated_crash_and_a_missed_heartbeat_is_noticed(tmp_path):
    calls = []

    def job():
        calls.append(dl.last_heartbeat())
        dl.heartbeat("halfway")
        return "done"

    def wf(ctx, _):
        return ctx.activity("job", job, heartbeat=20, policy=POLICY)

    def crasher(ctx, _):
        ctx.sleep(50)
        return ctx.activity("boom", lambda: "x")

    db = tmp_path / "hb.duckdb"
    engine = dl.Engine(db, workflows=[wf, crasher])
    run_id = engine.start(wf, None, faults=[Latency("job", seconds=300, attempts=[1])])
    engine.start(crasher, None, faults=[Crash("boom", point="before_activity")])
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.result == "done"
    assert calls == [None, "halfway"]            # the retry read what the lost one sent
    lost = run.attempts.iloc[0]
    assert (lost.outcome, lost.ended_at) == ("timeout", 70.0)   # died at 50, noticed at 70
    assert "no heartbeat within 20s" in lost.error
    engine.close()


def test_heartbeat_outside_an_activity_and_non_json_details_are_refused():
    with pytest.raises(dl.HeartbeatError, match=r"dl.heartbeat\(\) was called outside an "
                                                r"activity"):
        dl.heartbeat(1)
    with pytest.raises(RuntimeError, match="outside an activity"):
        dl.last_heartbeat()

    def job():
        dl.heartbeat({"fh": object()})

    def wf(ctx, _):
        return ctx.activity("job", job, policy=dl.RetryPolicy(max_attempts=1))

    def in_workflow(ctx, _):
        dl.heartbeat()

    engine = dl.Engine()
    run = engine.run(engine.start(wf, None))
    engine.run_until_idle()
    run = engine.run(run.run_id)
    assert run.status == "failed" and "not JSON" in str(run.error)
    run = engine.run(engine.start(in_workflow, None))
    engine.run_until_idle()
    run = engine.run(run.run_id)
    assert run.status == "failed" and "outside an activity" in str(run.error)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_details_survive_kill_9_and_the_recovered_attempt_resumes(tmp_path):
    db, log = tmp_path / "batch.duckdb", tmp_path / "items.log"
    # the worker imports this checkout's durablelab, whatever PYTHONPATH said (it may be
    # relative, and the worker runs in tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(TESTS.parent)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                               if p and Path(p).is_absolute()])}
    worker = subprocess.run(
        [sys.executable, str(TESTS / "heartbeat_worker.py"), str(db), str(log), "10", "4"],
        cwd=str(tmp_path), capture_output=True, text=True, timeout=120, env=env)
    assert worker.returncode == -signal.SIGKILL, worker.stderr
    killed = [line.split() for line in log.read_text().splitlines()]
    assert [int(item) for _, item in killed] == [0, 1, 2, 3]

    engine = dl.Engine(db, workflows=[heartbeat_worker.batch_flow])
    engine.run_until_idle()
    run = engine.run("batch")
    assert run.status == "completed", run.error
    assert run.result == {"resumed_at": 4, "done": 10}
    lines = [line.split() for line in log.read_text().splitlines()]
    assert [int(item) for _, item in lines] == list(range(10))   # no item done twice
    assert {pid for pid, _ in lines[4:]} != {killed[0][0]}       # by another process
    engine.close()
