"""Pictures of an experiment: a heat map per metric, and the load a service saw.

Both return a `durablelab.viz.plots.Figure` (a matplotlib Figure built without pyplot) that
shows itself as a picture in a notebook whatever the backend, once, with no global state
leaking between cells.
"""

from __future__ import annotations

import math

import numpy as np
from ..errors import BadValue
from ..viz.plots import Figure


_LABELS = {"success_rate": "share of runs completed", "p50": "median completion time (s)",
           "p95": "95th percentile completion time (s)",
           "p99": "99th percentile completion time (s)", "cost": "model cost ($)",
           "attempts_per_run": "attempts per run", "retries": "retries",
           "duplicate_effects": "duplicate side effects", "tokens": "tokens"}


def heatmap(experiment, metric: str = "success_rate", title: str | None = None,
            cmap: str | None = None) -> Figure:
    """`metric` by policy (rows) and fault plan (columns). Each square shows its value;
    for ``success_rate`` also its 95 % interval, and the figure notes what the interval
    assumes. Any numeric column of ``experiment.cells`` works."""
    cells = experiment.cells
    if metric not in cells.columns or metric in ("policy", "fault_plan"):
        numeric = [c for c in cells.columns if c not in ("policy", "fault_plan")]
        raise BadValue(f"heatmap(metric={metric!r}): not a column of experiment.cells; "
                         f"use one of {', '.join(numeric)}")
    policies = list(dict.fromkeys(cells["policy"]))
    plans = list(dict.fromkeys(cells["fault_plan"]))
    grid = np.full((len(policies), len(plans)), np.nan)
    text = [["" for _ in plans] for _ in policies]
    for _, row in cells.iterrows():
        i, j = policies.index(row["policy"]), plans.index(row["fault_plan"])
        value = float(row[metric])
        grid[i, j] = value
        label = _fmt(value, metric)
        if metric == "success_rate":
            label += f"\n[{row['success_low']:.2f}, {row['success_high']:.2f}]"
        text[i][j] = label
    width = max(5.0, 1.6 * len(plans) + 3.0)
    height = max(2.8, 0.75 * len(policies) + 2.0)
    fig = Figure(figsize=(width, height), layout="constrained")
    ax = fig.add_subplot()
    good_high = metric == "success_rate"
    image = ax.imshow(grid, cmap=cmap or ("RdYlGn" if good_high else "viridis"),
                      aspect="auto", vmin=0.0 if good_high else None,
                      vmax=1.0 if good_high else None)
    ax.set_xticks(range(len(plans)), labels=plans, rotation=20, ha="right")
    ax.set_yticks(range(len(policies)), labels=policies)
    ax.set_xlabel("fault plan")
    ax.set_ylabel("retry policy")
    finite = grid[np.isfinite(grid)]
    middle = (finite.min() + finite.max()) / 2 if finite.size else 0.0
    for i in range(len(policies)):
        for j in range(len(plans)):
            dark = good_high and (grid[i, j] < 0.25 or grid[i, j] > 0.85)
            if not good_high and np.isfinite(grid[i, j]):
                dark = grid[i, j] < middle
            ax.text(j, i, text[i][j], ha="center", va="center", fontsize=8,
                    color="white" if dark else "black")
    fig.colorbar(image, ax=ax, label=_LABELS.get(metric, metric))
    runs = int(cells["runs"].iloc[0]) if len(cells) else 0
    ax.set_title(title or f"{_LABELS.get(metric, metric)}, {runs} runs per cell")
    if metric == "success_rate":
        fig.supxlabel("[low, high]: 95 % Wilson interval. Fault draws depend on seed, rule "
                      "and position, not input: add seeds to narrow it.", fontsize=7)
    return fig


def _fmt(value: float, metric: str) -> str:
    if math.isnan(value):
        return "n/a"
    if metric == "success_rate":
        return f"{value:.2f}"
    if metric == "cost":
        return f"${value:.4g}"
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def _steps(rows, last: int) -> tuple[list, list]:
    """(seconds, requests) of a step line from 0 to `last`: each recorded second, the
    second after it (back to 0 unless recorded too), 0 and `last`. The line a point for
    every second would draw, at the cost of the seconds that had requests (a run may last
    days of virtual time)."""
    counts = {int(second): int(n) for second, n in zip(rows["second"], rows["requests"])
              if second <= last}
    seconds = sorted({0, last, *counts, *(s + 1 for s in counts if s < last)})
    return seconds, [counts.get(s, 0) for s in seconds]


def load_plot(experiment, activity_or_service: str, cells=None, until: float | None = None,
              title: str | None = None) -> Figure:
    """Requests per virtual second on one activity or service over time, one line per
    cell (or per ``cells``: a list of (policy, fault plan) pairs). A storm shows as tall
    synchronised spikes that repeat at the backoff intervals; jitter spreads them into a
    low hump, and a Retry-After that the policy honours moves them to when the service
    said. `until` crops the time axis (virtual seconds)."""
    if until is not None and (isinstance(until, bool) or not isinstance(until, (int, float))
                              or not 0 <= until < math.inf):
        raise BadValue(f"load_plot(until={until!r}): give the last virtual second to show, "
                         f"a number >= 0, or None for all of it")
    load = experiment.load
    sources = sorted(load["source"].unique()) if len(load) else []
    if activity_or_service not in sources:
        raise BadValue(f"load_plot({activity_or_service!r}): no requests were recorded for "
                         f"it; the activities and services with load are "
                         f"{', '.join(sources) or '(none)'}")
    mine = load[load["source"] == activity_or_service]
    if cells is None:
        cells = list(dict.fromkeys(zip(mine["policy"], mine["fault_plan"])))
    fig = Figure(figsize=(8.0, 3.6), layout="constrained")
    ax = fig.add_subplot()
    end = until
    for policy, plan in cells:
        rows = mine[(mine["policy"] == policy) & (mine["fault_plan"] == plan)]
        if rows.empty:
            continue
        last = int(rows["second"].max()) if end is None else int(end)
        seconds, counts = _steps(rows, last)
        ax.step(seconds, counts, where="post", label=f"{policy} / {plan} "
                f"(peak {max(counts)}/s)", linewidth=1.2)
    ax.set_xlabel("virtual time since the runs started (s)")
    ax.set_ylabel(f"requests per virtual second")
    ax.set_title(title or f"load on {activity_or_service!r}")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8, loc="upper right")
    return fig


__all__ = ["heatmap", "load_plot"]
