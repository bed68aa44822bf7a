"""`Experiment`: what a sweep found, as tables and pictures.

``frame`` has a row per run; ``cells`` a row per (policy, fault plan) with the success rate
and its 95 % confidence interval, completion-time percentiles, what the retries cost, and
the load each activity or service saw. ``heatmap`` and ``load_plot`` draw them; ``runs()``
gives the runs themselves, made again on demand (a sweep is deterministic, so a run made
again is the run that was measured).

About the confidence intervals: they are Wilson score intervals that treat every run of a
cell as an independent trial. Fault draws depend on the seed, the rule and the position,
not on the input, so runs that share a seed meet the same faults: with many inputs and few
seeds the runs are not independent and the interval is too narrow. Add seeds, not inputs,
to narrow it honestly.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from .runner import METRICS, QUOTA_REFUSED

#: attempt outcomes refused locally, never seen by the service
REFUSED = ("throttled", "circuit_open", QUOTA_REFUSED)

#: z for a two-sided 95 % interval.
Z95 = 1.959963984540054
CI_NOTE = ("success_low/high: 95 % Wilson interval over the cell's runs. Fault draws depend "
           "on the seed, the rule and the position, not on the input: runs sharing a seed "
           "meet the same faults, so add seeds, not inputs, to narrow it honestly.")

_SUMS = ["attempts", "retries", "crashes", "model_calls", "input_tokens", "output_tokens",
         "tokens", "cost", "duplicate_effects", "wakeups", "events_replayed"]


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval for a proportion: (low, high)."""
    if n == 0:
        return (math.nan, math.nan)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


class Experiment:
    """The results of `dl.sweep` (or of `dl.load` on an exported experiment).

    Attributes:
        spec: the sweep as JSON data (workflow name, inputs, policies, fault plans, seeds,
            contention, timeout, world).
        frame: a row per run: ``input`` (index into the inputs), ``policy``, ``fault_plan``,
            ``seed``, ``run_id``, ``status``, ``error`` (its class), ``virtual_duration``,
            ``attempts``, ``retries`` and ``retries_<outcome>``, ``crashes``,
            ``model_calls``, tokens, ``cost``, ``duplicate_effects``, ``wakeups``,
            ``events_replayed``, ``history_events`` (as `dl.compare` defines them).
            ``wakeups`` and ``events_replayed`` are the durable-execution model's figures,
            what replay from the top hands the code, also where the sweep kept runs' code
            between wake-ups (``sweep(sticky=True)``, `durablelab/sticky.py`): the frame is
            the same byte for byte either way.
        load: requests per whole virtual second: ``policy, fault_plan, source`` (an
            activity, or a part of the world that stamps its calls), ``second``,
            ``requests``. Isolated runs each start at t=0, so their load adds up as if
            they had run side by side without meeting.
        path: the DuckDB results file, or None.
        requests: a row per attempt (``policy, fault_plan, seed, started_at, ended_at,
            attempt, outcome``), what `series` bins; None for an experiment loaded from an
            export, which does not keep them.
    """

    def __init__(self, spec: dict, frame: pd.DataFrame, load: pd.DataFrame, path=None,
                 source=None, name: str | None = None, requests: pd.DataFrame | None = None):
        self.spec, self.frame, self.load, self.path = spec, frame, load, path
        self.requests = requests
        self._source = source          # the sweep's Spec (workflow, world), when in hand
        self._cells: pd.DataFrame | None = None
        self.name = name or (str(path) if path else "experiment")

    @classmethod
    def _from_sweep(cls, spec, runs: pd.DataFrame, load: pd.DataFrame, path,
                    requests: pd.DataFrame | None = None) -> "Experiment":
        cells = {i: c for i, c in enumerate(spec.cells)}
        seed_rank = {s: i for i, s in enumerate(spec.seeds)}
        runs = runs.assign(_seed=runs["seed"].map(seed_rank))
        runs = runs.sort_values(["cell", "_seed", "input"], kind="stable")
        frame = runs.drop(columns=["cell", "_seed"]).reset_index(drop=True)
        load = load.assign(policy=load["cell"].map(lambda c: cells[c][0]),
                           fault_plan=load["cell"].map(lambda c: cells[c][1]))
        load = (load.sort_values(["cell", "source", "second"], kind="stable")
                [["policy", "fault_plan", "source", "second", "requests"]]
                .reset_index(drop=True))
        if requests is not None:
            requests = requests.assign(policy=requests["cell"].map(lambda c: cells[c][0]),
                                       fault_plan=requests["cell"].map(lambda c: cells[c][1]))
            requests = (requests.sort_values(["cell", "seed", "started_at"], kind="stable")
                        [["policy", "fault_plan", "seed", "started_at", "ended_at", "attempt",
                          "outcome"]].reset_index(drop=True))
        return cls(spec.describe(), _typed(frame), _typed_load(load), path, source=spec,
                   requests=requests)

    def __repr__(self) -> str:
        n_cells = len(self.spec["policies"]) * len(self.spec["fault_plans"])
        done = (self.frame["status"] == "completed").mean() if len(self.frame) else math.nan
        return (f"Experiment({self.spec['workflow']}: {len(self.frame):,} runs in {n_cells} "
                f"cells, {done:.1%} completed)")

    # --- rules that tested nothing -----------------------------------------------------------
    @property
    def unmatched_rules(self) -> pd.DataFrame:
        """A row per fault-plan rule whose activity name or glob matched no activity that a
        run under that plan reached: ``fault_plan, rule`` (its index in the plan), ``type,
        activity``, and ``met`` (the activities those runs did reach). A typo ("modle")
        injects nothing, and the cells under that plan measure a calm world. A `Crash` at
        ``during_wait`` names a wait, which the load does not see: it is never listed."""
        from ..faults import FaultPlan
        met = {plan: set(g["source"]) for plan, g in self.load.groupby("fault_plan")} \
            if len(self.load) else {}
        rows = []
        for name, data in self.spec["fault_plans"].items():
            if not data:
                continue
            plan = FaultPlan.from_json(data)
            seen = met.get(name, set())
            for index, rule in plan.unmatched(seen):
                if getattr(rule, "point", None) == "during_wait":
                    continue
                rows.append((name, index, type(rule).__name__, rule.activity,
                             ", ".join(sorted(seen))))
        return pd.DataFrame(rows, columns=["fault_plan", "rule", "type", "activity", "met"])

    # --- the table per cell -----------------------------------------------------------------
    @property
    def cells(self) -> pd.DataFrame:
        """A row per (policy, fault plan), in the sweep's order. Columns: ``policy,
        fault_plan, runs, completed, success_rate, success_low, success_high`` (a 95 %
        Wilson interval; see the module docstring for why seeds, not inputs, narrow it),
        ``p50, p95, p99`` (virtual seconds to complete, over completed runs), ``makespan``
        (the mean over the cell's trials, one per seed, of the virtual instant its last run
        ended, counted from the trial's clock at 0: with ``arrivals`` the runs start
        later), sums over the
        cell's runs of ``attempts, retries, retries_<outcome>, crashes, model_calls,
        input_tokens, output_tokens, tokens, cost, duplicate_effects, wakeups,
        events_replayed``, ``attempts_per_run``, and for each activity or service S
        ``peak_load_S`` and ``mean_load_S`` (requests per virtual second: the busiest
        second, and the mean over the seconds from its first request to its last)."""
        if self._cells is None:
            self._cells = self._compute_cells()
        return self._cells

    def _compute_cells(self) -> pd.DataFrame:
        order = [(p, f) for p in self.spec["policies"] for f in self.spec["fault_plans"]]
        frame = self.frame
        retry_cols = [c for c in frame.columns if c.startswith("retries_")]
        groups = {key: g for key, g in frame.groupby(["policy", "fault_plan"], sort=False)}
        sources = sorted(self.load["source"].unique()) if len(self.load) else []
        loads = {key: g for key, g in self.load.groupby(["policy", "fault_plan", "source"],
                                                        sort=False)}
        rows = []
        for policy, plan in order:
            g = groups.get((policy, plan))
            if g is None:
                continue
            n = len(g)
            done = g["status"] == "completed"
            k = int(done.sum())
            low, high = wilson(k, n)
            durations = g.loc[done, "virtual_duration"].to_numpy(dtype=float)
            row: dict[str, Any] = {"policy": policy, "fault_plan": plan, "runs": n,
                                   "completed": k, "success_rate": k / n,
                                   "success_low": low, "success_high": high}
            for q in (50, 95, 99):
                row[f"p{q}"] = float(np.percentile(durations, q)) if k else math.nan
            row["makespan"] = self._makespan(g)
            for column in _SUMS[:2] + retry_cols + _SUMS[2:]:
                row[column] = g[column].sum().item()
            row["attempts_per_run"] = row["attempts"] / n
            for source in sources:
                counts = loads.get((policy, plan, source))
                if counts is None or counts.empty:
                    row[f"peak_load_{source}"], row[f"mean_load_{source}"] = 0, 0.0
                    continue
                span = int(counts["second"].max() - counts["second"].min()) + 1
                row[f"peak_load_{source}"] = int(counts["requests"].max())
                row[f"mean_load_{source}"] = float(counts["requests"].sum() / span)
            rows.append(row)
        cells = pd.DataFrame(rows)
        cells.attrs["note"] = CI_NOTE
        return cells

    def _makespan(self, g: pd.DataFrame) -> float:
        """The mean over seeds of (the last run's start + its virtual duration)."""
        arrivals = self.spec.get("arrivals")
        starts = 0.0 if arrivals is None else g["input"].map(lambda i: arrivals[i])
        ends = g["virtual_duration"] + starts
        return float(ends.groupby(g["seed"]).max().mean())

    # --- results over time ----------------------------------------------------------------
    def series(self, every: float = 1.0) -> pd.DataFrame:
        """Requests per bin of `every` virtual seconds, per cell, summed over its trials:
        how a storm or a metastable failure unfolds, and whether it ends.

        A row per cell and bin: ``policy, fault_plan, start`` (the bin's first instant),
        ``offered`` (activities begun: first attempts, those refused locally included),
        ``seen`` (attempts that reached the service: not refused by a throttle or a
        breaker), ``goodput`` (attempts that ended ok, in the bin they ended), ``retries``
        (attempts after the first), ``refusals`` (attempts a throttle or breaker refused,
        and retries a `RetryQuota` did not allow), ``in_flight`` (attempts that had
        reached the service and not ended at the bin's start). A `ctx.retry` scope's tries
        are new activities: its retries count as offered.
        """
        from ..errors import bad_value
        call = f"Experiment.series(every={every!r})"
        if isinstance(every, bool) or not isinstance(every, (int, float)) or not (
                math.isfinite(every) and every > 0):
            raise bad_value(call, "every", f"every={every!r} must be a finite number of "
                                           f"virtual seconds > 0, the width of each bin")
        if self.requests is None:
            raise bad_value(call, "every", (
                "this experiment was loaded from an export, which keeps no attempts; "
                "series() reads an experiment dl.sweep returned: run the sweep again "
                "(same arguments, same table)"))
        columns = ["policy", "fault_plan", "start", "offered", "seen", "goodput", "retries",
                   "refusals", "in_flight"]
        order = [(p, f) for p in self.spec["policies"] for f in self.spec["fault_plans"]]
        groups = {key: g for key, g in self.requests.groupby(["policy", "fault_plan"],
                                                               sort=False)}
        frames = []
        for policy, plan in order:
            g = groups.get((policy, plan))
            if g is None or g.empty:
                continue
            started = g["started_at"].to_numpy(dtype=float)
            ended = g["ended_at"].to_numpy(dtype=float)
            outcome = g["outcome"].to_numpy(dtype=object)
            attempt = g["attempt"].to_numpy(dtype=np.int64)
            refused = np.isin(outcome, REFUSED)
            made = outcome != QUOTA_REFUSED
            last = np.nanmax(np.concatenate([started, ended]))
            bins = int(last // every) + 1
            edges = np.arange(bins) * every

            def count(instants, mask):
                where = (instants[mask] // every).astype(np.int64)
                return np.bincount(where, minlength=bins)[:bins]

            seen = made & ~refused
            starts_sorted = np.sort(started[seen])
            ends_sorted = np.sort(ended[seen])
            in_flight = (np.searchsorted(starts_sorted, edges, side="right")
                         - np.searchsorted(ends_sorted, edges, side="right"))
            frames.append(pd.DataFrame({
                "policy": policy, "fault_plan": plan, "start": edges,
                "offered": count(started, made & (attempt == 1)),
                "seen": count(started, seen),
                "goodput": count(ended, outcome == "ok"),
                "retries": count(started, made & (attempt > 1)),
                "refusals": count(started, refused | ~made),
                "in_flight": in_flight}))
        if not frames:
            return pd.DataFrame(columns=columns)
        return pd.concat(frames, ignore_index=True)[columns]

    # --- pictures ---------------------------------------------------------------------------
    def heatmap(self, metric: str = "success_rate", **options):
        """A matplotlib Figure: `metric` (a column of `cells`) by policy (rows) and fault
        plan (columns), each square labelled with its value (and, for ``success_rate``, its
        95 % interval). See `durablelab.experiments.plots.heatmap` for the options."""
        from .plots import heatmap
        return heatmap(self, metric, **options)

    def load_plot(self, activity_or_service: str, **options):
        """A matplotlib Figure: requests per virtual second on one activity (from attempt
        start times) or one part of the world that stamps its calls, one line per cell:
        the storm, with and without jitter or Retry-After. See
        `durablelab.experiments.plots.load_plot` for the options."""
        from .plots import load_plot
        return load_plot(self, activity_or_service, **options)

    # --- the runs themselves ----------------------------------------------------------------
    def runs(self, workflow=None, world=None) -> "LazyRuns":
        """The runs, made again one at a time when asked for (``experiment.runs()[0]``,
        ``runs()["policy/plan/seed/input"]``, or a loop). A sweep is deterministic, so a
        run made again is the run that was measured: each is checked against its row of
        `frame`. An experiment loaded from a file needs the `workflow` (and the `world`
        factory, if the sweep had one) to make its runs: a file never names code to run."""
        from .remake import LazyRuns
        return LazyRuns(self, workflow, world)

    # --- export -----------------------------------------------------------------------------
    def export(self, path):
        """Write the experiment (its spec, frame and load) to ``.jsonl`` or ``.parquet``:
        what `dl.export(experiment, path)` does. `dl.load(path)` reads it back."""
        from .io import export_experiment
        return export_experiment(self, path)


_TYPED_INTS = frozenset(("input", "seed", "attempts", "activities", "crashes", "model_calls",
                         "input_tokens", "output_tokens", "tokens", "duplicate_effects",
                         "wakeups", "events_replayed", "history_events"))
_TYPED_FLOATS = frozenset(("virtual_duration", "cost"))
_TYPED_TEXT = frozenset(("policy", "fault_plan", "run_id", "status", "error", "source"))


def _column(name: str, column: pd.Series) -> np.ndarray | pd.Series:
    """One column of `frame` or `load` as the experiment holds it: counts as int64,
    seconds and cost as float64, names as Python strings or None in an object column."""
    if name in _TYPED_INTS or name.startswith("retries") or name in ("second", "requests"):
        return column.to_numpy(dtype="int64")
    if name in _TYPED_FLOATS:
        return column.to_numpy(dtype="float64")
    if name in _TYPED_TEXT:
        values = column.to_numpy(dtype=object, copy=True)   # the frame read back stays
        values[column.isna().to_numpy()] = None
        return pd.Series(values, index=column.index, dtype=object)   # not inferred as str
    return column


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    # Built column by column in one DataFrame: a DataFrame.astype per kind of column costs
    # several times a small sweep's runs (tests/test_sweep_memory.py checks it against it).
    names = ["input", "policy", "fault_plan", "seed", "run_id", *METRICS]
    return pd.DataFrame({name: _column(name, frame[name]) for name in names},
                        index=frame.index)


def _typed_load(load: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({name: _column(name, load[name]) for name in load.columns},
                        index=load.index)


def compare_experiments(experiments) -> pd.DataFrame:
    """The cells of several experiments side by side: one frame with an ``experiment``
    column first (the dict's keys, or each experiment's ``name``)."""
    if isinstance(experiments, Experiment):
        experiments = [experiments]
    items = (list(experiments.items()) if isinstance(experiments, dict)
             else [(e.name, e) for e in experiments])
    names = [n for n, _ in items]
    if len(set(names)) != len(names):
        items = [(f"{n} ({i})", e) for i, (n, e) in enumerate(items)]
    frames = [e.cells.assign(experiment=name) for name, e in items]
    out = pd.concat(frames, ignore_index=True)
    return out[["experiment", *[c for c in out.columns if c != "experiment"]]]


__all__ = ["Experiment", "wilson", "compare_experiments", "CI_NOTE"]
