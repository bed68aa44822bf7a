"""Where a sticky Brooker sweep spends its time: cProfile, and a sampling profile beside it.

    .venv/bin/python bench/brooker_profile.py                 # 100 clients, 1 trial, sticky
    .venv/bin/python bench/brooker_profile.py --no-sticky --clients 50
    .venv/bin/python bench/brooker_profile.py --quick         # CI: 10 clients, "full" only

Runs `durablelab.examples.brooker.reproduce` for every strategy and prints two profiles:

- cProfile's top 25 functions by own time (``tottime``). Under a profiler the determinism
  guard is off (it needs the same interpreter hook), and cProfile keeps one call stack for
  the thread, so a frame waiting in a greenlet (`durablelab/sticky.py`) can be charged
  time it spent switched out: its per-function figures are approximate.
- A sampling profile (SIGPROF every millisecond of CPU): each sample charges the innermost
  frame of whichever greenlet is running, so waiting frames are charged nothing; shown by
  function and by module, as a share of the samples. The guard stays on here.

It also prints, without the profilers, the CPU a one-client sweep costs (what every sweep
pays whatever its runs do), the attempts the sweeps made and CPU per attempt, so a cut can
be read as microseconds per attempt.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import signal
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def sweeps(clients: int, trials: int, strategies, sticky: bool) -> int:
    """Run the sweeps; the attempts they made."""
    from durablelab.examples import brooker
    attempts = 0
    for strategy in strategies:
        experiment = brooker.reproduce(clients, strategy, trials, sticky=sticky)[2]
        attempts += int(experiment.frame.attempts.sum())
    return attempts


def sampled(run, interval: float = 0.001) -> tuple[collections.Counter, collections.Counter]:
    """Samples of `run()`'s innermost frame, by function and by file."""
    functions: collections.Counter = collections.Counter()
    files: collections.Counter = collections.Counter()

    def sample(signum, frame):
        code = frame.f_code
        functions[f"{Path(code.co_filename).name}:{code.co_firstlineno}({code.co_name})"] += 1
        files[_module(code.co_filename)] += 1

    before = signal.signal(signal.SIGPROF, sample)
    signal.setitimer(signal.ITIMER_PROF, interval, interval)
    try:
        run()
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        signal.signal(signal.SIGPROF, before)
    return functions, files


def _module(filename: str) -> str:
    path = filename.replace("\\", "/")
    if "/durablelab/" in path:
        return "durablelab/" + path.rsplit("/durablelab/", 1)[1]
    if "/site-packages/" in path:
        return path.rsplit("/site-packages/", 1)[1].split("/")[0] + " (library)"
    if path.startswith("<"):
        return path
    return Path(path).name + " (stdlib)"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--no-sticky", action="store_true", help="replayed on every wake-up")
    parser.add_argument("--quick", action="store_true", help="CI: 10 clients, one strategy")
    args = parser.parse_args(argv)
    os.environ.setdefault("TQDM_DISABLE", "1")
    from durablelab.examples import brooker
    strategies = ("full",) if args.quick else brooker.STRATEGIES
    clients = 10 if args.quick else args.clients
    sticky = not args.no_sticky
    sweeps(5, 1, ("full",), sticky)          # imports and first calls, not counted

    began = time.process_time()
    attempts = sweeps(clients, args.trials, strategies, sticky)
    took = time.process_time() - began
    began = time.process_time()
    for _ in range(10):
        sweeps(1, 1, ("full",), sticky)
    print(f"a sweep of 1 client, 1 trial: {100 * (time.process_time() - began):.1f} ms CPU "
          f"(the fixed cost of a sweep)")
    print(f"{clients} clients, {args.trials} trial(s), {', '.join(strategies)}, "
          f"{'sticky' if sticky else 'replayed'}: {attempts} attempts, {took:.2f} s CPU, "
          f"{1e6 * took / attempts:.0f} us CPU per attempt (no profiler)")

    profile = cProfile.Profile()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")    # the guard's GuardOffWarning under a profiler
        profile.enable()
        sweeps(clients, args.trials, strategies, sticky)
        profile.disable()
    print("\ncProfile, top 25 by own time (approximate across greenlet switches):")
    pstats.Stats(profile, stream=sys.stdout).sort_stats("tottime").print_stats(25)

    functions, files = sampled(lambda: sweeps(clients, args.trials, strategies, sticky))
    total = sum(functions.values()) or 1
    print(f"sampling profile: {total} samples of 1 ms CPU; own time by function:")
    for name, n in functions.most_common(25):
        print(f"{100 * n / total:6.1f}%  {name}")
    print("\nown time by module:")
    for name, n in files.most_common(20):
        print(f"{100 * n / total:6.1f}%  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
