"""CPU seconds of the Brooker sweeps beside the plain simulation, sticky and replayed.

    .venv/bin/python bench/brooker_cpu.py --both --trials 3 --clients 10 50 100
    .venv/bin/python bench/brooker_cpu.py --trials 3                # sticky (dl.sweep's default)
    .venv/bin/python bench/brooker_cpu.py --no-sticky --trials 3      # replay on every wake-up
    .venv/bin/python bench/brooker_cpu.py --tree /tmp/base --no-sticky   # an older tree
    .venv/bin/python bench/brooker_cpu.py --quick      # CI: this tree, both, 1 trial, 10

bench/brooker.py --durablelab times wall seconds, which other processes on a shared
machine stretch; this counts the CPU seconds of this process (`time.process_time`), for
both the simulation (the fastest of three runs) and the `dl.sweep` of
`durablelab.examples.brooker` imported from TREE (default: this checkout), so two trees, or
sticky and replayed runs (``dl.sweep(sticky=)``, `durablelab/sticky.py`), can be compared in
one sitting. With ``--both`` each strategy runs sticky and replayed, and their tables are
compared (they must be the same, byte for byte).
"""

import argparse
import importlib.util
import inspect
import os
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", default=str(BENCH.parent),
                        help="the checkout whose durablelab runs (default: this one)")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--clients", type=int, nargs="+", default=[10, 50, 100])
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--no-sticky", action="store_true",
                     help="replay from the top on every wake-up (dl.sweep(sticky=False))")
    how.add_argument("--both", action="store_true", help="sticky and replayed, side by side")
    parser.add_argument("--quick", action="store_true", help="CI: both, 1 trial, 10 clients")
    args = parser.parse_args(argv)
    if args.quick:
        args.trials, args.clients, args.both = 1, [10], True
    tree = str(Path(args.tree).resolve())
    os.environ.setdefault("TQDM_DISABLE", "1")
    sys.path.insert(0, tree)
    import durablelab as dl
    from durablelab.examples import brooker
    if not dl.__file__.startswith(tree):
        raise SystemExit(f"durablelab came from {dl.__file__}, not {tree}: set PYTHONPATH={tree}")
    has_sticky = inspect.signature(dl.sweep).parameters.get("sticky") is not None
    modes = [True, False] if args.both else [not args.no_sticky]
    if True in modes and not has_sticky:
        raise SystemExit(f"the durablelab of {tree} has no dl.sweep(sticky=): give --no-sticky")
    spec = importlib.util.spec_from_file_location("brooker_bench", BENCH / "brooker.py")
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)

    def reproduce(clients, strategy, sticky):
        options = {"sticky": sticky} if has_sticky else {}
        began = time.process_time()
        experiment = brooker.reproduce(clients, strategy, args.trials, **options)[2]
        return time.process_time() - began, experiment

    for sticky in modes:
        reproduce(5, "full", sticky)        # imports and first-call costs, not counted
    names = {True: "sticky", False: "replayed"}
    print(f"CPU seconds, {args.trials} trials, all five strategies: the simulation of "
          f"bench/brooker.py (fastest of three) and dl.sweep of durablelab.examples.brooker")
    for clients in args.clients:
        sim = 0.0
        ours = {sticky: 0.0 for sticky in modes}
        same = True
        for strategy in brooker.STRATEGIES:
            best = float("inf")
            for _ in range(3):
                began = time.process_time()
                reference.experiment(clients, strategy, args.trials)
                best = min(best, time.process_time() - began)
            sim += best
            tables = []
            for sticky in modes:
                took, experiment = reproduce(clients, strategy, sticky)
                ours[sticky] += took
                tables.append(experiment.frame.to_csv() + experiment.load.to_csv())
            same = same and all(t == tables[0] for t in tables)
        cells = ", ".join(f"{names[sticky]} {ours[sticky]:.2f} s ({ours[sticky] / sim:.0f}x)"
                          for sticky in modes)
        check = (f"; tables {'the same' if same else 'DIFFER'}" if len(modes) > 1 else "")
        print(f"{clients:>4} clients: simulation {sim:.3f} s, {cells}{check}", flush=True)
        if not same:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
