"""Invariant 4 with a real `kill -9`: with durability="sync" nothing acknowledged is lost.

A worker process (tests/kill9_worker.py) runs a 200-activity workflow on a DuckDB file; each
activity appends a line to a plain-text ledger that plays the outside world and honours
idempotency keys. The test SIGKILLs the worker mid-run, then recovers the run in a fresh
engine and checks history, result and ledger. It also checks that a second process cannot
open the file while the worker holds it, and gets a `StoreLockedError` that names the path
and the holder's pid.

No assertion is about speed: the polling limits only stop a broken worker from hanging the
suite.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import duckdb
import pytest

import durablelab as dl

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import kill9_worker  # noqa: E402  (needs the sys.path entry above)

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

N = 200
RUN_ID = "ledger-run"
GIVE_UP_AFTER = 60.0     # seconds: a safety net against a hung worker, not a measurement


class Worker:
    """One worker process; its stdout and stderr go to files in tmp_path."""

    def __init__(self, tmp_path: Path, db: Path, ledger: Path, n: int = N, sleep: float = 0.005,
                 tag: str = "worker", flow: str = "ledger"):
        self.out = tmp_path / f"{tag}.out"
        self.err = tmp_path / f"{tag}.err"
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(TESTS / "kill9_worker.py"), str(db), str(ledger), str(n),
                 RUN_ID, str(sleep), flow],
                stdout=out, stderr=err, cwd=str(tmp_path))

    @property
    def pid(self) -> int:
        return self.proc.pid

    def acks(self) -> int:
        """The highest K of the 'ack K' lines: activities whose result reached the code."""
        found = [int(line.split()[1]) for line in self.out.read_text().splitlines()
                 if line.startswith("ack ")]
        return max(found, default=0)

    def wait_for(self, what: str, predicate) -> None:
        limit = time.monotonic() + GIVE_UP_AFTER
        while not predicate():
            if self.proc.poll() is not None:
                pytest.fail(f"the worker exited ({self.proc.returncode}) before {what}:\n"
                            f"{self.out.read_text()[-2000:]}\n{self.err.read_text()[-4000:]}")
            if time.monotonic() > limit:
                self.kill()
                pytest.fail(f"the worker did not reach {what} in {GIVE_UP_AFTER:g}s:\n"
                            f"{self.err.read_text()[-4000:]}")
            time.sleep(0.01)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=GIVE_UP_AFTER)


def ledger_rows(ledger: Path) -> list[tuple[str, str, int]]:
    if not ledger.exists():
        return []
    rows = []
    for line in ledger.read_text(encoding="utf-8").splitlines():
        key, kind, i = line.split(" ")
        rows.append((key, kind, int(i)))
    return rows


def events(engine) -> list[tuple]:
    return engine.store.fetch("SELECT * FROM events WHERE run_id = ? ORDER BY position",
                              [RUN_ID])


def killed_mid_run(tmp_path, db, ledger, tag, after_lines):
    """Start a worker (it starts or resumes the run), SIGKILL it once the ledger has
    `after_lines` lines; returns (acks it printed, ledger rows at the kill)."""
    worker = Worker(tmp_path, db, ledger, tag=tag)
    worker.wait_for(f"{after_lines} ledger lines", lambda: len(ledger_rows(ledger)) >= after_lines)
    worker.kill()
    assert worker.proc.returncode == -signal.SIGKILL, worker.err.read_text()
    assert "done" not in worker.out.read_text(), "the worker finished before it was killed"
    return worker.acks(), ledger_rows(ledger)


def check_committed_prefix(engine, acked: int, at_kill: list) -> list[tuple]:
    """What a killed worker left: a gap-free prefix of history holding at least every event
    it acknowledged, and a ledger with at most the one in-flight effect beyond it."""
    committed = events(engine)
    positions = [row[1] for row in committed]
    assert positions == list(range(1, len(committed) + 1)), "history has gaps"
    assert len(committed) >= acked, (
        f"the worker acknowledged {acked} activities but only {len(committed)} events survived "
        f"kill -9 in sync mode")
    assert 0 < len(committed) < N
    effects = [row for row in at_kill if row[1] == "effect"]
    assert len(committed) <= len(effects) <= len(committed) + 1, (len(committed), len(effects))
    return committed


def check_finished(engine, ledger: Path, max_extra_calls: int) -> None:
    run = engine.run(RUN_ID)
    assert run.status == "completed", run.error
    assert run.result == kill9_worker.expected_result(N)

    rows = events(engine)
    assert [row[1] for row in rows] == list(range(1, N + 1))       # positions 1..N, no gaps
    assert set(row[2] for row in rows) == {"activity"}
    assert all(row[5] for row in rows)                               # ok
    assert Counter(row[1] for row in rows) == Counter(range(1, N + 1))
    assert [int(row[6]) for row in rows] == list(range(N))           # each returned its i

    ledger_now = ledger_rows(ledger)
    effects = [key for key, kind, _ in ledger_now if kind == "effect"]
    assert sorted(effects) == sorted(f"{RUN_ID}:{p}" for p in range(1, N + 1))
    assert len(effects) == len(set(effects)) == N                   # no key as effect twice
    assert N <= len(ledger_now) <= N + max_extra_calls               # at most the in-flight ones
    for key, kind, i in ledger_now:
        assert key == f"{RUN_ID}:{i + 1}"                            # the key is run:position

    assert "recovery" in set(run.wakeups["reason"]), run.wakeups


def test_sync_run_survives_kill9_and_recovers_without_loss_or_duplicate(tmp_path, monkeypatch):
    db, ledger = tmp_path / "runs.duckdb", tmp_path / "ledger.txt"
    acked, at_kill = killed_mid_run(tmp_path, db, ledger, "first", after_lines=40)

    monkeypatch.setattr(kill9_worker, "SLEEP", 0.0)
    engine = dl.Engine(db, workflows=[kill9_worker.ledger_flow])
    try:
        committed = check_committed_prefix(engine, acked, at_kill)
        assert engine.run(RUN_ID).status in ("running", "waiting")
        engine.run_until_idle()
        # Every event the killed process committed is still there, unchanged.
        assert events(engine)[:len(committed)] == committed
        check_finished(engine, ledger, max_extra_calls=1)
        # A duplicate call, if any, was the activity in flight at the kill.
        dups = [key for key, kind, _ in ledger_rows(ledger) if kind == "duplicate"]
        assert dups in ([], [f"{RUN_ID}:{len(committed) + 1}"])
    finally:
        engine.close()


def test_sync_run_survives_two_kill9_of_recovering_workers(tmp_path, monkeypatch):
    """Kill the worker, let a new worker process recover the run, kill that one too, then
    recover in this process: each kill costs at most one repeated call, never an effect."""
    db, ledger = tmp_path / "runs.duckdb", tmp_path / "ledger.txt"
    acked_first, at_first = killed_mid_run(tmp_path, db, ledger, "first", after_lines=30)
    # What the first kill left, read without an Engine so the file is not touched.
    con = duckdb.connect(str(db), read_only=True)
    try:
        first_committed = con.execute("SELECT * FROM events WHERE run_id = ? ORDER BY position",
                                      [RUN_ID]).fetchall()
    finally:
        con.close()
    assert len(first_committed) >= acked_first > 0
    acked_second, at_second = killed_mid_run(tmp_path, db, ledger, "second",
                                             after_lines=len(at_first) + 40)
    assert acked_second >= acked_first    # the second worker replayed, then carried on

    monkeypatch.setattr(kill9_worker, "SLEEP", 0.0)
    engine = dl.Engine(db, workflows=[kill9_worker.ledger_flow])
    try:
        committed = check_committed_prefix(engine, acked_second, at_second)
        assert len(committed) >= 30
        assert committed[:len(first_committed)] == first_committed
        engine.run_until_idle()
        assert events(engine)[:len(committed)] == committed
        check_finished(engine, ledger, max_extra_calls=2)
    finally:
        engine.close()


def test_open_while_worker_holds_file_raises_store_locked_error(tmp_path):
    db, ledger = tmp_path / "runs.duckdb", tmp_path / "ledger.txt"
    worker = Worker(tmp_path, db, ledger, n=2000, sleep=0.02, tag="holder")
    try:
        worker.wait_for("its first acknowledged activity", lambda: worker.acks() >= 1)
        with pytest.raises(dl.StoreLockedError) as info:
            dl.Engine(db)
        error = info.value
        assert error.path == str(db)
        assert error.pid == worker.pid
        assert str(db) in str(error) and str(worker.pid) in str(error)
        assert worker.proc.poll() is None          # refusing us did not disturb the holder
    finally:
        worker.kill()
    acked = worker.acks()
    # Once the holder is dead the lock is gone: the file opens and the run is there to resume.
    engine = dl.Engine(db, workflows=[kill9_worker.ledger_flow])
    try:
        assert engine.run(RUN_ID).status in ("running", "waiting")
        assert len(events(engine)) >= acked >= 1
    finally:
        engine.close()


def test_kill9_with_three_activities_in_flight_recovers_each_effect_once(tmp_path, monkeypatch):
    """The worker starts three activities at a time (ctx.start_activity); a SIGKILL lands
    while some have made their effect and none of their ends is recorded. The recovering
    process launches each unfinished one again under the same key: the ledger gets at
    most a duplicate call per activity in flight, never a second effect."""
    db, ledger = tmp_path / "runs.duckdb", tmp_path / "ledger.txt"
    worker = Worker(tmp_path, db, ledger, tag="fan", flow="fan")
    worker.wait_for("100 ledger lines", lambda: len(ledger_rows(ledger)) >= 100)
    worker.kill()
    assert worker.proc.returncode == -signal.SIGKILL, worker.err.read_text()
    assert "done" not in worker.out.read_text(), "the worker finished before it was killed"
    monkeypatch.setattr(kill9_worker, "SLEEP", 0.0)
    engine = dl.Engine(db, workflows=[kill9_worker.fan_flow])
    engine.run_until_idle()
    run = engine.run(RUN_ID)
    assert run.status == "completed", run.error
    assert run.result == kill9_worker.expected_result(N)
    started = run.history[run.history.kind == "start_activity"].position.tolist()
    assert len(started) == N
    rows = ledger_rows(ledger)
    effects = [key for key, kind, _ in rows if kind == "effect"]
    assert sorted(effects) == sorted(f"{RUN_ID}:{p}" for p in started)   # each key once
    assert len(rows) <= N + 3                     # at most the three in flight called again
    assert "recovery" in set(run.wakeups["reason"])
    engine.close()
