"""`durablelab demo`: the vendor onboarding of lesson 01 through three kinds of trouble, in a
terminal, leaving a DuckDB store the other commands read.

The run meets a 429 from the model with a Retry-After of 30 s, then a broken model answer,
then waits for a person to approve, and the worker dies right after the ERP created the
vendor but before that was recorded: the crash window idempotency keys exist for. A fresh
worker recovers the run from the store and finishes it; the ERP's ledger shows the vendor
was created once. Everything is seeded and on a virtual clock, so the demo prints the same
thing every time.
"""

from __future__ import annotations

import shlex

from .. import faults
from ..faults import FaultPlan

#: The trouble the demo run meets.
TROUBLE = FaultPlan([
    faults.RateLimit("extract_fields", attempts=[1], retry_after=30),
    faults.Malformed("extract_fields", attempts=[2], kind="truncated"),
    faults.Crash("create_vendor", point="after_effect", times=1),
])


def run_demo(path: str) -> int:
    """Run the demo into the store at `path` (a new run "demo", "demo-2", ... if the store
    already holds one), print what happened and the commands that read it; returns 0."""
    import pandas as pd

    import durablelab as dl
    from durablelab.examples import onboarding

    onboarding.world.reset()
    engine = dl.Engine(path)
    try:
        known = set(engine.runs()["run_id"])
        run_id = next(r for r in ("demo", *(f"demo-{n}" for n in range(2, 10_000)))
                      if r not in known)
        engine.start(onboarding.onboard_vendor, {"vendor_id": "v-42"}, run_id=run_id,
                     faults=TROUBLE, seed=7)
        engine.advance(3600)
        waiting = engine.run(run_id)
        print(f"durablelab demo: vendor onboarding (lesson 01), run {run_id!r} in {path}\n")
        print(f"after one virtual hour the run is {waiting.status}: the model answered 429 "
              f"(Retry-After 30 s), then broken JSON, then the fields; now a person must "
              f"approve")
        engine.signal(run_id, "approval", {"approved": True}, signal_id="click-1")
        engine.run_until_idle()
        run = engine.run(run_id)
    finally:
        engine.close()
    crashes = len(run.crashes)
    print(f"approved; the worker crashed {crashes} time(s) right after the ERP created the "
          f"vendor, and a fresh worker recovered the run from {path}")
    print(f"the run is {run.status}: {run.result}")
    print(f"ERP: {len(onboarding.world.erp.calls)} call(s), {len(onboarding.world.erp.effects)} "
          f"vendor(s) created, {onboarding.world.erp.duplicate_effects} duplicate(s): the "
          f"idempotency key made the repeated call count once\n")
    with pd.option_context("display.width", 120, "display.max_colwidth", 40):
        print(run.attempts[["position", "activity", "attempt", "started_at", "outcome",
                            "delay"]].to_string(index=False, float_format="{:.1f}".format,
                                                na_rep=""))
    db, run_arg = shlex.quote(path), shlex.quote(run_id)
    print(f"\nNext, read what the store holds (nothing here changes it):\n"
          f"  durablelab runs {db}\n"
          f"  durablelab show {run_arg} --db {db}\n"
          f"  durablelab timeline {run_arg} --db {db} -o {shlex.quote(run_id + '.png')}\n"
          f"  durablelab export {db} -o demo.jsonl\n"
          f"The lessons explain each step: durablelab lessons, then durablelab lab")
    return 0
