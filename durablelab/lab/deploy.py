"""Deploys: what happens to the runs in flight when the code changes under them.

A deploy stops the worker running version 1 and starts one running version 2 on the same
store. Every run that was parked (waiting for a person, backing off before a retry, in the
middle of an attempt) wakes up under the new code and replays its history against it. Runs
whose history the new code still reproduces carry on; the others stop `diverged`. Where a
run was parked decides which change breaks it, so `simulate_deploy` parks runs of the
onboarding example (`durablelab.examples.onboarding`, version 1) at three points and deploys
the version you give it:

- ``approval wait``: waiting for the approver's signal (with a three-day deadline timer);
- ``retry backoff``: approved, and the ERP answered 503: a durable timer until the retry;
- ``attempt in flight``: approved, and the ERP call is still running (slow ERP) when the
  worker stops. Only the end of an attempt is durable, so the new worker does not know it
  started; if the new code moves the call to another position, its idempotency key
  changes with it and the ERP creates the vendor twice. A graceful stop (``drain=True``)
  lets attempts in flight finish before the old worker exits.

Then every run is approved where it still waits and the engine runs until idle. The report
says, per run, where it was parked, what `replay_check` predicted before the deploy, how it
ended, why it broke, and how many vendors the ERP created for it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable

import pandas as pd
from ..errors import BadValue

POINTS = ("approval wait", "retry backoff", "attempt in flight")
COLUMNS = ["run_id", "parked", "predicted", "status", "cause", "position", "vendors"]


class DeployReport:
    """What a simulated deploy did to each run: `frame` (a row per run, COLUMNS),
    `summary` (runs by parking point and outcome), `plot()` (the same as bars)."""

    def __init__(self, version: str, frame: pd.DataFrame):
        self.version, self.frame = version, frame

    @property
    def outcome(self) -> pd.Series:
        """Per run: 'ok', 'duplicate effect', or 'diverged: <cause>'."""
        f = self.frame
        return pd.Series([("diverged: " + c) if s == "diverged" else
                          "duplicate effect" if v > 1 else "ok"
                          for s, c, v in zip(f["status"], f["cause"], f["vendors"])],
                         index=f.index, name="outcome")

    @property
    def summary(self) -> pd.DataFrame:
        """Runs by where they were parked (rows) and how the deploy left them (columns)."""
        table = pd.crosstab(self.frame["parked"], self.outcome)
        return table.reindex([p for p in POINTS if p in table.index])

    @property
    def broken(self) -> int:
        """Runs the deploy broke: diverged, or given a second vendor."""
        return int((self.outcome != "ok").sum())

    def plot(self, title: str | None = None):
        """A Figure: for each parking point, how many runs came through and how many broke,
        by cause."""
        from matplotlib.ticker import MaxNLocator
        from ..viz.plots import Figure
        summary = self.summary
        colours = {"ok": "#4C9A6A", "duplicate effect": "#D08A2E"}
        fig = Figure(figsize=(8.5, 3.0))
        ax = fig.add_subplot()
        left = [0] * len(summary)
        for column in summary.columns:
            values = list(summary[column])
            colour = colours.get(column, "#B5446E" if "different_call" in column else "#7A2C5C")
            ax.barh(list(summary.index), values, left=left, color=colour, label=column)
            left = [a + b for a, b in zip(left, values)]
        ax.invert_yaxis()
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("runs")
        ax.set_ylabel("parked at the deploy")
        ax.set_title(title or f"deploy of {self.version}: {self.broken} of "
                              f"{len(self.frame)} runs broken")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False,
                  title="after the deploy", title_fontsize=8)
        ax.set_xlim(0, max(left) * 1.05 if left else 1)
        fig.tight_layout()
        return fig

    def __repr__(self) -> str:
        return f"DeployReport({self.version}: {self.broken} of {len(self.frame)} runs broken)"


def simulate_deploy(new: Callable, runs_per_point: int = 4, drain: bool = False,
                    seed: int = 0, label: str | None = None) -> DeployReport:
    """Park version-1 onboarding runs at each point in POINTS, deploy `new`, approve every
    run still waiting, run until idle; returns a `DeployReport`.

    `new` is the version deployed (for example `onboarding.onboard_vendor_v2`, or
    `onboard_vendor` itself for a deploy that changes nothing). `drain=True` stops the old
    worker gracefully: attempts in flight finish before it exits. `label` names the version
    in the report (default: the function's name). All on a virtual clock in
    a temporary store, so the same arguments give the same report.
    """
    import durablelab as dl
    from ..examples import onboarding as ob
    from ..registry import workflow_name
    from ..versioning import deployed
    if workflow_name(new) != workflow_name(ob.onboard_vendor):
        raise BadValue(f"simulate_deploy({workflow_name(new)}): the new version must carry "
                         f"the old one's name, {workflow_name(ob.onboard_vendor)} (mark it "
                         f"@dl.versioning.version_of(onboarding.onboard_vendor))")
    if isinstance(runs_per_point, bool) or not isinstance(runs_per_point, int) \
            or runs_per_point < 1:
        raise BadValue(f"simulate_deploy(runs_per_point={runs_per_point!r}): give an int >= 1")
    ob.world.reset(honor_keys=True)    # services that honour keys: a duplicate is the code's
    plans = {"approval wait": None,
             "retry backoff": dl.FaultPlan([dl.faults.RateLimit("create_vendor", attempts=[1],
                                                                retry_after=600)]),
             "attempt in flight": dl.FaultPlan([dl.faults.Latency("create_vendor",
                                                                  seconds=300)])}
    parked = {}
    with tempfile.TemporaryDirectory(prefix="durablelab-deploy-") as tmp:
        path = Path(tmp) / "deploy.duckdb"
        old = dl.Engine(path, workflows=[ob.onboard_vendor])
        for point in POINTS:
            for i in range(runs_per_point):
                run_id = f"{point.split()[0]}-{i}"
                old.start(ob.onboard_vendor, {"vendor_id": "v-42"}, run_id=run_id,
                          seed=seed + i, faults=plans[point])
                parked[run_id] = point
        old.advance(3600)
        for run_id, point in parked.items():
            if point != "approval wait":
                old.signal(run_id, "approval", {"approved": True})
        old.advance(0.5)                 # the ERP answered 503, or is still working
        if drain:
            old.advance(300)             # a graceful stop: the slow ERP calls end (retries
                                         # are still backing off: they are not waited for)
        old.close()                      # the old worker stops...
        predicted = dl.replay_check(new, path).frame.set_index("run_id")["status"]
        with deployed(new):
            engine = dl.Engine(path, workflows=[new])     # ...and the new version starts
            engine.advance(0)                              # every run wakes under new code
            for run_id in parked:
                run = engine.run(run_id)
                if run.status == "waiting" and run.history["kind"].iloc[-1] == "wait_signal":
                    engine.signal(run_id, "approval", {"approved": True})
            engine.run_until_idle()
            rows = []
            for run_id, point in parked.items():
                run = engine.run(run_id)
                error = run.error if run.status == "diverged" else None
                vendors = sum(1 for e in ob.world.erp.effects
                              if (e["key"] or "").startswith(run_id + ":"))
                rows.append((run_id, point, predicted[run_id], run.status,
                             error.reason if error else None,
                             error.position if error else None, vendors))
            engine.close()
    ob.world.reset()
    frame = pd.DataFrame(rows, columns=COLUMNS, dtype=object).astype(
        {"position": "Int64", "vendors": int})
    return DeployReport(label or new.__name__, frame)


__all__ = ["simulate_deploy", "DeployReport", "POINTS"]
