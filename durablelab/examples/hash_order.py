"""Hash order: the same workflow code, replayed by a process with another PYTHONHASHSEED.

Python salts the hash of every string with a number chosen when the process starts
(``PYTHONHASHSEED``), so the order in which a set of strings is iterated, and the order of a
dict built from such a set, differ from one process to the next. A workflow that loops over
a set records its steps in one order; a worker that restarts (another process) replays them
in another, and replay stops at the first step with a `NonDeterminismError`. No guard can
see it: iterating a set calls nothing. The fix is an order that does not depend on the
process: ``sorted(the_set)``.

`run_under_seeds` records a run in one process and replays it in another, each with its own
``PYTHONHASHSEED``, the way a restarted worker would (lesson 09 and tests/test_catalogue.py
use it); `runs_under_seeds` does it for several workflows in the same two processes. Run as
``python -m durablelab.examples.hash_order DB WORKFLOW[,WORKFLOW...] record|replay``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from ..errors import BadValue

SERVICES = {"erp", "bank", "email"}
REGIONS = {"eu", "us", "apac"}


def notify(service: str) -> str:
    """The activity: tell one service (it only echoes its name back)."""
    return service


def set_flow(ctx, _):
    """Tells each service in a set: hash order decides which goes first."""
    for service in SERVICES:
        ctx.activity("notify", notify, service)
    return ctx.wait_signal("go")


def dict_flow(ctx, _):
    """Opens the first region of a dict built from a set: hash order decides which."""
    regions = dict.fromkeys(REGIONS, 0)
    ctx.activity("open_region", notify, next(iter(regions)))
    return ctx.wait_signal("go")


def sorted_flow(ctx, _):
    """The fix: the same steps in an order no process changes."""
    for service in sorted(SERVICES):
        ctx.activity("notify", notify, service)
    return ctx.wait_signal("go")


WORKFLOWS = {fn.__name__: fn for fn in (set_flow, dict_flow, sorted_flow)}


def _step(db: str, names: str, step: str) -> dict:
    """One process's part: record (or, on reopening the store, replay) a run of each
    workflow in `names` (comma-separated); what it saw, per name."""
    import durablelab as dl
    workflows = [WORKFLOWS[name] for name in names.split(",")]
    seen = {}
    with dl.Engine(db, workflows=workflows) as engine:
        if step == "record":
            for workflow in workflows:
                engine.start(workflow, None, run_id=workflow.__name__)
        engine.run_until_idle()     # recording: runs the steps; replaying: a recovery
        for workflow in workflows:
            run = engine.run(workflow.__name__)
            err = run.error
            seen[workflow.__name__] = {
                "hash_seed": os.environ.get("PYTHONHASHSEED"), "status": run.status,
                "steps": [json.loads(a)[0][0] for a in run.history["args"][:-1]],
                "error": None if err is None else err.to_json(),
                "message": None if err is None else str(err),
                "table": getattr(err, "table", None)}
    return seen


def runs_under_seeds(workflows, seeds: tuple[int, int], db) -> dict[str, tuple[dict, dict]]:
    """Record a run of each workflow in `workflows` (names in WORKFLOWS) in a process with
    PYTHONHASHSEED ``seeds[0]``, then open the same store in a process with ``seeds[1]`` and
    let it replay them. Returns, per name, what each process saw: ``{"hash_seed", "status",
    "steps" (the arguments of the steps its history holds), "error" (the error's to_json()
    or None), "message", "table" (a divergence's `NonDeterminismError.table`)}``. Two processes for all of them: each costs an import of
    durablelab."""
    workflows = [workflows] if isinstance(workflows, str) else list(workflows)
    unknown = [name for name in workflows if name not in WORKFLOWS]
    if unknown or not workflows:
        raise BadValue(f"runs_under_seeds(workflows={workflows!r}): use names among "
                         f"{', '.join(sorted(WORKFLOWS))}")
    root = str(Path(__file__).resolve().parent.parent.parent)
    seen = []
    for seed, step in zip(seeds, ("record", "replay")):
        env = {**os.environ, "PYTHONHASHSEED": str(int(seed)),
               "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
        done = subprocess.run([sys.executable, "-m", __name__, str(db), ",".join(workflows),
                               step], env=env, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"the {step} process (PYTHONHASHSEED={seed}) failed:\n"
                               f"{done.stderr}")
        seen.append(json.loads(done.stdout.splitlines()[-1]))
    return {name: (seen[0][name], seen[1][name]) for name in workflows}


def run_under_seeds(workflow: str, seeds: tuple[int, int], db) -> tuple[dict, dict]:
    """`runs_under_seeds` for one workflow (a name in WORKFLOWS): (recorded, replayed)."""
    if workflow not in WORKFLOWS:
        raise BadValue(f"run_under_seeds(workflow={workflow!r}): use one of "
                         f"{', '.join(sorted(WORKFLOWS))}")
    return runs_under_seeds([workflow], seeds, db)[workflow]


if __name__ == "__main__":
    print(json.dumps(_step(*sys.argv[1:4])))
