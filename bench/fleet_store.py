"""Lesson 16's fleet (200 support tickets, midnight to 18:00) in memory and in a DuckDB file,
in each durability mode: where a file store's time goes.

A file store pays a commit (an fsync) for what its mode makes durable: in ``sync`` mode each
event before the code sees it, each run's start, signal and end, and each change of status
(a run stored ``waiting``). Printed for each store: seconds for the day, the commits it made
(DuckDB transactions: `Store._committed` calls plus checkpoints), milliseconds per commit,
the time relative to memory, and what the commits made durable. ``--profile`` adds the
functions that took the most time in the sync file store (cProfile), to see that commits
are what it pays for.

    python bench/fleet_store.py              # memory, sync, batch, exit; median of 3
    python bench/fleet_store.py --profile    # and cProfile of the sync file store
    python bench/fleet_store.py --quick      # 50 tickets, memory and sync, 1 round (CI)
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time
import warnings
from collections import Counter

import durablelab as dl
from durablelab.examples import support
from durablelab.examples.support import HOUR
from durablelab.store import Store

COMMITS = {"n": 0, "checkpoints": 0}
WHY: Counter = Counter()

#: what a commit made durable, by the engine's or the journal's function that asked for it
#: (and, for a journal's flush, the one that asked the journal).
REASONS = {
    ("journal.py", "record"): "an event or a failed attempt's row (sync: each one)",
    ("journal.py", "turn_ended"): "a turn's end: its change of status (sync), its rows (batch)",
    ("journal.py", "end"): "a run's end, with its rows or its wake-up rows",
    ("engine.py", "_start"): "a run's start (every mode)",
    ("engine.py", "signal"): "a signal (every mode)",
    ("engine.py", "_flush_telemetry"): "wake-up rows alone, at the end of advance()",
    ("engine.py", "close"): "what waited, at a clean close",
}


def _reason() -> str:
    """Why the store commits now: the first caller outside the store that `REASONS` names."""
    frame = sys._getframe(2)
    while frame is not None:
        key = (os.path.basename(frame.f_code.co_filename), frame.f_code.co_name)
        if key in REASONS and key != ("journal.py", "flush"):
            return REASONS[key]
        frame = frame.f_back
    return "other"


def counting() -> None:
    """Count the store's commits, why each was made, and its checkpoints (wrapping two of
    `Store`'s methods)."""
    committed, checkpoint = Store._committed, Store.checkpoint

    def _committed(self):
        if self.path is not None:
            COMMITS["n"] += 1
            WHY[_reason()] += 1
        return committed(self)

    def _checkpoint(self):
        before = self.uncheckpointed
        checkpoint(self)
        if self.path is not None and before and not self.uncheckpointed:
            COMMITS["checkpoints"] += 1

    Store._committed, Store.checkpoint = _committed, _checkpoint


def day(path, durability: str, n: int) -> dl.Engine:
    engine = dl.Engine(path, durability=durability)
    engine.world = support.SupportWorld(engine.clock)
    support.Day(engine, n=n, seed=17).run_until(18 * HOUR)
    engine.close()
    return engine


def timed(folder: str, store: str, durability: str, n: int) -> tuple[float, int, int]:
    path = None if store == "memory" else os.path.join(folder, f"{durability}-{time.time_ns()}"
                                                                ".duckdb")
    COMMITS.update(n=0, checkpoints=0)
    WHY.clear()
    started = time.perf_counter()
    day(path, durability, n)
    return time.perf_counter() - started, COMMITS["n"], COMMITS["checkpoints"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50 tickets, 1 round (CI)")
    parser.add_argument("--profile", action="store_true",
                        help="also profile the sync file store (cProfile)")
    args = parser.parse_args()
    n, rounds = (50, 1) if args.quick else (200, 3)
    cases = [("memory", "sync"), ("file", "sync")] + (
        [] if args.quick else [("file", "batch"), ("file", "exit")])
    counting()
    with tempfile.TemporaryDirectory(prefix="durablelab-bench-fleet-") as folder:
        day(None, "sync", 5)                       # imports, the documents' text: once
        print(f"a day of {n} tickets, midnight to 18:00; median of {rounds} round(s)")
        memory = None
        for store, durability in cases:
            found = [timed(folder, store, durability, n) for _ in range(rounds)]
            seconds = statistics.median(f[0] for f in found)
            commits, checkpoints = found[0][1], found[0][2]
            memory = seconds if store == "memory" else memory
            per = (f"{1000 * (seconds - memory) / commits:5.2f} ms/commit over memory"
                   if commits else "")
            print(f"  {store:6} {durability:5}: {seconds:7.2f} s  {seconds / memory:6.1f}x "
                  f"memory  {commits:5d} commits, {checkpoints:3d} checkpoints  {per}")
            for reason, count in WHY.most_common():
                print(f"{count:52d}  {reason}")
        if args.profile:
            path = os.path.join(folder, "profiled.duckdb")
            profile = cProfile.Profile()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")     # the guard is off under a profiler
                profile.runcall(day, path, "sync", n)
            print("\nsync file store, by own time (cProfile):")
            pstats.Stats(profile).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main()
