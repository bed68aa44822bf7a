"""CPU seconds of the Brooker sweeps beside the plain simulation, for comparing two trees on
a busy machine.

    .venv/bin/python bench/brooker_cpu.py TREE [replayed|parked] TRIALS CLIENTS...
    .venv/bin/python bench/brooker_cpu.py /tmp/base replayed 3 10 50 100   # an older tree
    .venv/bin/python bench/brooker_cpu.py . parked 3 10 50 100             # the prototype
    .venv/bin/python bench/brooker_cpu.py --quick      # CI: this tree, replayed, 1 trial, 10

bench/brooker.py --durablelab times wall seconds, which other processes on a shared
machine stretch; this counts the CPU seconds of this process (`time.process_time`), for
both the simulation (the fastest of three runs) and the `dl.sweep` of
`durablelab.examples.brooker` imported from TREE, so two trees can be compared in one
sitting. ``parked`` runs the sweeps on bench/parked_prototype.py's engine.
"""

import importlib
import importlib.util
import os
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def main(argv) -> int:
    if argv == ["--quick"]:   # CI's smoke run: this checkout, replayed, 10 clients, 1 trial
        argv = [str(BENCH.parent), "replayed", "1", "10"]
    if len(argv) < 4 or argv[1] not in ("replayed", "parked") or not argv[2].isdigit():
        raise SystemExit(__doc__)
    tree, mode, trials = str(Path(argv[0]).resolve()), argv[1], int(argv[2])
    clients_list = [int(c) for c in argv[3:]]
    os.environ.setdefault("TQDM_DISABLE", "1")
    sys.path.insert(0, tree)
    import durablelab as dl
    from durablelab.examples import brooker
    if not dl.__file__.startswith(tree):
        raise SystemExit(f"durablelab came from {dl.__file__}, not {tree}: set PYTHONPATH={tree}")
    spec = importlib.util.spec_from_file_location("brooker_bench", BENCH / "brooker.py")
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    if mode == "parked":
        sys.path.insert(0, str(BENCH))
        import parked_prototype
        runner = importlib.import_module("durablelab.experiments.runner")
        runner.Engine = parked_prototype.ParkedEngine
        getattr(runner, "_IDLE", []).clear()
    brooker.reproduce(5, "full", 1)          # imports and first-call costs, not counted
    for clients in clients_list:
        sim = ours = 0.0
        for strategy in brooker.STRATEGIES:
            best = float("inf")
            for _ in range(3):
                began = time.process_time()
                reference.experiment(clients, strategy, trials)
                best = min(best, time.process_time() - began)
            sim += best
            began = time.process_time()
            brooker.reproduce(clients, strategy, trials)
            ours += time.process_time() - began
        print(f"{mode:>8} {clients:>4} clients, {trials} trials, all five: simulation "
              f"{sim:.3f} s CPU, durablelab {ours:.2f} s CPU: {ours / sim:.0f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
