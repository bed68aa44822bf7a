"""Replay-check benchmark: is `dl.replay_check` fast enough for CI on real volumes?

    .venv/bin/python bench/bench_replay_check.py           # 10,000 onboarding runs, 5 repeats
    .venv/bin/python bench/bench_replay_check.py --quick   # 500 runs, 1 repeat

A CI job replays every recorded run from a file, so each replay is a *first* replay: no
argument has been matched before and each call's arguments are compared by digest. The
yardstick is therefore the engine's own first replay after a load (bench_engine.py's
figure 1), measured here in the same run on the same histories: one engine opens the file,
loads a sample of ended runs, and replays each from the top with a fresh cursor and
context, as `Engine._wake` does. `replay_check` is then timed over the whole file, from
opening it (read-only, as the store opens it: sealed, its tables checked) to the report:
reading its runs, events and attempts, decoding, replaying every run.
Both are per event, and the ratio is taken within each repeat.

The workload: N runs of the onboarding example (durablelab.examples.onboarding), version 1,
recorded in memory and copied to a DuckDB file: a third rejected or declined, the rest
approved and completed, about 12 events a run. They are checked against version 2 with its
change behind ctx.patched (every run replays) and without (the completed, approved ones
diverge), so both the happy path and the report of thousands of divergences are timed.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

import durablelab as dl
from durablelab import history as h
from durablelab.context import Context
from durablelab.registry import workflow_name
from durablelab.examples import onboarding as ob
from durablelab.loading import fill
from durablelab.versioning import _runs_in_store

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_engine import machine  # noqa: E402

perf_counter = time.perf_counter


def record(path: Path, n: int) -> int:
    """N version-1 runs in a DuckDB file at `path`; returns the number of events."""
    ob.world.reset()
    # Written straight to the file, each run committed once when it ends: a sealed store
    # (durablelab/store.py, SEALED) copies nothing to or from another file.
    engine = dl.Engine(path, durability="exit", workflows=[ob.onboard_vendor])
    for i in range(n):
        vendor = "v-77" if i % 6 == 5 else "v-42"          # some are rejected by screening
        engine.start(ob.onboard_vendor, {"vendor_id": vendor}, run_id=f"run-{i:05d}", seed=i)
    engine.advance(3600)                                    # all wait for their approval
    for i in range(n):
        if i % 6 not in (4, 5):
            engine.signal(f"run-{i:05d}", "approval", {"approved": i % 6 != 3})
    engine.run_until_idle()                                 # and the rest time out
    statuses = set(engine.runs()["status"])
    assert statuses == {"completed"}, statuses
    engine.store.flush()
    events = engine.store.fetch("SELECT count(*) FROM event_log")[0][0]
    engine.close()
    return events


def engine_first_replay(path: Path, sample: int) -> tuple[float, int]:
    """Seconds per event of the engine's first replay after a load, over `sample` runs."""
    engine = dl.Engine(path, workflows=[ob.onboard_vendor])
    try:
        # The sample's histories in one load, as engine.run() loads an ended run's (a query
        # per run would cost minutes here and is not what is timed).
        ids = sorted(engine._runs)[:sample]
        states = [engine._runs[run_id] for run_id in ids]
        for state in states:
            state.history = []
        fill(engine._runs, engine.store.load("run_id IN (SELECT unnest(?))", [ids]), engine.path)
        for state in states:
            for event in state.history:
                event.matched_args = None             # as right after a load
        events = sum(len(s.history) for s in states)
        gc.collect()
        t0 = perf_counter()
        for state in states:
            cursor = h.Cursor(state.history, state.run_id, state.workflow)
            ob.onboard_vendor(Context(engine._port, state, cursor),
                              {"vendor_id": _vendor(state)})
            assert cursor.expect_end() is None and cursor.replayed == len(state.history)
        elapsed = perf_counter() - t0
    finally:
        engine.close()
    return elapsed / events, events


def _vendor(state) -> str:
    import json
    return json.loads(state.input_json)["vendor_id"]


def timed_check(workflow, path: Path) -> tuple[float, dl.ReplayReport]:
    gc.collect()
    t0 = perf_counter()
    report = dl.replay_check(workflow, path)
    return perf_counter() - t0, report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="500 runs, 1 repeat")
    parser.add_argument("--runs", type=int, help="recorded runs (default 10,000)")
    parser.add_argument("--repeats", type=int, help="repeats (default 5)")
    args = parser.parse_args(argv)
    n = args.runs or (500 if args.quick else 10_000)
    repeats = args.repeats or (1 if args.quick else 5)
    print("durablelab replay-check benchmark" + (" (--quick)" if args.quick else ""))
    for line in machine():
        print(line)
    started = perf_counter()
    rows: dict[str, list] = {}
    with tempfile.TemporaryDirectory(prefix="durablelab-bench-") as tmp:
        path = Path(tmp) / "onboarding-v1.duckdb"
        events = record(path, n)
        print(f"sizes     {n:,} recorded onboarding runs (version 1), {events:,} events, "
              f"{repeats} repeat{'s' if repeats > 1 else ''}", flush=True)
        for _ in range(repeats):
            base, sampled = engine_first_replay(path, min(n, 1000))
            rows.setdefault("engine", []).append((base, 1.0))
            for label, workflow in (("patched", ob.onboard_vendor_v2),
                                    ("unpatched", ob.onboard_vendor_v2_unpatched)):
                seconds, report = timed_check(workflow, path)
                assert len(report.frame) == n and report.events == events
                if label == "patched":
                    assert report.ok, str(report)
                else:
                    assert len(report.diverged) > 0
                    str(report)   # the grouped text is part of what CI pays for
                    diverged = len(report.diverged)
                rows.setdefault(label, []).append((seconds / events, seconds / events / base))
                rows.setdefault(label + " total", []).append((seconds, None))
            # The part no engine figure includes: reading the file (opening it, its queries,
            # decoding every body into Events).
            gc.collect()
            t0 = perf_counter()
            loaded = _runs_in_store(workflow_name(ob.onboard_vendor), path)
            read = perf_counter() - t0
            assert sum(len(run[4]) for run in loaded) == events
            rows.setdefault("read", []).append((read / events, read / events / base))

    def med(values):
        return statistics.median(values)

    print()
    print(f"{'measurement':<58} {'per event':>10} {'× engine first replay':>22}")
    print("-" * 92)
    engine = [v for v, _ in rows["engine"]]
    print(f"{'engine: first replay after a load (sample of ' + format(sampled, ',') + ' events)':<58} "
          f"{med(engine) * 1e6:>7.2f} µs {'1':>22}")
    for label, what in (("patched", "v2 with ctx.patched: every run replays"),
                        ("unpatched", f"v2 unpatched: {diverged:,} runs diverge")):
        per = [v for v, _ in rows[label]]
        ratio = [r for _, r in rows[label]]
        total = med([v for v, _ in rows[label + " total"]])
        print(f"{'replay_check, ' + what:<58} {med(per) * 1e6:>7.2f} µs "
              f"{med(ratio):>11.2f} [{min(ratio):.2f}–{max(ratio):.2f}]")
        print(f"{'  · the whole check of ' + format(n, ',') + ' runs, open to report':<58} "
              f"{total:>8.2f} s")
    per = [v for v, _ in rows["read"]]
    ratio = [r for _, r in rows["read"]]
    print(f"{'  · of which reading the file (open, queries, decoding)':<58} "
          f"{med(per) * 1e6:>7.2f} µs {med(ratio):>11.2f} [{min(ratio):.2f}–{max(ratio):.2f}]")
    print(f"\ntook {perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
