"""Crash map: where a worker may die, and what held afterwards.

A grid drawn from a `CrashReport` (`dl.explore_crashes`): one row per history position (its
activity or wait), one column per crash point, each cell coloured by what the run that
crashed there did to the invariant: it held, it broke, or the crash never fired because the
run did not pass that point. Blank cells are points that do not exist there (a wait has
only ``during_wait``). With pairs explored, a cell also counts the pairs that include that
point and broke.
"""

from __future__ import annotations

from matplotlib.patches import Patch

from ..faults import CRASH_POINTS
from .plots import PALETTE, Figure

COLOURS = {"held": PALETTE["ok"], "broken": PALETTE["non_retryable"],
           "not reached": "#BBBBBB"}      # the crash did not fire: the run never got there


def crash_map(report, *, width: float | None = None, title: str | None = None) -> Figure:
    """A Figure of the single-crash rows of `report`: positions down, crash points across."""
    rows = report.frame[(report.frame.point != "none") & report.frame.point2.isna()]
    pairs = report.frame[report.frame.point2.notna()]
    lanes = list(dict.fromkeys(f"{int(r.position)}: {r.activity}" for r in rows.itertuples()))
    height = 1.3 + 0.4 * max(len(lanes), 1)
    fig = Figure(figsize=(width or 7.5, height))
    ax = fig.add_subplot()
    for r in rows.itertuples():
        y = lanes.index(f"{int(r.position)}: {r.activity}")
        x = CRASH_POINTS.index(r.point)
        state = "not reached" if not r.fired else "held" if r.holds else "broken"
        ax.add_patch(_cell(x, y, COLOURS[state]))
        text = state
        if len(pairs):
            both = pairs[~pairs.holds & (((pairs.position == r.position)
                                          & (pairs.point == r.point))
                                         | ((pairs.position2 == r.position)
                                            & (pairs.point2 == r.point)))]
            if len(both):
                text += f"\n{len(both)} pairs broke"
        # Black on every colour (it reads better on vermillion than white does), as large as
        # the axis labels: the cells are what the map is for.
        ax.text(x, y, text, ha="center", va="center", fontsize=9.5, color="black",
                fontweight="bold" if state == "broken" else "normal")
    ax.set_xlim(-0.5, len(CRASH_POINTS) - 0.5)
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    ax.set_xticks(range(len(CRASH_POINTS)), [p.replace("_", " ") for p in CRASH_POINTS])
    ax.set_yticks(range(len(lanes)), lanes)
    ax.tick_params(length=0)
    ax.set_xlabel("crash point (where the worker dies)")
    ax.set_ylabel("history position: activity or wait")
    for side in ax.spines.values():
        side.set_visible(False)
    broken = int((~rows.holds).sum())
    ax.set_title(title or f"{report.workflow.rpartition(':')[2]}, durability="
                          f"{report.durability!r}: {len(rows)} crash points, {broken} broken",
                 fontsize=10)
    ax.legend(handles=[Patch(facecolor=c, edgecolor="white", label=k)
                       for k, c in COLOURS.items()],
              loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=9)
    fig.tight_layout()
    return fig


def _cell(x: float, y: float, colour: str):
    from matplotlib.patches import Rectangle
    return Rectangle((x - 0.48, y - 0.45), 0.96, 0.9, facecolor=colour, edgecolor="white")


__all__ = ["crash_map"]
