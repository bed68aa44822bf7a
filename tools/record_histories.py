"""Record the shipped histories: runs of version 1 of the onboarding example, parked where
runs wait in production, exported to datasets/histories/.

    .venv/bin/python tools/record_histories.py          # rewrite the files
    .venv/bin/python tools/record_histories.py --check  # exit 1 if the runs would change

Version 2 (`onboard_vendor_v2`, the recheck behind ctx.patched) must replay every one of
them, and the unpatched version must break exactly the runs that recorded a step past the
change; tests/test_shipped_histories.py checks both, as a CI job would before a deploy.
Everything is seeded and on the virtual clock, so the files are the same on every run
(`--check` proves it). `call_site`, the file:line of each ctx call, is kept relative to
the checkout; it moves when durablelab/examples/onboarding.py is edited above the workflow,
so `--check` leaves it out of the comparison (replay never reads it).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import durablelab as dl  # noqa: E402
from durablelab.examples import onboarding as ob  # noqa: E402

OUT = ROOT / "datasets" / "histories"
NAME = "onboarding_v1"

#: run id -> (vendor, what happens to it), in the order they are started.
RUNS = {
    "rejected": "v-77",          # the sanctions screen matches: completed, rejected
    "approved": "v-42",          # approved: completed, active (vendor, payee, welcome)
    "declined": "v-42",          # the approver says no: completed, declined
    "timed-out": "v-42",         # nobody answers within 3 days: completed, declined
    "waiting-approval": "v-42",  # parked at the approval wait
    "mid-retry": "v-42",         # approved, and the ERP answers 503: parked in a backoff
}


def record() -> list:
    """The runs, recorded by version 1 on a virtual clock; returns them as `Run` views."""
    ob.world.reset()
    engine = dl.Engine(workflows=[ob.onboard_vendor])
    erp_down = dl.FaultPlan([dl.faults.ServerError("create_vendor", attempts=[1, 2])])
    seeds = {run_id: seed for seed, run_id in enumerate(RUNS)}

    def start(*run_ids):
        for run_id in run_ids:
            engine.start(ob.onboard_vendor, {"vendor_id": RUNS[run_id]}, run_id=run_id,
                         seed=seeds[run_id], faults=erp_down if run_id == "mid-retry" else None)

    start("rejected", "approved", "declined", "timed-out")
    engine.advance(3600)                           # screened, waiting for approval
    engine.signal("approved", "approval", {"approved": True}, signal_id="click-1")
    engine.signal("declined", "approval", {"approved": False}, signal_id="click-2")
    engine.advance(3 * ob.DAY)                     # "timed-out"'s deadline passes
    start("waiting-approval", "mid-retry")
    engine.advance(3600)
    engine.signal("mid-retry", "approval", {"approved": True}, signal_id="click-3")
    engine.advance(0)                              # create_vendor failed once: backing off
    runs = [engine.run(run_id) for run_id in RUNS]
    engine.close()
    for run in runs:   # 'file:line' relative to the checkout, so the files do not name ours
        run.history["call_site"] = run.history["call_site"].str.replace(
            str(ROOT) + "/", "", regex=False)
    expected = {"rejected": "completed", "approved": "completed", "declined": "completed",
                "timed-out": "completed", "waiting-approval": "waiting", "mid-retry": "waiting"}
    found = {run.run_id: run.status for run in runs}
    assert found == expected, found
    return runs


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 if the files would change")
    args = parser.parse_args(argv)
    runs = record()
    OUT.mkdir(parents=True, exist_ok=True)
    changed = []
    with tempfile.TemporaryDirectory() as tmp:
        for suffix in ("jsonl", "parquet"):
            fresh = dl.export(runs, Path(tmp) / f"{NAME}.{suffix}")
            target = OUT / f"{NAME}.{suffix}"
            same = target.exists() and _same_records(fresh, target)
            if not same:
                changed.append(target)
                if not args.check:
                    target.write_bytes(Path(fresh).read_bytes())
    for path in changed:
        print(f"{'would change' if args.check else 'wrote'} {path.relative_to(ROOT)}")
    if not changed:
        print(f"{OUT.relative_to(ROOT)}: up to date ({len(runs)} runs)")
    return 1 if args.check and changed else 0


def _same_records(a: Path, b: Path) -> bool:
    """The files hold the same runs, apart from `call_site` (which moves whenever someone
    edits onboarding.py above the workflow, while the histories still mean the same)."""
    from durablelab.export import _records
    runs = []
    for path in (a, b):
        loaded = dl.load(path)
        for run in loaded:
            run.history["call_site"] = None
        runs.append(_records(loaded))
    return runs[0] == runs[1]


if __name__ == "__main__":
    sys.exit(main())
