"""Sweep benchmark: what one run of `dl.sweep` costs, against a plain-Python floor.

    .venv/bin/python bench/sweep.py                 # 10,000 runs per configuration
    .venv/bin/python bench/sweep.py --quick         # CI: 50 runs; seconds; asserts no time
    .venv/bin/python bench/sweep.py --profile       # and cProfile the slowest world

A fault-injection experiment is thousands of runs of one workflow, and `dl.sweep` is how a
user pays for them. Here: N runs (default 10,000: one input, seeds 0 .. N-1, one cell) of a
workflow of 10 activities (`step_0` ... `step_9`), under the fault plan

    FaultPlan([ServerError("step_*", p=0.1), RateLimit("step_3", p=0.2, retry_after=2)])

with a retry policy of up to 8 attempts, in two worlds that workflow code reaches as
``ctx.world``:

  independent  each run has its own world, whose activities are pure functions of their
               arguments (`dl.sweep(..., contention=False)`: isolated runs);
  contention   every run shares one simulated service, a token bucket in the engine's
               virtual time (rate: the sweep's 10 x N calls spread over 30 virtual seconds,
               burst: a tenth of a second's worth); an empty bucket answers HTTP 429 with a
               Retry-After, which `dl.classify` turns into `RateLimited`, so runs retrying
               without enough spread really collide (`dl.sweep(..., contention=True)`).

The floor is a plain-Python loop making the same successful calls (10 per run) of the same
functions, with no engine; every figure is also printed as a ratio to it, measured in the
same run, before and after the sweeps (the lower of the two: see `main`). Timed: the whole
`dl.sweep` call, including its results landing in DuckDB and the `Experiment` built from
them. Targets (issue 11): at most 100x the floor per run on one core
in both worlds, and `processes=2` at least 1.7x the serial throughput for independent runs
(a machine with one free core cannot show that: the load average is printed beside it).
`--profile` (on by default when a target is missed, off with --quick) runs cProfile over a
sample of the slowest world and prints where the time goes, per run (the guard is off under
a profiler: both need the interpreter's profile hook). `--guard-share` runs each serial
sweep again without the determinism guard, which `dl.sweep` always keeps on, to show its
share of a run.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import functools
import gc
import os
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import durablelab as dl  # noqa: E402
from bench_engine import fmt_ratio, fmt_time, machine  # noqa: E402

perf_counter = time.perf_counter

ACTIVITIES = 10
WORLDS = ("independent", "contention")
TARGET_RUNS = 10_000
TARGET_RATIO = 100.0     # per run, against the plain loop
TARGET_SPEEDUP = 1.7     # processes=2 against serial, independent runs

POLICY = dl.RetryPolicy(max_attempts=8, initial=1.0, backoff=2.0, max_interval=30.0)


def fault_plan() -> dl.FaultPlan:
    return dl.FaultPlan([dl.faults.ServerError("step_*", p=0.1),
                         dl.faults.RateLimit("step_3", p=0.2, retry_after=2)])


# --- the world -------------------------------------------------------------------------------
class Throttled(Exception):
    """HTTP 429 from the shared service: `dl.classify` reads `status_code` and
    `retry_after` and makes it a `RateLimited`."""

    status_code = 429

    def __init__(self, retry_after: float):
        super().__init__(f"429 Too Many Requests (Retry-After {retry_after:.3f} s)")
        self.retry_after = retry_after


class SharedService:
    """One simulated service that every run calls: a token bucket refilled in the clock's
    time (the engine's virtual clock), `rate` requests a second, at most `burst` at once."""

    def __init__(self, clock, rate: float, burst: float):
        self.clock, self.rate, self.burst = clock, rate, burst
        self.tokens, self.last = burst, clock.now()
        self.calls = self.throttled = 0

    def call(self, k: int, i: int) -> dict:
        self.calls += 1
        now = self.clock.now()
        if now > self.last:
            self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
            self.last = now
        if self.tokens < 1.0:
            self.throttled += 1
            raise Throttled((1.0 - self.tokens) / self.rate)
        self.tokens -= 1.0
        return {"k": k, "i": i, "ok": True}


class Independent:
    """No shared state: each call is a pure function of its arguments."""

    def __init__(self):
        self.calls = self.throttled = 0

    def call(self, k: int, i: int) -> dict:
        self.calls += 1
        return {"k": k, "i": i, "ok": True}


class TickingClock:
    """For the floor: time moves two tokens' worth per reading, so the bucket never runs dry
    and the floor makes exactly the successful calls."""

    def __init__(self, rate: float):
        self.step, self.t = 2.0 / rate, 0.0

    def now(self) -> float:
        self.t += self.step
        return self.t


def bucket(runs: int) -> tuple[float, float]:
    """(rate, burst) of the shared service: the sweep's calls spread over 30 virtual seconds,
    and a tenth of a second's worth at once."""
    rate = ACTIVITIES * runs / 30.0
    return rate, max(1.0, rate / 10)


def make_world(world: str, runs: int, clock):
    if world == "independent":
        return Independent()
    rate, burst = bucket(runs)
    return SharedService(clock, rate, burst)


class WorldFactory:
    """`world(clock)` for `dl.sweep`: an instance, which forked `processes=` workers
    inherit (Linux); spawned workers or an executor would need a class or function."""

    def __init__(self, world: str, runs: int):
        self.world, self.runs = world, runs

    def __call__(self, clock):
        return make_world(self.world, self.runs, clock)


def sweep_workflow(ctx, inp):
    total = 0
    service = ctx.world
    for k in range(ACTIVITIES):
        total += ctx.activity(f"step_{k}", service.call, k, inp["i"], policy=POLICY)["k"]
    return total


# --- measuring -------------------------------------------------------------------------------
def floor(world: str, runs: int) -> float:
    """Seconds for a plain loop to make the same successful calls: 10 per run."""
    service = make_world(world, runs, TickingClock(bucket(runs)[0]))
    gc.collect()
    best = float("inf")
    for _ in range(3):
        t0 = perf_counter()
        for i in range(runs):
            total = 0
            for k in range(ACTIVITIES):
                total += service.call(k, 0)["k"]
        best = min(best, perf_counter() - t0)
    assert service.throttled == 0
    return best


def sweep(world: str, runs: int, processes: int | None = None,
          profile: cProfile.Profile | None = None) -> dict:
    """One `dl.sweep` of `runs` runs in `world`; its wall time and what the runs did."""
    factory = WorldFactory(world, runs)
    gc.collect()
    if profile is not None:
        profile.enable()
    t0 = perf_counter()
    experiment = dl.sweep(sweep_workflow, [{"i": 0}], policies={"policy": POLICY},
                          fault_plans={"faults": fault_plan()}, seeds=range(runs),
                          world=factory, contention=(world == "contention"),
                          processes=processes)
    total = perf_counter() - t0
    if profile is not None:
        profile.disable()
    frame = experiment.frame
    statuses = frame["status"].value_counts().to_dict()
    ended = statuses.get("completed", 0) + statuses.get("failed", 0)
    assert ended == runs, f"{runs - ended} runs did not end: {statuses}"
    return {"world": world, "processes": processes or 1, "runs": runs, "total": total,
            "completed": statuses.get("completed", 0), "failed": statuses.get("failed", 0),
            "attempts": int(frame["attempts"].sum()),
            "rate_limited": int(frame["retries_rate_limited"].sum()),
            "wakeups": int(frame["wakeups"].sum()),
            "p99": float(experiment.cells["p99"].iloc[0])}


@contextlib.contextmanager
def guard_off():
    """While inside, a sweep's engines run without the determinism guard
    (`Engine(guard=False)`), which `dl.sweep` never asks for: only to measure what the
    guard costs a sweep, beside the same sweep with it."""
    from durablelab.experiments import runner
    engine = runner.Engine
    runner.Engine = functools.partial(engine, guard=False)
    try:
        yield
    finally:
        runner.Engine = engine


# --- profiling -------------------------------------------------------------------------------
def area(filename: str, name: str) -> str:
    if "durablelab/experiments" in filename:
        return "durablelab.experiments: the sweep, metrics, results"
    if "durablelab/store.py" in filename:
        return "durablelab.store: DuckDB statements (C time counted here)"
    if "durablelab" in filename:
        return "durablelab engine, context, history, faults (Python)"
    if "duckdb" in name.lower() or "duckdb" in filename:
        return "DuckDB (execute, register, fetch)"
    if "pyarrow" in filename or "pyarrow" in name:
        return "pyarrow (building batches)"
    if "json" in filename:
        return "json"
    if "random" in filename or "Random" in name:
        return "random (seeded generators)"
    if "bench/sweep.py" in filename:
        return "the benchmark's workflow and service"
    return "other"


def report_profile(profile: cProfile.Profile, runs: int, label: str, wall: float) -> list[str]:
    stats = pstats.Stats(profile)
    rows = []
    by_area: dict[str, float] = {}
    for (filename, line, name), (cc, nc, tt, ct, callers) in stats.stats.items():
        rows.append((tt, ct, nc, filename, line, name))
        key = area(filename, name)
        by_area[key] = by_area.get(key, 0.0) + tt
    total = sum(r[0] for r in rows)
    out = [f"profile: {label}, {runs:,} runs under cProfile ({wall:.2f} s with the profiler, "
           f"{total:.2f} s of function time)", "",
           "where the time goes (own time, by area)             per run     share"]
    for key, tt in sorted(by_area.items(), key=lambda kv: -kv[1]):
        out.append(f"  {key:<50} {fmt_time(tt / runs):>9}  {tt / total:6.1%}")
    out += ["", "top functions by own time           calls/run   own/run   cumul/run  function"]
    for tt, ct, nc, filename, line, name in sorted(rows, key=lambda r: -r[0])[:18]:
        where = f"{Path(filename).name}:{line}({name})" if line else name
        out.append(f"  {nc / runs:>31.1f}  {fmt_time(tt / runs):>8}  {fmt_time(ct / runs):>9}"
                   f"  {where}")
    out += ["", "top durablelab functions by cumulative time     calls/run  cumul/run  function"]
    mine = [r for r in rows if "durablelab" in r[3]]
    for tt, ct, nc, filename, line, name in sorted(mine, key=lambda r: -r[1])[:12]:
        out.append(f"  {nc / runs:>45.1f}  {fmt_time(ct / runs):>9}  "
                   f"{Path(filename).name}:{line}({name})")
    return out


# --- main --------------------------------------------------------------------------------------
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="50 runs (CI smoke run; seconds; never asserts a time)")
    parser.add_argument("--runs", type=int, help="runs per configuration (default 10,000)")
    parser.add_argument("--worlds", nargs="+", choices=WORLDS, default=list(WORLDS))
    parser.add_argument("--profile", action=argparse.BooleanOptionalAction, default=None,
                        help="cProfile a sample of the slowest world (default: on when a "
                             "target is missed, off with --quick)")
    parser.add_argument("--guard-share", action="store_true",
                        help="also run each serial sweep without the determinism guard, to "
                             "show what share of a run the guard costs")
    parser.add_argument("--profile-runs", type=int, default=1000,
                        help="runs in the profiled sample (default 1,000)")
    args = parser.parse_args(argv)
    runs = args.runs or (50 if args.quick else TARGET_RUNS)
    if runs < 1:
        parser.error("--runs >= 1")

    print("durablelab sweep benchmark: dl.sweep" + (" (--quick)" if args.quick else ""))
    for line in machine():
        print(line)
    print(f"workload  {runs:,} runs x {ACTIVITIES} activities, one cell, in memory, "
          f"faults {fault_plan().to_json()}")
    print(f"          retry {POLICY}")
    print(f"          contention: one token bucket for all runs, "
          f"{bucket(runs)[0]:,.0f} calls per virtual second, burst {bucket(runs)[1]:,.0f}",
          flush=True)

    started = perf_counter()
    header = ("world", "how", "runs", "total", "runs/s", "× floor", "per run", "completed",
              "failed", "attempts/run", "429s/run", "wake-ups/run", "p99 (virtual)")
    widths = (11, 12, 6, 8, 7, 8, 8, 9, 6, 12, 8, 12, 13)

    def show(line):
        print("  ".join(f"{c:<{w}}" if j < 2 else f"{c:>{w}}"
                        for j, (c, w) in enumerate(zip(line, widths))).rstrip(), flush=True)

    def row(r, base):
        return (r["world"], "serial" if r["processes"] == 1 else f"processes={r['processes']}",
                f"{r['runs']:,}", fmt_time(r["total"]), f"{r['runs'] / r['total']:,.0f}",
                fmt_ratio(r["total"] / base), fmt_time(r["total"] / r["runs"]),
                f"{r['completed']:,}", f"{r['failed']:,}", f"{r['attempts'] / r['runs']:.1f}",
                f"{r['rate_limited'] / r['runs']:.1f}", f"{r['wakeups'] / r['runs']:.1f}",
                f"{r['p99']:,.1f} s")

    print()
    show(header)
    print("  ".join("-" * w for w in widths))
    serial, parallel, floors, spread = {}, None, {}, []
    for world in args.worlds:
        # The floor is a loop of milliseconds, so a busy moment on a shared machine moves it
        # more than anything it is compared with: measured before and after the sweeps, and
        # the lower (the loop's own cost) is the one every ratio uses.
        before = floor(world, runs)
        serial[world] = sweep(world, runs)
        if world == "independent":
            parallel = sweep(world, runs, processes=2)
        after = floor(world, runs)
        base = floors[world] = min(before, after)
        spread.append(f"floor     {world}: {fmt_time(before / runs)} a run before the sweeps, "
                      f"{fmt_time(after / runs)} after (the lower is used)")
        show((world, "plain loop", f"{runs:,}", fmt_time(base), f"{runs / base:,.0f}", "1",
              fmt_time(base / runs), "", "", f"{ACTIVITIES:.1f}", "0", "", ""))
        show(row(serial[world], base))
        if world == "independent":
            show(row(parallel, base))
        if args.guard_share:
            with guard_off():
                unguarded = sweep(world, runs)
            show(row(unguarded, base)[:1] + ("no guard",) + row(unguarded, base)[2:])
            share = 1 - unguarded["total"] / serial[world]["total"]
            spread.append(f"guard     {world}: {share:.0%} of a serial run's time is the "
                          f"determinism guard's")
    print()
    for line in spread:
        print(line)
    missed = []
    for world, r in serial.items():
        ratio = r["total"] / floors[world]
        ok = ratio <= TARGET_RATIO
        missed += [] if ok else [world]
        print(f"target    per run <= {TARGET_RATIO:g}x the floor, {world}: "
              f"{'met' if ok else 'MISSED'} ({ratio:,.0f}x)")
    if parallel is not None:
        speedup = serial["independent"]["total"] / parallel["total"]
        ok = speedup >= TARGET_SPEEDUP
        missed += [] if ok else ["processes"]
        print(f"target    processes=2 >= {TARGET_SPEEDUP:g}x serial throughput, independent: "
              f"{'met' if ok else 'MISSED'} ({speedup:.2f}x; {os.cpu_count()} CPUs, "
              f"{machine()[0].split('), ')[-1]})")
    profile = args.profile if args.profile is not None else (bool(missed) and not args.quick)
    if profile and serial:
        worst = max(serial.values(), key=lambda r: r["total"] / floors[r["world"]])
        sample = min(args.profile_runs, runs)
        print()
        profiler = cProfile.Profile()
        t0 = perf_counter()
        sweep(worst["world"], sample, profile=profiler)
        wall = perf_counter() - t0
        for line in report_profile(profiler, sample, f"{worst['world']}, dl.sweep", wall):
            print(line)
    print(f"\ntook {perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
