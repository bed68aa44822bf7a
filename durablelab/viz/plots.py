"""Timeline: what a run did over time, drawn from its history.

A durable run spends most of its life not running: it waits on a timer, on a person's
signal, on a retry backoff, or for a fresh worker after a crash. The timeline shows that
shape. Each activity has a lane; each attempt is a bar coloured by its outcome, and the thin
line after a failed attempt is the backoff the engine chose before the next one. Timers and
signal waits share a hatched lane of their own. A dashed vertical line is a worker crash,
and the marks on the top strip are wake-ups, the moments the workflow code ran again from
the top: "↻6 +4" means it replayed 6 events from history and recorded 4 new ones. A label
sits right of its mark; wake-ups too close to label one by one share a label right of the
last of them ("↻6 +1 · ↻7 +3" for two, "3× ↻9 +2" with the sums for more), and no label
covers another label or a mark.

Activities of one name that ran at the same time (`ctx.start_activity`, `ctx.map`) get a
lane each ("fetch", "fetch ·2" ...), and a child run (`ctx.start_child`) is a lane from its
start to its end; given the children (`children=engine`), the timeline expands that bar
into the child's own lanes, shaded under it (`durablelab.viz.children`). Runs imported
from Temporal may hold more: child workflows and Nexus operations get a lane each, like
activities, and signals and updates that no `wait_signal` received are marks on a
"messages" lane. A wait still open when the run ended stops at the run's end.

Virtual time makes an attempt take 0 s, so bars get a minimum visible width; attempts that
happen at (nearly) the same instant are laid side by side in their order, not on top of
each other, and a crash line sits at the end of the bar it cut off. A run that happens
entirely at one instant is drawn as a sequence of slots instead of on a time axis
(`durablelab.viz.order`). Runs stacked in one figure share one time axis, so they compare,
and the figure stays within a screen's height. Everything is read from `Run` frames only,
so imported runs draw the same way.
"""

from __future__ import annotations

import io

import math
import numbers
from dataclasses import dataclass

import pandas as pd
import matplotlib.figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.transforms import blended_transform_factory

from ..durations import UNITS, duration_text, time_unit
from ..waits import pair_waits
from ..errors import BadType, BadValue
from . import children as kids
from .order import Slots, crash_places, wakeup_places

# Okabe-Ito colours: distinguishable with the common colour-vision deficiencies.
PALETTE = {
    "ok": "#009E73",             # bluish green
    "transient": "#E69F00",      # orange
    "rate_limited": "#F0E442",   # yellow
    "timeout": "#56B4E9",        # sky blue
    "non_retryable": "#D55E00",  # vermillion
    "malformed": "#CC79A7",      # reddish purple
    "crashed": "#000000",        # black, like the crash line
    "circuit_open": "#BBBBBB",   # light grey: refused without a call
    "in_flight": "#FFFFFF",      # white: started, no answer yet
    "canceled": "#DDDDDD",       # pale grey, crossed: abandoned by a cancel
}
OUTCOME_LABELS = {"ok": "ok", "transient": "transient", "rate_limited": "rate limited",
                  "timeout": "timeout", "non_retryable": "non-retryable",
                  "malformed": "malformed", "crashed": "crashed",
                  "circuit_open": "circuit open", "in_flight": "in flight",
                  "canceled": "canceled"}
# Orange, yellow and vermillion are told apart by colour-blind readers, but not in grey scale
# or on a small bar at a glance: the failures that are not plain transient ones carry a
# hatch as well, so every outcome differs in two ways.
HATCHES = {"rate_limited": "....", "non_retryable": "xxxx", "malformed": "\\\\\\\\",
           "circuit_open": "----"}
UNKNOWN_COLOUR = "#999999"
WAIT_COLOUR = "#0072B2"          # blue, not used by any outcome
WAIT_STYLES = {"timer": {"hatch": "////", "label": "durable timer"},
               "signal": {"hatch": "....", "label": "signal wait"}}
BACKOFF_COLOUR = "#555555"
CRASH_COLOUR = "#000000"
WAKEUP_COLOUR = "#444444"
LABELS = {"backoff": "backoff (retry wait)", "crash": "worker crash",
          "wakeup": "wake-up (↻ replayed, + recorded)", "children": "a child run's lanes"}
CHILD_SHADE = "#000000"   # at CHILD_ALPHA over white: one level pale grey, nested darker
CHILD_ALPHA = 0.045
WAIT_LANE = "waits"
MESSAGE_LANE = "messages"
# History rows drawn as spans in lanes of their own (Temporal imports), and their lane prefix.
SPAN_KINDS = {"child_workflow": "child", "nexus_operation": "nexus"}
# History rows drawn as marks on the messages lane: kind -> (marker, legend label).
MESSAGE_MARKS = {"signal_received": ("^", "signal received"),
                 "workflow_execution_update_accepted": ("D", "update accepted"),
                 "workflow_execution_update_rejected": ("X", "update rejected"),
                 # where a cancel reached the code (`engine.cancel`; the run's title says
                 # how it ended)
                 "cancelled": ("s", "cancel told to the code")}


class Figure(matplotlib.figure.Figure):
    """A matplotlib Figure that shows itself as a picture in a notebook cell, whether or not
    the inline backend has been switched on (built without pyplot, so no global state)."""

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
        return buffer.getvalue()


# A wait is two events (see `durablelab.waits`): its start's kind says how the lane draws it.
_WAIT_STARTS = {"sleep": "timer", "wait_signal": "signal"}
_MIN_WIDTH = 0.008       # of the axis span: a 0 s attempt is still a visible bar
MAX_HEIGHT = 6.5         # inches: a figure taller than a laptop screen cannot be taken in
_FONT = 8.0


@dataclass
class Wait:
    kind: str                # "timer" or "signal"
    name: str
    start: float
    end: float | None        # None: still waiting, with no deadline
    label: str
    open: bool               # still waiting when the run was read
    position: float | None = None   # of its start event in history


def waits(history: pd.DataFrame, ended_at: float | None = None) -> list[Wait]:
    """Timer and signal waits from history: each start event paired with its end event
    (`durablelab.waits.pair_waits`: first in, first out per name). A wait without an end
    runs to its deadline, if any, or to `ended_at` (the run's end) when the run ended
    first: a timer still open when a run was terminated did not go on after it."""
    found = []
    if "recorded_at" not in history.columns:   # no times: nothing to place on an axis
        return found
    for start, end in pair_waits(history):
        kind, name = _WAIT_STARTS[start.kind], start.name
        value = start.value if isinstance(start.value, dict) else {}
        label = (f"sleep {duration_text(value['seconds'])}" if "seconds" in value
                 else f"{kind} {name!r}")
        if end is not None:
            label += " (timed out)" if end.kind == "signal_timeout" else ""
            found.append(Wait(kind, name, start.recorded_at, end.recorded_at, label, False,
                              start.position))
            continue
        deadline = value.get("deadline")
        until = deadline if _finite(deadline) else None
        if _finite(ended_at) and (until is None or until > ended_at):
            until = max(float(ended_at), start.recorded_at)
            label += " (open when the run ended)"
        else:
            label += " (waiting)" if until is not None else " (waiting, no deadline)"
        found.append(Wait(kind, name, start.recorded_at, until, label, True, start.position))
    return sorted(found, key=lambda w: w.start)


def activity_attempts(run) -> pd.DataFrame:
    """run.attempts with a missing end taken as the start, and the `lane` each is drawn
    on (see `_sublanes`)."""
    attempts = run.attempts
    attempts = attempts[attempts.started_at.notna()].copy()
    attempts["ended_at"] = attempts.ended_at.fillna(attempts.started_at)
    attempts["lane"] = _sublanes(attempts)
    return attempts


def _sublanes(attempts: pd.DataFrame) -> list[str]:
    """The lane of each attempt: its activity's name, or, where activities of one name ran
    at the same time (`ctx.start_activity`, `ctx.map`), "name ·2", "name ·3" ... so that
    overlapping activities never share a lane. All attempts of one position (one activity)
    stay on one lane."""
    if attempts.empty:
        return []
    spans = attempts.groupby(["activity", "position"], sort=False).agg(
        start=("started_at", "min"), end=("ended_at", "max")).reset_index()
    lane_of = _spread(zip(spans.activity, spans.position, spans.start, spans.end))
    return [lane_of[key] for key in zip(attempts.activity, attempts.position)]


def _spread(rows) -> dict[tuple, str]:
    """(lane, position, start, end) rows -> {(lane, position): its lane, or "lane ·2",
    "lane ·3" ... where it overlaps one before it}; an end of None is still open."""
    lane_of: dict[tuple, str] = {}
    ends: dict[str, list[float]] = {}   # lane -> the end of the last row on each sub-lane
    for name, position, start, end in sorted(rows, key=lambda r: (r[2], r[1])):
        end = math.inf if end is None else max(end, start)
        taken = ends.setdefault(name, [])
        k = next((i for i, last in enumerate(taken) if last <= start), len(taken))
        if k == len(taken):
            taken.append(end)
        taken[k] = end
        lane_of[(name, position)] = name if k == 0 else f"{name} ·{k + 1}"
    return lane_of


def timeline(runs, *, width=None, height=None, title=None, align="clock",
             unit=None, children=None) -> Figure:
    """A Figure of one or more runs over time: one stacked axes per run, all on one shared
    time axis so they compare at a glance. A run that happens at one instant (virtual time
    never moved) and has an order to show, several steps or a crash, cannot be read on a
    time axis: such runs share an axis of their own that shows their steps in order.

    Args:
        runs: a `Run` or a list of them (live, loaded from an export, or imported).
        width: figure width in inches (default 9, a notebook's width).
        height: figure height in inches. By default as tall as the lanes need, but at most
            6.5 in (650 px, a laptop screen), lanes squeezed to fit; past about a dozen
            lanes a figure grows taller than that rather than become unreadable.
        title: a title over the whole figure.
        align: "clock" puts every run on one clock, from the earliest start (runs of one
            engine that collide in time show it); "start" measures each run from its own
            start (to compare runs made at different times).
        unit: the x axis unit, "s", "min", "h" or "days"; by default it follows the span
            (`time_unit`). Give the one your text uses, so a reader need not convert.
        children: expand child runs (`ctx.child`, `ctx.start_child`) in place of one bar
            each: the engine that holds them (``children=engine``, a read-only engine too:
            every child, and their children) or a list of child Runs (those only, e.g. from
            `dl.load`). A child's lanes come right under its bar, on the parent's clock,
            labelled with the child's run id ("p/1 › search") and shaded; its wake-ups stay
            off the strip, which is the drawn run's. None (default): a bar per child.

    Raises BadValue for a child run that the drawn runs (or another child given) did not
    start, BadType for a `children` that is neither an engine nor a list of Runs.

    Returns a `matplotlib.figure.Figure` made without pyplot: a notebook shows it once.
    """
    runs = [runs] if hasattr(runs, "attempts") else list(runs)
    if not runs:
        raise BadValue("timeline(runs): no runs to draw; pass a Run or a list of Runs")
    if align not in ("clock", "start"):
        raise BadValue(f"timeline(align={align!r}): use 'clock' or 'start'")
    sizes = dict(UNITS)
    if unit is not None and unit not in sizes:
        raise BadValue(f"timeline(unit={unit!r}): use one of {', '.join(sizes)}, or None "
                         f"for a unit that follows the span")
    if height is not None:
        wanted = (f"give the figure height in inches, a number above 0 (or None: as tall as "
                  f"the lanes need, at most {MAX_HEIGHT:g} in)")
        if isinstance(height, bool) or not isinstance(height, numbers.Real):
            raise BadType(f"timeline(height={height!r}): {wanted}")
        if not (math.isfinite(height) and height > 0):
            raise BadValue(f"timeline(height={height!r}): {wanted}")
    width = 9.0 if width is None else float(width)
    found = kids.resolve(runs, children)
    trees = [kids.members(run, found) for run in runs]
    origins = [min(_origin(member) for member in tree) for tree in trees]
    if align == "clock":
        origins = [min(origins)] * len(runs)
    lengths = [max(_latest(member) for member in tree) - origin
               for tree, origin in zip(trees, origins)]
    in_order = [span <= 0 and any(map(_has_order, tree)) for tree, span in zip(trees, lengths)]
    groups = [group for group in ([i for i, o in enumerate(in_order) if not o],
                                  [i for i, o in enumerate(in_order) if o]) if group]
    group_of = {i: k for k, group in enumerate(groups) for i in group}
    # An axis carries its x ticks and label unless the one under it shares them.
    labelled = [i == len(runs) - 1 or group_of[i + 1] != group_of[i] for i in range(len(runs))]

    layouts = [kids.layout(run, found, _lanes, spans) for run in runs]
    lanes = [labels for labels, _ in layouts]
    extra = [0.35 if labelled[i] and i < len(runs) - 1 else 0.0 for i in range(len(runs))]
    heights = [1.1 + 0.34 * max(len(names), 1) + e for names, e in zip(lanes, extra)]
    notes = list(dict.fromkeys(note for run in runs for note in getattr(run, "notes", ()) or ()))
    foot = 0.25 * len(notes)
    if height is None:
        # Squeezed to fit, a run keeps its title and at least 0.2 in (20 px) a row for its
        # lanes and its wake-up strip.
        tightest = sum(0.3 + 0.2 * (max(len(names), 1) + 1.2) + e
                       for names, e in zip(lanes, extra))
        height = min(sum(heights) + 0.9, max(MAX_HEIGHT - foot, tightest + 0.9)) + foot
    height = float(height)
    fig = Figure(figsize=(width, height), layout="constrained")
    plots = fig
    if notes:   # a strip of its own under the legend, so layout keeps them apart
        plots, bottom = fig.subfigures(2, 1, height_ratios=[max(height - foot, 0.1),
                                                            0.1 + foot])
        bottom.text(0.5, 0.5, "\n".join(f"Note: {note}" for note in notes), ha="center",
                    va="center", fontsize=_FONT, style="italic", color="#333333", wrap=True)
    axes = plots.subplots(len(runs), 1, squeeze=False,
                          gridspec_kw={"height_ratios": heights})[:, 0]
    legend = _Legend()
    source = {getattr(run, "source", "durablelab") for run in runs}
    clock = "virtual time" if source == {"durablelab"} else "time"
    for group in groups:
        for i in group[1:]:
            axes[i].sharex(axes[group[0]])
        real_span = max(lengths[i] for i in group)
        instant = real_span <= 0  # everything at one instant: show the order, not 0-1 s
        span = real_span if not instant else 1.0
        if any(w.end is None for i in group for member in trees[i]
               for w in waits(member.history, member.ended_at)):
            span *= 1.25          # room to show a wait that has no end yet
        shown, size = time_unit(span) if unit is None else (unit, sizes[unit])
        right = span / size * 1.03
        for i in group:
            right = max(right, _draw_run(axes[i], runs[i], layouts[i], origins[i], size,
                                         span / size, width, legend, instant=instant))
        axes[group[0]].set_xlim(-0.01 * span / size, right)
        if instant:
            axes[group[0]].set_xticks([0.0])
        origin = origins[group[0]]
        since = "" if align == "clock" and origin == 0 else (
            " since start" if align == "start" or source != {"durablelab"}
            else f" since t = {duration_text(origin)}")
        for i in group:
            if not labelled[i]:
                axes[i].tick_params(axis="x", labelbottom=False)
                continue
            axes[i].set_xlabel(f"{clock}{since} ({shown})" if not instant else
                               f"{clock}: every event at t = {duration_text(origin)} "
                               f"(bars side by side in the order they happened)")
    if title:
        fig.suptitle(title, fontsize=11)
    legend.draw(plots, width)
    thin_labels(fig)
    return fig


def _has_order(run) -> bool:
    """Whether a run drawn at one instant has an order to show: more than one attempt or
    wait, or a crash of its own (a single attempt at t = 0 is as clear on a time axis)."""
    steps = len(activity_attempts(run)) + len(waits(run.history, run.ended_at))
    return steps > 1 or bool((run.crashes.run_id == run.run_id).any())


def _draw_run(ax, run, layout, origin, size, span, width, legend, instant=False):
    """Draw one run into `ax`: lanes, attempts, backoffs, waits, crashes and wake-ups, and
    the lanes of each child expanded under its bar (`layout`: `children.layout`'s labels
    and blocks). `instant`: everything happened at one instant, so each attempt gets a slot
    of its own, in the order of the run's positions, across lanes."""
    x = lambda t: (t - origin) / size                              # noqa: E731
    names, blocks = layout
    min_width = (0.04 if instant else _MIN_WIDTH) * span
    char = _char_width(span, width)
    cut, slots = _draw_lanes(ax, blocks[0], x, span, min_width, char, legend, instant)
    right = len(slots) * min_width if instant else -math.inf
    starts = {id(blocks[0]): slots}
    child_crashes = []       # (crash row, x) of each expanded child's own crashes
    for block in blocks[1:]:
        # A child drawn in order starts its slots where its parent's order started it.
        offset = starts[id(block.parent)].after(block.position) if instant else 0.0
        child_cut, starts[id(block)] = _draw_lanes(ax, block, x, span, min_width, char,
                                                   legend, instant, offset)
        if instant:
            right = max(right, offset + len(starts[id(block)]) * min_width)
        own = block.run.crashes
        own = own[own.run_id == block.run.run_id].sort_values("crashed_at", kind="stable")
        child_crashes += zip(own.itertuples(index=False),
                             crash_places(own, block.run.run_id, child_cut,
                                          starts[id(block)], x))
        rows = [row for b in blocks if _within(b, block) for row in b.rows.values()]
        ax.axhspan(block.bar_row - 0.5, max(rows) + 0.5, facecolor=CHILD_SHADE,
                   alpha=CHILD_ALPHA, edgecolor="none", zorder=0,
                   gid=f"child-lanes:{block.run.run_id}")
        # a rule over each child's bar, so two children's shades that touch stay apart
        ax.axhline(block.bar_row - 0.5, color="#bbbbbb", linewidth=0.6, zorder=1)
        legend.add("children")
    expanded = {b.run.run_id: kids.short_id(b.run.run_id, 16) for b in blocks[1:]}
    return max(right, _draw_marks(ax, run, names, x, span, width, char, min_width, legend,
                                  instant, cut, slots, expanded, child_crashes))


def _within(block, ancestor) -> bool:
    while block is not None:
        if block is ancestor:
            return True
        block = block.parent
    return False


def _draw_lanes(ax, block, x, span, min_width, char, legend, instant, offset=0.0):
    """Draw one run's lanes (`block.rows`: lane name -> row): attempts, backoffs, child
    and Nexus spans, messages and waits. Returns where crashes cut attempts off
    (position -> x) and the run's slots when drawn in order (None on a time axis)."""
    run, lane_of = block.run, block.rows
    attempts = activity_attempts(run)
    run_waits = waits(run.history, run.ended_at)
    slots = Slots(attempts, run_waits, min_width, offset) if instant else None
    cut: dict = {}           # position -> where each attempt a crash cut off ends

    for name, group in attempts.groupby("lane", sort=False):
        y, last_end, last_real_end = lane_of[name], -math.inf, -math.inf
        for index, row in zip(group.sort_values("started_at", kind="stable").index,
                              group.sort_values("started_at", kind="stable").itertuples(
                                  index=False)):
            start, end = x(row.started_at), x(row.ended_at)
            # A bar padded to min_width pushes the next one right instead of hiding it;
            # attempts that really overlap (parallel calls) keep their true positions.
            if instant:
                start = slots.attempt[index]
            elif start >= last_real_end:
                start = max(start, last_end)
            drawn = max(end - start, min_width)
            outcome = row.outcome if row.outcome in PALETTE else None
            ax.add_patch(Rectangle(
                (start, y - 0.3), drawn, 0.6, facecolor=PALETTE.get(outcome, UNKNOWN_COLOUR),
                hatch=HATCHES.get(outcome), edgecolor="#333333", linewidth=0.6, zorder=3,
                gid=f"attempt:{row.position}:{row.attempt}:{row.outcome}"))
            legend.outcome(row.outcome)
            last_end, last_real_end = start + drawn, x(row.ended_at)
            if row.outcome == "crashed":
                cut.setdefault(row.position, []).append(start + drawn)
            if _finite(row.delay) and row.delay > 0:
                ax.add_line(Line2D([x(row.ended_at), x(row.ended_at + row.delay)], [y, y],
                                   color=BACKOFF_COLOUR, linewidth=1.4, zorder=2,
                                   marker="|", markevery=[1], markersize=7,
                                   gid=f"backoff:{row.position}:{row.attempt}"))
                legend.add("backoff")

    for span_row in spans(run).itertuples(index=False):
        y = lane_of[span_row.lane]
        start = x(span_row.start)
        end = span * 1.03 if span_row.end is None else x(span_row.end)
        outcome = span_row.outcome if span_row.outcome in PALETTE else None
        ax.add_patch(Rectangle(
            (start, y - 0.3), max(end - start, min_width), 0.6,
            facecolor=PALETTE.get(outcome, UNKNOWN_COLOUR), edgecolor="#333333",
            linewidth=0.6, linestyle="-" if span_row.end is not None else "--", zorder=3,
            gid=f"{span_row.kind}:{span_row.position}:{span_row.outcome}"))
        legend.outcome(span_row.outcome)

    if MESSAGE_LANE in lane_of:
        y = lane_of[MESSAGE_LANE]
        for row in _messages(run.history).itertuples(index=False):
            marker, _ = MESSAGE_MARKS[row.kind]
            ax.plot([x(row.recorded_at)], [y], marker=marker, markersize=6, linestyle="none",
                    color=WAIT_COLOUR, zorder=4, gid=f"message:{row.kind}:{row.name}")
            legend.add(row.kind)

    if WAIT_LANE in lane_of:
        y = lane_of[WAIT_LANE]
        for k, wait in enumerate(run_waits):
            start = slots.wait[k] if instant else x(wait.start)
            end = span * 1.03 if wait.end is None else x(wait.end)   # open: to the edge
            if instant:
                end = start if wait.end is not None else end
            style = WAIT_STYLES[wait.kind]
            ax.add_patch(Rectangle(
                (start, y - 0.3), max(end - start, min_width), 0.6, facecolor="white",
                edgecolor=WAIT_COLOUR, hatch=style["hatch"], linewidth=1.0,
                linestyle="--" if wait.open else "-", zorder=2,
                gid=f"wait:{wait.kind}:{wait.name}"))
            if wait.end is None:     # an arrow: it goes on past the edge of the picture
                ax.plot([end], [y], marker=">", markersize=7, color=WAIT_COLOUR, zorder=4,
                        clip_on=False)
            legend.add(wait.kind)
            if end - start > char * (len(wait.label) + 2):   # only a label that fits
                ax.text((start + end) / 2, y, wait.label, ha="center", va="center",
                        fontsize=_FONT - 0.5, zorder=6, clip_on=True,
                        bbox={"boxstyle": "round,pad=0.15", "facecolor": "white",
                              "edgecolor": "none"})
    return cut, slots


def _draw_marks(ax, run, names, x, span, width, char, min_width, legend, instant, cut,
                slots, expanded, child_crashes) -> float:
    """The run's crashes and wake-ups, lane labels and titles (`names`: every row's label,
    expanded children's included; `expanded`: their run ids -> the short id a crash label
    names them by; `child_crashes`: (row, x) of their own crashes, drawn as well, since a
    parent's `crashes` lists another run's only when it came after the parent's start).
    Returns where the last wake-up label ends."""
    strip, bottom = -1.0, max(len(names), 1) - 0.45
    crashes = run.crashes.sort_values("crashed_at", kind="stable")
    crash_x = crash_places(crashes, run.run_id, cut, slots, x)
    mine = crashes.assign(at=crash_x, other=crashes.run_id != run.run_id)
    if expanded:   # an expanded child's crash goes where its lanes show it (a cut bar)
        more = [{**row._asdict(), "at": at, "other": True} for row, at in child_crashes]
        mine = mine[~mine.run_id.isin(list(expanded))]
        mine = pd.concat([mine, pd.DataFrame(more, columns=list(mine.columns))],
                         ignore_index=True) if more else mine
    if len(mine):
        bottom += 0.6        # a row under the lanes for the crash labels
    placed = []              # label extents; the run's own crashes get labels first
    for crash in mine.sort_values("other", kind="stable").itertuples():
        at = crash.at
        ax.axvline(at, color=CRASH_COLOUR, linestyle="--", linewidth=1.1, zorder=5,
                   gid=f"crash:{crash.point}")
        text = (f"crash in {expanded[crash.run_id]}: {crash.point}"
                if crash.run_id in expanded else
                "crash (other run)" if crash.other else f"crash: {crash.point}")
        extent = (at - char * (len(text) + 2), at + char * (len(text) + 2))
        if not any(lo < extent[1] and extent[0] < hi for lo, hi in placed):
            _label(ax, at, bottom - 0.3, text, span, char, color=CRASH_COLOUR, zorder=5)
            placed.append(extent)   # both sides: _label may flip it left of the line
        legend.add("crash")

    wakeups = run.wakeups.sort_values("woke_at", kind="stable")
    wakeups = wakeups.assign(x=wakeup_places(wakeups, crashes, crash_x, run.run_id, slots, x))
    right = _draw_wakeups(ax, wakeups, strip, span, width)
    if instant:              # every slot on the axis, however many there are
        right = max(right, (len(slots) + 1) * min_width)
    if len(run.wakeups):
        legend.add("wakeup")

    ax.set_yticks(range(len(names)), names, fontsize=_FONT + 0.5)   # labels: `layout`'s
    ax.set_ylim(bottom, strip - 0.6)
    ax.tick_params(axis="y", length=0)
    ax.tick_params(axis="x", labelsize=_FONT + 0.5)
    ax.text(-0.005, strip, "wake-ups", transform=blended_transform_factory(ax.transAxes,
            ax.transData), ha="right", va="center", fontsize=_FONT, color=WAKEUP_COLOUR)
    ax.axhline(strip + 0.5, color="#dddddd", linewidth=0.8, zorder=1)
    ax.grid(axis="x", color="#eeeeee", zorder=0)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.set_title(f"{run.run_id} · {run.status}", loc="left", fontsize=10)
    source = getattr(run, "source", "durablelab")
    ax.set_title(_short(str(run.workflow).rpartition(":")[2], 40)
                 + ("" if source == "durablelab" else f" · from {source}"), loc="right",
                 fontsize=_FONT, color="#666666")
    if not names:
        ax.text(0.5, 0.3, "no activities or waits recorded", transform=ax.transAxes,
                ha="center", va="center", fontsize=_FONT + 1, color="#666666")
    return right


def _wakeup_text(rows) -> str:
    if len(rows) <= 2:      # one or two: each its own counts
        return " · ".join(f"↻{r.replayed} +{r.recorded}" for r in rows)
    return f"{len(rows)}× ↻{sum(r.replayed for r in rows)} +{sum(r.recorded for r in rows)}"


def _draw_wakeups(ax, wakeups, y, span, width) -> float:
    """Wake-up marks on the strip (at each row's `x`), each group labelled right of its
    last mark. A group
    takes every later mark its label would cover, so no label covers a mark or another
    label (`thin_labels` checks the drawn boxes once the figure is laid out). Returns
    where the last label ends, so the axis can make room for it."""
    char = _char_width(span, width)
    rows = list(wakeups.sort_values("x", kind="stable").itertuples(index=False))
    for row in rows:
        ax.plot([row.x], [y], marker="v", markersize=6, color=WAKEUP_COLOUR,
                linestyle="none", zorder=4, gid=f"wakeup:{row.reason}")
    right, i = -math.inf, 0
    while i < len(rows):
        group = [rows[i]]
        i += 1
        while True:   # grow the group while its label (from its last mark) covers the next
            end = group[-1].x + char * (len(_wakeup_text(group)) + 3)
            if i < len(rows) and rows[i].x - 1.2 * char <= end:
                group.append(rows[i])
                i += 1
            else:
                break
        at = group[-1].x
        ax.text(at + 1.5 * char, y, _wakeup_text(group), ha="left", va="center",
                fontsize=_FONT - 0.5, color=WAKEUP_COLOUR, zorder=4, gid="wakeup-label")
        right = max(right, end)
    return right


def thin_labels(fig) -> int:
    """Remove wake-up labels whose drawn box overlaps another label or a wake-up mark that
    is not the label's own, after the figure is laid out (estimated character widths can
    be off for narrow axes). Returns how many were removed."""
    fig.draw_without_rendering()     # lays the figure out, so boxes are where they land
    removed = 0
    for ax in fig.axes:
        labels = [t for t in ax.texts if t.get_gid() == "wakeup-label"]
        marks = [line for line in ax.lines if str(line.get_gid()).startswith("wakeup:")]
        points = [ax.transData.transform((line.get_xdata()[0], line.get_ydata()[0]))
                  for line in marks]
        radius = 3.5 * fig.dpi / 72      # half a 6-point marker, and a little air
        kept = []
        for label in labels:
            box = label.get_window_extent()
            own_x = ax.transData.transform((label.get_position()[0], 0))[0]
            hits_mark = any(box.x0 - radius < px < box.x1 + radius
                            and box.y0 - radius < py < box.y1 + radius and px > own_x
                            for px, py in points)
            if hits_mark or any(box.overlaps(other) for other in kept):
                label.remove()
                removed += 1
            else:
                kept.append(box)
    return removed


def _label(ax, at, y, text, span, char, **style):
    """A small label right of `at`, or left of it where it would run off the axis."""
    right = at + char * (len(text) + 2) <= span * 1.03
    gap = 1.5 * char
    ax.text(at + gap if right else at - gap, y, text, ha="left" if right else "right",
            va="center", fontsize=_FONT - 0.5, **style)


class _Legend:
    """Collects what a figure shows, then draws one legend listing only that."""

    def __init__(self):
        self.outcomes, self.others = set(), set()

    def outcome(self, outcome):
        self.outcomes.add(outcome if outcome in PALETTE else "other")

    def add(self, what):
        self.others.add(what)

    def draw(self, fig, width):
        handles = [Patch(facecolor=PALETTE[o], edgecolor="#333333", linewidth=0.6,
                         hatch=HATCHES.get(o), label=OUTCOME_LABELS[o])
                   for o in PALETTE if o in self.outcomes]
        if "other" in self.outcomes:
            handles.append(Patch(facecolor=UNKNOWN_COLOUR, edgecolor="#333333", label="other"))
        for kind, style in WAIT_STYLES.items():
            if kind in self.others:
                handles.append(Patch(facecolor="white", edgecolor=WAIT_COLOUR,
                                     hatch=style["hatch"], label=style["label"]))
        if "backoff" in self.others:
            handles.append(Line2D([], [], color=BACKOFF_COLOUR, linewidth=1.4, marker="|",
                                  markersize=7, label=LABELS["backoff"]))
        if "crash" in self.others:
            handles.append(Line2D([], [], color=CRASH_COLOUR, linestyle="--",
                                  label=LABELS["crash"]))
        if "children" in self.others:
            handles.append(Patch(facecolor=(0, 0, 0, CHILD_ALPHA), edgecolor="#bbbbbb",
                                 linewidth=0.6, label=LABELS["children"]))
        for kind, (marker, label) in MESSAGE_MARKS.items():
            if kind in self.others:
                handles.append(Line2D([], [], color=WAIT_COLOUR, marker=marker,
                                      linestyle="none", label=label))
        if "wakeup" in self.others:
            handles.append(Line2D([], [], color=WAKEUP_COLOUR, marker="v", linestyle="none",
                                  label=LABELS["wakeup"]))
        if handles:
            fig.legend(handles=handles, loc="outside lower center", fontsize=_FONT,
                       ncol=min(len(handles), max(2, int(width / 1.8))), frameon=False)


def _lanes(run) -> list[str]:
    """Activity names in order of first position, child workflow and Nexus lanes, the
    messages lane, then the waits lane if there are waits."""
    attempts = activity_attempts(run)
    # An activity's lanes together, in order of its first position; its sub-lanes by number.
    first = attempts.groupby("lane").position.min()
    base = dict(zip(attempts.lane, attempts.activity))
    start = {lane: first[[k for k in first.index if base[k] == base[lane]]].min()
             for lane in first.index}
    number = {lane: int(lane.rpartition(" ·")[2]) if lane != base[lane] else 1
              for lane in first.index}
    names = sorted(first.index, key=lambda lane: (start[lane], number[lane]))
    names += list(dict.fromkeys(spans(run).lane))
    if len(_messages(run.history)):
        names.append(MESSAGE_LANE)
    if run.history.kind.isin(list(_WAIT_STARTS)).any():
        names.append(WAIT_LANE)
    return names


def spans(run) -> pd.DataFrame:
    """Child workflows and Nexus operations (history rows of Temporal imports) as spans:
    kind, position, lane ("child <type>", "nexus <service/operation>"), start, end (None:
    still open when the run was read; the run's end when it had ended), outcome."""
    history = run.history
    rows = []
    if "recorded_at" in history.columns and "handle" in history.columns:
        ends = {int(row.handle): row for row in history[history.kind.eq("child")].itertuples(
            index=False)}
        for row in history[history.kind.eq("start_child")].itertuples(index=False):
            end = ends.get(row.position)   # a child run (ctx.start_child): until its end
            rows.append(("child", row.position, f"child {row.name.rpartition(':')[2]}",
                         row.recorded_at, None if end is None else end.recorded_at,
                         "in_flight" if end is None else end.outcome))
    if "recorded_at" in history.columns:
        for row in history[history.kind.isin(list(SPAN_KINDS))].itertuples(index=False):
            value = row.value if isinstance(row.value, dict) else {}
            start = value.get("started_at")
            end = value.get("ended_at")
            if end is None and _finite(run.ended_at):
                end = run.ended_at
            rows.append((row.kind, row.position, f"{SPAN_KINDS[row.kind]} {row.name}",
                         start if _finite(start) else row.recorded_at,
                         end if _finite(end) else None, row.outcome))
    frame = pd.DataFrame(rows, columns=["kind", "position", "lane", "start", "end", "outcome"])
    lane_of = _spread(zip(frame.lane, frame.position, frame.start, frame.end))   # overlaps
    return frame.assign(lane=[lane_of[key] for key in zip(frame.lane, frame.position)])


def _messages(history: pd.DataFrame) -> pd.DataFrame:
    """Signals, updates and cancels to mark: every update and cancel, and signals only in a
    history without `wait_signal` (where a signal is drawn as the end of its wait instead)."""
    if "recorded_at" not in history.columns or not len(history):
        return history.iloc[0:0]
    kinds = [k for k in MESSAGE_MARKS if k != "signal_received"]
    if not history.kind.eq("wait_signal").any():
        kinds.append("signal_received")
    return history[history.kind.isin(kinds)]


def _times(run) -> list[float]:
    """Every instant the picture places (the earliest is where its axis starts)."""
    times = [run.started_at, run.ended_at]
    attempts = activity_attempts(run)
    times += list(attempts.started_at) + list(attempts.ended_at)
    times += list(attempts.ended_at + attempts.delay.fillna(0))
    times += list(run.history.get("recorded_at", [])) + list(run.wakeups.woke_at)
    times += list(run.crashes.crashed_at)
    return [float(t) for t in times if t is not None and _finite(t)]


def _origin(run) -> float:
    times = _times(run)
    return min(times) if times else 0.0


def _latest(run) -> float:
    """Where a run's picture ends: the latest instant the run recorded (`Run.latest_at`),
    or later where the picture draws on past it: the run's end, a crash, an attempt still
    in flight, the end of a backoff, a wait running on to its deadline."""
    attempts = activity_attempts(run)
    times = [run.latest_at, run.ended_at, *attempts.started_at, *run.crashes.crashed_at,
             *(attempts.ended_at + attempts.delay.fillna(0))]
    times += [wait.end for wait in waits(run.history, run.ended_at) if wait.end is not None]
    return max(float(t) for t in times if _finite(t))


def _finite(value) -> bool:
    try:
        return value is not None and not pd.isna(value) and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _char_width(span: float, width: float) -> float:
    """The width of one label character in x units, for an axes about 80% of `width`."""
    return _FONT * 0.6 / 72 / (0.8 * width) * span


def _lane_label(name: str) -> str:
    """A lane's label, shortened to fit; a sub-lane keeps its number ("·10")."""
    base, dot, k = name.rpartition(" ·")
    if dot and k.isdigit():
        return _short(base, 23 - len(k)) + dot + k
    return _short(name)


def _short(text: str, limit: int = 24) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"
