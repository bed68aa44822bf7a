"""A worker process for the DBOS crash tests: runs (or recovers) a 20-activity workflow
whose effects land in a key-honouring ledger kept in its own SQLite file, so the effects
outlive a `kill -9` of the worker.

    python tests/dbos_worker.py URL LEDGER RUN_ID start|recover [PLAN_JSON SEED]

With a fault plan, `start` runs it under the plan: a `Crash` rule ends this process with
status 137, as kill -9 would, and `recover` (DBOS recovers the run at launch) carries on.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import durablelab as dl  # noqa: E402

STEPS = 20
LEDGER = {"path": None}


def ledger(path: str) -> sqlite3.Connection:
    con = sqlite3.connect(path, timeout=30, isolation_level=None)
    con.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT, at REAL)")
    con.execute("CREATE TABLE IF NOT EXISTS effects (key TEXT PRIMARY KEY, step INTEGER)")
    return con


def charge(step: int, idempotency_key=None) -> dict:
    """A service that honours idempotency keys: a repeated key is a call, not an effect."""
    con = ledger(LEDGER["path"])
    con.execute("INSERT INTO calls VALUES (?, ?)", (idempotency_key, time.time()))
    con.execute("INSERT OR IGNORE INTO effects VALUES (?, ?)", (idempotency_key, step))
    con.close()
    time.sleep(0.05)   # long enough that a kill lands mid-run
    return {"step": step, "key": idempotency_key}


QUICK = dl.RetryPolicy(max_attempts=3, initial=0.3, jitter="none")


def twenty_charges(ctx, order: dict) -> dict:
    receipts = [ctx.activity("charge", charge, step, policy=QUICK)
                for step in range(1, STEPS + 1)]
    return {"order": order["id"], "charged": len(receipts)}


def main() -> None:
    url, LEDGER["path"], run_id, mode = sys.argv[1:5]
    plan, seed = (sys.argv[5], int(sys.argv[6])) if len(sys.argv) > 6 else (None, 0)
    from durablelab.backends.dbos import DBOSRunner
    runner = DBOSRunner(url, workflows=[twenty_charges])
    try:
        if mode == "start":
            runner.start(twenty_charges, {"id": "o-1"}, run_id=run_id, faults=plan, seed=seed)
        print(json.dumps(runner.result(run_id, timeout=120)), flush=True)
    finally:
        runner.close()


if __name__ == "__main__":
    main()
