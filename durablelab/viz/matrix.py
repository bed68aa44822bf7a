"""The fault matrix as a picture: failure kinds down, policies across, one cell per run.

A cell is green when the run completed and vermillion when it failed; its text says how
many attempts the call took and what the provider billed. Reading down a column shows one
policy's character (does it retry a 400? does it give up on a 503 blip?); reading across a
row shows how differently tools treat the same failure.
"""

from __future__ import annotations

from matplotlib.patches import Patch, Rectangle

from .plots import PALETTE, Figure

STATUS_COLOURS = {"completed": PALETTE["ok"], "failed": PALETTE["non_retryable"]}
OTHER = "#BBBBBB"


def matrix_plot(matrix, *, width: float | None = None, title: str | None = None) -> Figure:
    """A Figure of `matrix` (a `FaultMatrix`): colour the final status, text the attempts
    and the cost of each cell."""
    frame = matrix.frame
    failures = list(dict.fromkeys(frame.failure))
    policies = list(dict.fromkeys(frame.policy))
    fig = Figure(figsize=(width or 1.6 + 1.55 * len(policies), 1.3 + 0.42 * len(failures)))
    ax = fig.add_subplot()
    for r in frame.itertuples():
        x, y = policies.index(r.policy), failures.index(r.failure)
        colour = STATUS_COLOURS.get(r.status, OTHER)
        ax.add_patch(Rectangle((x - 0.48, y - 0.45), 0.96, 0.9, facecolor=colour,
                               edgecolor="white"))
        text = f"{r.attempts} attempt{'s' if r.attempts != 1 else ''}\n${r.cost:.2f}"
        ax.text(x, y, text, ha="center", va="center", fontsize=7.5,
                color="white" if r.status == "failed" else "black")
    ax.set_xlim(-0.5, len(policies) - 0.5)
    ax.set_ylim(len(failures) - 0.5, -0.5)
    ax.set_xticks(range(len(policies)), [_wrap(p) for p in policies], fontsize=8.5)
    ax.set_yticks(range(len(failures)), failures)
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    ax.set_xlabel("retry policy")
    ax.xaxis.set_label_position("top")
    ax.set_ylabel("failure injected")
    for side in ax.spines.values():
        side.set_visible(False)
    times = ("every attempt" if matrix.times is None
             else f"{matrix.times} attempt{'s' if matrix.times != 1 else ''} in a row")
    ax.set_title(title or f"one model call per cell; the failure hits {times}",
                 fontsize=10, pad=8, y=-0.02 - 0.6 / max(len(failures), 1))
    handles = [Patch(facecolor=c, label=f"run {s}") for s, c in STATUS_COLOURS.items()]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
              fontsize=8)
    fig.tight_layout()
    return fig


def _wrap(label: str, width: int = 14) -> str:
    """A policy name on up to two lines, so neighbouring column labels never collide."""
    if len(label) <= width or " " not in label:
        return label
    cut = min((i for i, ch in enumerate(label) if ch == " "), key=lambda i: abs(i - len(label) / 2))
    return label[:cut] + "\n" + label[cut + 1:]


__all__ = ["matrix_plot"]
