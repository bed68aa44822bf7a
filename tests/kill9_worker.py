"""A worker process for tests/test_kill9.py: a long durable workflow that a test kills with
SIGKILL halfway through.

The workflow lives in this importable module (not in a script run as __main__) because
history records workflows as 'module:qualname': the killed process and the process that
recovers must both know it as 'kill9_worker:ledger_flow'.

The outside world is a plain-text ledger file. Each activity call appends one line:
``<idempotency key> effect <i>`` when the key is new, ``<key> duplicate <i>`` when the key is
already there (the ledger honours keys: a repeated key creates no new effect). So the number
of lines counts calls and the ``effect`` lines count effects.

Run as ``python tests/kill9_worker.py DB LEDGER N RUN_ID [SLEEP [FLOW]]`` (FLOW: "ledger",
one activity at a time, or "fan", three at once): opens the engine on DB in
sync mode, starts RUN_ID unless the file already has it (otherwise it recovers it), runs
until idle and prints ``ack K`` on stdout (flushed) each time the workflow code received
the result of its K-th activity, which in sync mode means that event was committed.
"""

from __future__ import annotations

import os
import sys
import time

import durablelab as dl

#: seconds each activity sleeps after its effect: the window in which the test kills us.
SLEEP = 0.005
#: print "ack K" lines (only in the worker process, not in a test that recovers the run).
ACKS = False


def append_line(ledger: str, i: int, idempotency_key: str | None = None) -> int:
    with open(ledger, "a+", encoding="utf-8") as f:
        f.seek(0)
        seen = any(line.split(" ", 1)[0] == idempotency_key for line in f)
        f.write(f"{idempotency_key} {'duplicate' if seen else 'effect'} {i}\n")
    time.sleep(SLEEP)         # the effect happened; the record has not: the crash window
    return i


def ledger_flow(ctx: dl.Context, request: dict) -> dict:
    total = 0
    for i in range(request["n"]):
        total += ctx.activity("append", append_line, request["ledger"], i)
        if ACKS:
            print(f"ack {i + 1}", flush=True)
    return {"n": request["n"], "total": total}


def fan_flow(ctx: dl.Context, request: dict) -> dict:
    """The same ledger, three activities started at once per batch (ctx.start_activity):
    a kill lands while several attempts are in flight."""
    total = 0
    for batch in range(0, request["n"], 3):
        started = [ctx.start_activity("append", append_line, request["ledger"], i)
                   for i in range(batch, min(batch + 3, request["n"]))]
        total += sum(ctx.gather(*started))
        if ACKS:
            print(f"ack {min(batch + 3, request['n'])}", flush=True)
    return {"n": request["n"], "total": total}


FLOWS = {"ledger": ledger_flow, "fan": fan_flow}


def expected_result(n: int) -> dict:
    return {"n": n, "total": n * (n - 1) // 2}


def main(db: str, ledger: str, n: str, run_id: str, sleep: str | None = None,
         flow: str = "ledger") -> None:
    global ACKS, SLEEP
    ACKS = True
    if sleep is not None:
        SLEEP = float(sleep)
    workflow = FLOWS[flow]
    engine = dl.Engine(db, durability="sync", workflows=[workflow])
    print(f"open {os.getpid()}", flush=True)
    if run_id not in set(engine.runs()["run_id"]):
        engine.start(workflow, {"ledger": ledger, "n": int(n)}, run_id=run_id, seed=1)
    engine.run_until_idle()
    print(f"done {engine.run(run_id).status}", flush=True)
    engine.close()


if __name__ == "__main__":
    import kill9_worker  # this file again, under its importable name (see the docstring)

    kill9_worker.main(*sys.argv[1:])
