"""The load a simulated model received over time: how a fan-out storms a rate limit.

A `dl.sim.SimLLM` keeps a ledger of every request that reached it (`llm.calls`), each with
the virtual instant it arrived and whether the model answered it or refused it with a 429
because its token bucket was empty. Binned by virtual second, the ledger shows what a
workflow's fan-out did to the model: twelve reads started at the same instant against a
bucket that holds two are ten refusals at once, then waves of retries; the same reads with
``ctx.map(..., limit=2)`` arrive two at a time and are all answered.

`model_load` gives the bins as a frame; `model_load_plot` draws one panel per model (one
per way of running the workflow) on shared axes, so a run that took longer is wider.
"""

from __future__ import annotations

import math

import pandas as pd

from ..errors import bad_type, bad_value

ANSWERED, REFUSED, ENDED = "#009E73", "#F0E442", "#444444"   # the timeline's ok, 429, crash


def _calls(model, call: str) -> list[dict]:
    calls = getattr(model, "calls", model)
    if not isinstance(calls, list) or not all(isinstance(c, dict) and "at" in c for c in calls):
        raise bad_type(call, "model", f"{type(model).__name__} is neither a dl.sim.SimLLM nor "
                                      f"its ledger (a list of llm.calls rows); pass the model "
                                      f"the workflow called")
    return calls


def _every(every, call: str) -> float:
    if isinstance(every, bool) or not isinstance(every, (int, float)) \
            or not math.isfinite(every) or every <= 0:
        raise bad_value(call, "every", f"every={every!r} must be seconds > 0 (the width of "
                                       f"one bin, 1.0 for requests per second)")
    return float(every)


def model_load(model, every: float = 1.0, origin: float = 0.0) -> pd.DataFrame:
    """Requests `model` received per `every` virtual seconds, counted from `origin` (the
    run's start): a row per bin that saw any, with ``start`` (seconds after `origin`),
    ``answered`` (answered, including broken answers), ``refused`` (429: the rate limit was
    empty) and ``requests`` (both). `model` is a `SimLLM` or its ``calls`` list."""
    call = "model_load(model)"
    every = _every(every, call)
    rows: dict[float, list[int]] = {}
    for row in _calls(model, call):
        start = math.floor((row["at"] - origin) / every + 1e-9) * every
        counts = rows.setdefault(start, [0, 0])
        counts[row.get("outcome") == "rate_limited"] += 1
    frame = pd.DataFrame([(start, a, r) for start, (a, r) in sorted(rows.items())],
                         columns=["start", "answered", "refused"])
    frame["requests"] = frame.answered + frame.refused
    return frame


def model_load_plot(models: dict, ended_at: dict | None = None, every: float = 1.0,
                    origin: float = 0.0, width: float | None = None):
    """One panel per entry of `models` (``{"limit=None": llm, "limit=2": other_llm}``):
    stacked bars of the requests answered and refused (429) per `every` virtual seconds,
    a dashed line where the run ended (`ended_at`, the same keys, seconds on the clock),
    and the totals in each panel's title. Panels share both axes."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator
    from .plots import Figure
    call = "model_load_plot(models)"
    if not isinstance(models, dict) or not models:
        raise bad_type(call, "models", "give a dict of at least one label -> SimLLM, such as "
                                       "{'limit=None': world.llm}")
    every = _every(every, call)
    ended_at = dict(ended_at or {})
    unknown = set(ended_at) - set(models)
    if unknown:
        raise bad_value(call, "ended_at", f"ended_at names {sorted(unknown)}, which are not "
                                          f"labels of models ({sorted(models)})")
    frames = {label: model_load(model, every, origin) for label, model in models.items()}
    fig = Figure(figsize=(width or 4.0 * len(models) + 1.0, 3.4))
    axes = fig.subplots(1, len(models), sharex=True, sharey=True, squeeze=False)[0]
    right = max([every] + [float(f.start.max()) + every for f in frames.values() if len(f)]
                + [t - origin + every * 0.5 for t in ended_at.values()])
    for ax, (label, frame) in zip(axes, frames.items()):
        ax.bar(frame.start, frame.answered, width=every * 0.9, align="edge", color=ANSWERED,
               edgecolor="#333333", linewidth=0.5)
        ax.bar(frame.start, frame.refused, width=every * 0.9, align="edge",
               bottom=frame.answered, color=REFUSED, edgecolor="#333333", linewidth=0.5,
               hatch="....")
        if label in ended_at:
            ax.axvline(ended_at[label] - origin, color=ENDED, linestyle="--", linewidth=1.2)
        total, refused = int(frame.requests.sum()), int(frame.refused.sum())
        ax.set_title(f"{label}: {total} requests, {refused} refused", fontsize=10)
        ax.set_xlabel("virtual time (s)")
        ax.set_xlim(0, right)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(axis="y", color="#e5e5e5", linewidth=0.6)
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    unit = "second" if every == 1.0 else f"{every:g} s"
    axes[0].set_ylabel(f"requests to the model per {unit}")
    handles = [Patch(facecolor=ANSWERED, edgecolor="#333333", label="answered"),
               Patch(facecolor=REFUSED, edgecolor="#333333", hatch="....",
                     label="refused: 429, rate limited")]
    if ended_at:
        handles.append(Line2D([], [], color=ENDED, linestyle="--", label="the run ended"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False,
               fontsize=9)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


__all__ = ["model_load", "model_load_plot"]
