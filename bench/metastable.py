"""How often the metastable failure of lesson 18 happens: collapsed trials per retry policy.

    .venv/bin/python bench/metastable.py                 # 20 trials: a few minutes
    .venv/bin/python bench/metastable.py --quick         # CI: 2 trials
    .venv/bin/python bench/metastable.py --trials 80     # as many as the published count
    .venv/bin/python bench/metastable.py --no-trigger    # the same load without the spike

Marc Brooker's minimal model of congestive collapse (2023), as `durablelab.examples.metastable`
builds it with the public API: Poisson arrivals at 40 a second, 80 a second for 20-25 s, a
server whose latency grows with the requests it holds, clients that time out after 3 s and
try 3 times. A trial counts as collapsed when fewer than 10 answers a second came back in
time over 60-80 s. Trial t draws its arrivals from seed t and runs as sweep seed t, so each
trial is a different schedule of requests, and the same trial gives the same answer on
every run. Printed: per policy, the collapsed trials, the mean goodput over 60-80 s, and
the count Brooker's own simulation published (63 of 80 runs without backoff, 0 of 80 with
backoff and jitter; none for the quota and the throttle, which his model does not have).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("TQDM_DISABLE", "1")

from durablelab.examples import metastable  # noqa: E402

#: collapsed runs of 80, from Brooker's simulation (../shared/research/retry-literature.md).
PUBLISHED = {"no backoff": "63 of 80", "backoff + jitter": "0 of 80"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 trials (CI)")
    parser.add_argument("--trials", type=int, default=None, help="trials (20)")
    parser.add_argument("--no-trigger", action="store_true",
                        help="40 requests a second throughout: no spike")
    args = parser.parse_args(argv)
    trials = args.trials or (2 if args.quick else 20)
    options = {"trigger": None} if args.no_trigger else {}
    started = time.perf_counter()
    collapsed = {name: 0 for name in metastable.POLICIES}
    goodput = {name: [] for name in metastable.POLICIES}
    for trial in range(trials):
        experiment = metastable.sweep(seeds=[trial], arrivals_seed=trial, **options)
        for (policy, _), value in metastable.goodput(experiment).items():
            goodput[policy].append(value)
            collapsed[policy] += value < metastable.COLLAPSED_BELOW
        print(f"trial {trial}: " + ", ".join(f"{p} {g[-1]:.1f}/s" for p, g in goodput.items()),
              flush=True)
    print(f"\nmetastable failure, {trials} trials"
          f"{' without the trigger' if args.no_trigger else ''}: goodput over 60-80 s")
    print(f"{'policy':<18} {'collapsed':>10} {'goodput /s':>11} {'published':>10}")
    for policy in metastable.POLICIES:
        published = "" if args.no_trigger else PUBLISHED.get(policy, "")
        print(f"{policy:<18} {collapsed[policy]:>4} of {trials:<3} "
              f"{statistics.fmean(goodput[policy]):>11.1f} {published:>10}")
    print(f"wall time: {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
