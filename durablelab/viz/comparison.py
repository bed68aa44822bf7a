"""compare_plot: small bar charts that put runs side by side, one chart per metric.

The frame is what `dl.compare(runs)` returns: a row per run, a column per metric. Each chart
carries its metric's unit on the y axis (seconds, bytes, tokens, a count), each run keeps
one colour in every chart (named in a legend), and bars are labelled with their values, so
a reader never has to estimate a height.
"""

from __future__ import annotations

import math

import pandas as pd
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from .plots import _FONT, Figure, _short
from ..errors import BadValue

# One colour per run in compare_plot (Okabe-Ito, in an order that starts far from the
# outcome colours' greens and oranges).
RUN_COLOURS = ["#0072B2", "#CC79A7", "#56B4E9", "#E69F00", "#009E73", "#D55E00", "#F0E442",
               "#000000"]


def compare_plot(frame: pd.DataFrame, metrics=None, *, width=None) -> Figure:
    """Small bar charts comparing runs, one chart per metric, runs on the x axis.

    Args:
        frame: one row per run, such as `dl.compare(runs)` returns; runs are named by a
            `run_id` column if there is one, else by the index.
        metrics: the columns to chart; default every numeric (non-boolean) column that
            has a value.
        width: figure width in inches (default 9).
    """
    if "run_id" in frame.columns:
        frame = frame.set_index("run_id")
    if metrics is None:
        metrics = [c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c])
                   and not pd.api.types.is_bool_dtype(frame[c]) and frame[c].notna().any()]
    else:
        metrics = [metrics] if isinstance(metrics, str) else list(metrics)
        missing = [m for m in metrics if m not in frame.columns]
        if missing:
            raise KeyError(f"compare_plot: no column {missing[0]!r} in the frame (columns: "
                           f"{', '.join(map(str, frame.columns))})")
    if not metrics:
        raise BadValue(f"compare_plot: the frame has no numeric column to chart (columns: "
                         f"{', '.join(map(str, frame.columns))}); name them with metrics=[...]")
    width = 9.0 if width is None else float(width)
    ncols = min(3, len(metrics))
    nrows = math.ceil(len(metrics) / ncols)
    fig = Figure(figsize=(width, 0.7 + 2.5 * nrows), layout="constrained")
    fig.get_layout_engine().set(h_pad=0.12, hspace=0.08)   # a title clear of the row above
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    names = [_short(str(i), 16) for i in frame.index]
    slanted = sum(map(len, names)) > 30 * ncols / 3
    # One colour per run, the same in every chart, and a legend naming them.
    colours = [RUN_COLOURS[i % len(RUN_COLOURS)] for i in range(len(frame))]
    for ax, metric in zip(axes, metrics):
        values = pd.to_numeric(frame[metric], errors="coerce")
        bars = ax.bar(range(len(values)), values.fillna(0), color=colours,
                      edgecolor="#333333", linewidth=0.6)
        ax.set_ylabel(metric_unit(metric), fontsize=_FONT)
        ax.bar_label(bars, labels=["–" if pd.isna(v) else f"{v:,.4g}" for v in values],
                     fontsize=_FONT - 0.5, padding=2)
        ax.set_title(str(metric).replace("_", " "), fontsize=10)
        ax.set_xticks(range(len(names)), names, fontsize=_FONT, rotation=30 if slanted else 0,
                      ha="right" if slanted else "center", rotation_mode="anchor")
        if values.dropna().mod(1).eq(0).all():
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.tick_params(axis="y", labelsize=_FONT)
        ax.margins(y=0.18)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    for ax in axes[len(metrics):]:
        ax.set_visible(False)
    if len(frame) > 1:
        fig.legend(handles=[Patch(facecolor=c, edgecolor="#333333", linewidth=0.6, label=n)
                            # whole names: two runs cut to the same label stay apart
                            for c, n in zip(colours, map(str, frame.index))],
                   loc="outside lower center",
                   ncol=min(len(names), 4), fontsize=_FONT, frameon=False)
    return fig


def metric_unit(metric: str) -> str:
    """The y-axis label of a `dl.compare` metric: its unit."""
    name = str(metric)
    if name.endswith(("duration", "_seconds", "_time")) or name in ("p50", "p95"):
        return "seconds"
    if name.endswith("bytes"):
        return "bytes"
    if name == "cost" or name.endswith("_cost"):
        return "cost ($)"
    if name.endswith("tokens"):
        return "tokens"
    if name.endswith(("rate", "_share")):
        return "share of runs"
    return "count"
