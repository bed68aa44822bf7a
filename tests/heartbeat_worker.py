"""A worker process for tests/test_heartbeat.py: an activity that works through items,
heartbeats after each, and is killed with SIGKILL in the middle of its first execution.

The workflow lives in this importable module so that the killed process and the process
that recovers both know it as 'heartbeat_worker:batch_flow'. The outside world is a
plain-text log: one line per item processed, "<pid> <item>".

Run as ``python tests/heartbeat_worker.py DB LOG N KILL_AT``: starts the run on DB and
kills itself (SIGKILL, no cleanup) right after the heartbeat for item KILL_AT.
"""

from __future__ import annotations

import os
import signal
import sys

import durablelab as dl

KILL_AT: int | None = None


def process_items(log: str, n: int) -> dict:
    start = dl.last_heartbeat() or 0            # resume where the lost attempt got to
    for item in range(start, n):
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()} {item}\n")
        dl.heartbeat(item + 1)                  # items done so far, recorded at once
        if KILL_AT is not None and item + 1 == KILL_AT:
            os.kill(os.getpid(), signal.SIGKILL)
    return {"resumed_at": start, "done": n}


def batch_flow(ctx: dl.Context, request: dict) -> dict:
    return ctx.activity("process_items", process_items, request["log"], request["n"],
                        heartbeat=30)


def main(db: str, log: str, n: str, kill_at: str) -> None:
    global KILL_AT
    KILL_AT = int(kill_at)
    engine = dl.Engine(db, durability="sync", workflows=[batch_flow])
    engine.start(batch_flow, {"log": log, "n": int(n)}, run_id="batch")
    engine.run_until_idle()
    raise SystemExit("not killed: KILL_AT was never reached")


if __name__ == "__main__":
    import heartbeat_worker   # the module, not __main__: history names it so

    heartbeat_worker.main(*sys.argv[1:])
