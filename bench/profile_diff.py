"""What two checkouts do differently on the sequential path: calls counted, then times.

    .venv/bin/python bench/profile_diff.py ../before .                # calls, then 5 rounds
    .venv/bin/python bench/profile_diff.py ../before . --rounds 9     # tighter times
    .venv/bin/python bench/profile_diff.py --quick                    # CI: this checkout twice

Wall time on a shared machine moves by more than a small change costs, so this starts with
what does not move: a cProfile of the same work in each tree, its total calls and every
function whose call count differs, per replayed event or step. A change that adds work per
event shows up there on any machine. Then the times: each tree's package runs the same
scenarios in a child process (PYTHONPATH set to the tree), rounds alternating the order
(before, after, then after, before), and the best sample of all rounds is kept per side,
since load from other processes only ever adds time; wall time and the process's CPU time.

Scenarios (as bench/bench_engine.py measures them):
  recovery  figure 4: a file whose run has N committed steps and waits on a signal; a new
            Engine opens it (open + load) and run_until_idle() replays it to waiting;
  fresh     figure 3: a fresh N-step run in sync mode, on a file and in memory, per step;
  warm      figure 5: a wake-up of a waiting N-step run whose arguments matched before
            (the guard on, as by default), per event.
The profile of "warm" runs without the guard: a profiler takes the hook the guard uses.
Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

perf_counter, process_time = time.perf_counter, time.process_time
HERE = Path(__file__).resolve()


# --- the workload (bench_engine.py's) -----------------------------------------------------------
# Copied, not imported: bench_engine.py imports names of today's package (store.encoded, ...)
# that an older checkout's package, which the child process runs, may not have.
def step(i):
    return {"i": i, "ok": True}


def steps(ctx, n):
    for i in range(n):
        ctx.activity("step", step, i)
    return n


def steps_then_wait(ctx, n):
    for i in range(n):
        ctx.activity("step", step, i)
    return ctx.wait_signal("go")


# --- in the child: one tree's package ------------------------------------------------------
def scenarios(tmp: Path, n: int):
    """name -> (units, sample): `sample()` does the work once and returns {part: (wall
    seconds, CPU seconds of this process)}; `sample(profile)` profiles the part profiled."""
    import durablelab as dl

    source = tmp / "recover-source.duckdb"
    with dl.Engine(source, durability="batch") as engine:
        engine.start(steps_then_wait, n, run_id="recover")
        engine.run_until_idle()

    def recovery(profile=None):
        path = tmp / "recover.duckdb"
        shutil.copyfile(source, path)
        gc.collect()
        t0, c0 = perf_counter(), process_time()
        engine = dl.Engine(path, workflows=[steps_then_wait])
        t1, c1 = perf_counter(), process_time()
        if profile:
            profile.enable()
        engine.run_until_idle()
        if profile:
            profile.disable()
        t2, c2 = perf_counter(), process_time()
        assert engine.run("recover").status == "waiting"
        engine.close()
        path.unlink()
        return {"recovery: open + load": (t1 - t0, c1 - c0),
                "recovery: replay to waiting": (t2 - t1, c2 - c1)}

    def fresh(profile=None):
        out = {}
        for label, path in (("fresh sync step, file", tmp / "fresh.duckdb"),
                            ("fresh sync step, in memory", None)):
            engine = dl.Engine(path, durability="sync")
            gc.collect()
            if profile and path is None:
                profile.enable()
            t0, c0 = perf_counter(), process_time()
            run_id = engine.start(steps, n)
            engine.run_until_idle()
            out[label] = ((perf_counter() - t0) / n, (process_time() - c0) / n)
            if profile and path is None:
                profile.disable()
            assert engine.run(run_id).status == "completed"
            engine.close()
            if path is not None:
                path.unlink()
        return out

    engine = dl.Engine(guard=True)
    engine.start(steps_then_wait, n, run_id="warm")
    engine.run_until_idle()
    state = engine._runs["warm"]
    engine._wake(state, "signal")                      # the arguments have matched once

    def warm(profile=None):
        gc.collect()
        if profile:
            profile.enable()
        t0, c0 = perf_counter(), process_time()
        engine._wake(state, "signal")
        elapsed, cpu = perf_counter() - t0, process_time() - c0
        if profile:
            profile.disable()
        assert state.status == "waiting"
        engine._telemetry.clear()
        return {"warm wake-up replay": (elapsed / (n + 1), cpu / (n + 1))}

    return {"recovery": (n, recovery), "fresh": (n, fresh), "warm": (n + 1, warm)}


def child(args) -> None:
    warnings.simplefilter("ignore")                    # GuardOffWarning under the profiler
    with tempfile.TemporaryDirectory() as tmp:
        runs = scenarios(Path(tmp), args.n)
        if args.profile:
            out = {}
            for name, (units, sample) in runs.items():
                sample()                                   # warm: imports, caches
                profile = cProfile.Profile()
                sample(profile)
                # The profiler's own entries, summed by name: pstats keys functions by
                # (file, line, name), and every dataclass's __init__ is "<string>", line 1.
                calls: dict[str, list] = {}   # function -> [calls, seconds in its own body]
                for entry in profile.getstats():
                    code = entry.code
                    if isinstance(code, str):   # a built-in: named without its address
                        key = "builtin:" + re.sub(r" at 0x[0-9a-f]+", "", code)
                    else:
                        file = code.co_filename
                        where = file.rpartition("/durablelab/")[2] if "/durablelab/" in file \
                            else Path(file).name
                        key = f"{where}:{code.co_name}"
                    kept = calls.setdefault(key, [0, 0.0])
                    kept[0] += entry.callcount
                    kept[1] += entry.inlinetime
                total = sum(ncalls for ncalls, _ in calls.values())
                out[name] = {"units": units, "total": total, "calls": calls}
        else:
            out = {}
            for _ in range(args.repeats):
                for _, sample in runs.values():
                    for part, (wall, cpu) in sample().items():
                        best = out.get(part, (float("inf"), float("inf")))
                        out[part] = (min(best[0], wall), min(best[1], cpu))
    print(json.dumps(out))


# --- in the parent: two trees ----------------------------------------------------------------
def run_child(tree: Path, *extra: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, str(HERE), "--child", *extra], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{tree}: the child failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def fmt_time(seconds: float) -> str:
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if seconds >= scale or unit == "µs":
            return f"{seconds / scale:.3g} {unit}"
    raise AssertionError


def compare_calls(before: Path, after: Path, n: int, rounds: int) -> None:
    """Call counts (the same in every profile of a tree), then each function's own time
    under the profiler, the best of `rounds` profiles a side, alternating."""
    sides: list[dict] = [{}, {}]
    for r in range(rounds):
        for side in ((0, 1) if r % 2 == 0 else (1, 0)):
            got = run_child((before, after)[side], "--profile", "--n", str(n))
            for name, profiled in got.items():
                kept = sides[side].setdefault(name, profiled)
                for key, (ncalls, tottime) in profiled["calls"].items():
                    held = kept["calls"].setdefault(key, [ncalls, tottime])
                    held[1] = min(held[1], tottime)
    for name in sides[0]:
        b, a = sides[0][name], sides[1][name]
        units = b["units"]
        print(f"\n{name}: total calls {b['total']:,} before, {a['total']:,} after "
              f"({(a['total'] - b['total']) / units:+.2f} per event or step)")
        every = set(a["calls"]) | set(b["calls"])
        count = {key: (b["calls"].get(key, [0, 0.0]), a["calls"].get(key, [0, 0.0]))
                 for key in every}
        changed = [(was[0], now[0], key) for key, (was, now) in count.items()
                   if was[0] != now[0]]
        per_unit = [row for row in changed if abs(row[1] - row[0]) >= units // 2]
        print(f"  functions whose count differs: {len(changed)}, by one or more per "
              f"event or step: {len(per_unit)}")
        for was, now, key in sorted(per_unit, key=lambda row: -abs(row[1] - row[0])):
            print(f"    {now - was:+8d}  {(now - was) / units:+.2f}/unit  {key}")
        own = {key: (was[1], now[1]) for key, (was, now) in count.items()}
        total_b, total_a = (sum(t[i] for t in own.values()) for i in (0, 1))
        print(f"  own time under the profiler, best of {rounds}: {total_b * 1e3:.2f} ms "
              f"before, {total_a * 1e3:.2f} ms after ({total_a / total_b:.3f}); most moved:")
        for key in sorted(own, key=lambda k: -abs(own[k][1] - own[k][0]))[:6]:
            was, now = own[key]
            print(f"    {(now - was) / units * 1e9:+7.0f} ns/unit  {was * 1e3:7.3f} -> "
                  f"{now * 1e3:7.3f} ms  {key}")


def compare_times(before: Path, after: Path, n: int, rounds: int, repeats: int) -> None:
    best: dict[str, dict[str, list]] = {"before": {}, "after": {}}
    for r in range(rounds):
        order = ("before", "after") if r % 2 == 0 else ("after", "before")
        for side in order:
            tree = before if side == "before" else after
            got = run_child(tree, "--n", str(n), "--repeats", str(repeats))
            for part, times in got.items():
                kept = best[side].setdefault(part, [float("inf"), float("inf")])
                best[side][part] = [min(k, t) for k, t in zip(kept, times)]
        print(f"  round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    # CPU time leaves out what the process waited for (a commit's fsync, a core another
    # process held), so on a shared machine it moves less than wall time.
    print(f"\nbest of {rounds} rounds x {repeats} repeats, N={n}; wall time, then CPU time "
          f"of the process")
    print(f"  {'':32s} {'before':>9s} {'after':>9s} {'ratio':>6s}   {'before':>9s} "
          f"{'after':>9s} {'ratio':>6s}")
    for part, b in best["before"].items():
        a = best["after"].get(part)
        if a is None:
            continue
        unit = "" if part.startswith("recovery") else " /step" if "fresh" in part else " /event"
        print(f"  {part + unit:32s} {fmt_time(b[0]):>9s} {fmt_time(a[0]):>9s} "
              f"{a[0] / b[0]:6.3f}   {fmt_time(b[1]):>9s} {fmt_time(a[1]):>9s} "
              f"{a[1] / b[1]:6.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before", nargs="?", default=str(HERE.parent.parent),
                        help="the source tree before (default: this checkout)")
    parser.add_argument("after", nargs="?", default=str(HERE.parent.parent),
                        help="the source tree after (default: this checkout)")
    parser.add_argument("--n", type=int, default=None, help="steps per run (default 1000)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per side (default 5)")
    parser.add_argument("--repeats", type=int, default=None,
                        help="samples per scenario in each round (default 5)")
    parser.add_argument("--quick", action="store_true", help="CI: small sizes, 1 round")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    for name in ("n", "rounds", "repeats"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name} must be at least 1, not {value}")
    args.n = args.n or (50 if args.quick else 1000)
    if args.child:
        args.repeats = args.repeats or 1
        return child(args)
    rounds = args.rounds or (1 if args.quick else 5)
    repeats = args.repeats or (1 if args.quick else 5)
    before, after = Path(args.before).resolve(), Path(args.after).resolve()
    for tree in (before, after):
        if not (tree / "durablelab" / "__init__.py").exists():
            parser.error(f"{tree} is not a durablelab source tree (no durablelab/__init__.py)")
    print(f"before    {before}\nafter     {after}")
    compare_calls(before, after, args.n, rounds)
    compare_times(before, after, args.n, rounds, repeats)


if __name__ == "__main__":
    main()
