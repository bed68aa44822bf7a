"""dl.ops over a store of about a thousand runs: measured from the engine's state of each run
(plain rows, as a sweep measures) against the path it replaced, a `Run` (pandas frames)
built for every run and measured from its frames, timed in the same process.

The fleet is varied, so every column of the board has work to do: approvals with a
deadline (some answered, the others waiting and, at the later `now` read here, overdue),
waits without a deadline, durable timers, a flaky charge retried after 503s and 429s, a
charge refused for good, and model calls whose first answer is broken (billed, thrown
away). Both paths are read at the same `now` and must give the same board (checked here,
and in tests/test_ops.py); printed are the seconds each took, per run, and new / old.

    python bench/ops.py            # 1,000 runs, in memory and in a file store; 3 rounds
    python bench/ops.py --quick    # 1,000 runs in memory, 1 round (CI)
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from pandas.testing import assert_frame_equal

import durablelab as dl
from durablelab.faults import Fail, Malformed, RateLimit, ServerError
from durablelab.sim import SimLLM

HOUR = 3600.0
STEADY = dl.RetryPolicy(max_attempts=4, initial=1.0, jitter="none")
MODEL: dict = {}


def approval(ctx, order):
    ctx.activity("reserve", lambda: {"held": order}, policy=STEADY)
    decision = ctx.wait_signal("approval", deadline=ctx.now() + 2 * HOUR)
    return {"approved": bool(decision and decision["approved"])}


def unbounded(ctx, order):
    return ctx.wait_signal("approval")


def nightly(ctx, order):
    ctx.activity("reserve", lambda: {"held": order}, policy=STEADY)
    ctx.sleep(12 * HOUR)
    return order


def charge(ctx, order):
    return ctx.activity("charge", lambda: {"charged": order}, policy=STEADY)


def ask(ctx, prompt):
    return ctx.activity("ask", MODEL["llm"].complete, prompt, policy=STEADY)


def fleet(engine, n: int) -> None:
    """`n` runs of the kinds above, up to t = 600 s; one approval in four answered."""
    MODEL["llm"] = SimLLM(clock=engine.clock, seed=2)
    for i in range(n):
        kind, run_id = i % 8, f"r{i:05d}"
        if kind in (0, 1):
            engine.start(approval, i, run_id=run_id)
        elif kind == 2:
            engine.start(unbounded, i, run_id=run_id)
        elif kind == 3:
            engine.start(nightly, i, run_id=run_id)
        elif kind == 4:
            engine.start(charge, i, run_id=run_id, faults=[
                ServerError("charge", attempts=[1]), RateLimit("charge", attempts=[2])])
        elif kind == 5:
            engine.start(charge, i, run_id=run_id, faults=[Fail("charge", status=402)])
        elif kind == 6:
            engine.start(ask, f"Ticket {i}: where is my order? Answer in JSON.",
                         run_id=run_id, faults=[Malformed("ask", attempts=[1])])
        else:
            engine.start(charge, i, run_id=run_id)
    engine.run_until_blocked()
    for i in range(0, n, 32):                      # one approval in four is answered
        engine.signal(f"r{i:05d}", "approval", {"approved": True})
    engine.advance(600 - engine.clock.now())


def old_board(engine, now: float):
    """The path `dl.ops(engine)` took before: a `Run` per run, measured from its frames."""
    runs = [engine.run(run_id) for run_id in engine.runs().run_id]
    return dl.ops(runs, now=now)


def timed(fn) -> tuple[float, object]:
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def same(new, old) -> None:
    assert_frame_equal(new.workflows, old.workflows)
    assert_frame_equal(new.waiting, old.waiting)
    assert_frame_equal(new.frame, old.frame)


def compare_paths(label: str, source, engine, now: float, rounds: int, n: int) -> None:
    old_times, new_times = [], []
    for _ in range(rounds):
        took, old = timed(lambda: old_board(engine, now))
        old_times.append(took)
        took, new = timed(lambda: dl.ops(source, now=now))
        new_times.append(took)
        same(new, old)
    old_s, new_s = statistics.median(old_times), statistics.median(new_times)
    print(f"{label:>10}: old {old_s:7.3f} s ({1000 * old_s / n:5.2f} ms/run)   "
          f"new {new_s:7.3f} s ({1000 * new_s / n:5.2f} ms/run)   new/old {new_s / old_s:.3f}")
    print(f"{'':>10}  {len(new.waiting)} waiting, {len(new.overdue)} overdue at t={now:g}; "
          f"boards equal")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="in memory only, one round (CI)")
    parser.add_argument("--runs", type=int, default=1000, help="runs in the fleet")
    args = parser.parse_args()
    rounds = 1 if args.quick else 3
    now = 600 + 3 * HOUR                           # the approvals are past their deadline
    print(f"dl.ops over {args.runs} runs, read at t={now:g}s; median of {rounds} round(s)")
    with dl.Engine() as engine:
        fleet(engine, args.runs)
        compare_paths("memory", engine, engine, now, rounds, args.runs)
    if args.quick:
        return
    with tempfile.TemporaryDirectory(prefix="durablelab-bench-ops-") as folder:
        path = os.path.join(folder, "fleet.duckdb")
        with dl.Engine(path, durability="batch") as engine:
            fleet(engine, args.runs)
        # old: a read-only engine, a Run per run; new: dl.ops(path), which opens its own
        with dl.Engine(path, read_only=True) as reader:
            compare_paths("file", path, reader, now, rounds, args.runs)


if __name__ == "__main__":
    main()
