"""A trace as a picture: the OpenTelemetry spans of one run as bars on a time axis.

A trace viewer (Jaeger, Grafana Tempo, Honeycomb) draws what `dl.tracing.instrument` emits
as nested bars. This draws the same spans in a notebook, from the SDK's in-memory exporter,
so a lesson can show a trace without a collector: the run's span on top, its wake-ups in a
lane below it, then one lane per activity with a bar per attempt, coloured by how it ended
(the span's ``durablelab.error_class``). The spans carry the engine's clock, so a run that
waited three virtual days is three days wide here, as in any viewer.

Virtual time makes most attempts and wake-ups take 0 s, so every bar gets a minimum
visible width; `start` and `until` cut a window (seconds since the run's start) to look
at a busy minute up close.
"""

from __future__ import annotations

from matplotlib.patches import Patch

from ..durations import UNITS, duration_text, time_unit
from ..errors import bad_type, bad_value
from .plots import PALETTE, Figure

_NS = 1e9
#: colours of the attempts by the error class they ended with (Okabe-Ito, as the timeline).
ERROR_COLOURS = {None: PALETTE["ok"], "Transient": PALETTE["transient"],
                 "RateLimited": PALETTE["rate_limited"], "ModelOutputError": PALETTE["malformed"],
                 "NonRetryable": PALETTE["non_retryable"]}
_HATCH = {"RateLimited": "....", "NonRetryable": "xxxx", "ModelOutputError": "\\\\\\\\"}
RUN_COLOUR, WAKEUP_COLOUR, OTHER_ERROR = "#0072B2", "#444444", "#D55E00"
_MIN_WIDTH = 0.006          # of the axis span


def trace_plot(spans, run_id: str | None = None, *, unit: str | None = None,
               start: float | None = None, until: float | None = None, width: float = 9.0,
               title: str | None = None) -> Figure:
    """A Figure of one run's spans: run, wake-ups, and each activity's attempts.

    Args:
        spans: finished OpenTelemetry spans (``exporter.get_finished_spans()`` of an
            `InMemorySpanExporter` behind `dl.tracing.instrument`).
        run_id: the run to draw; may be left out when the spans are of one run only.
        unit: the x axis unit, "s", "min", "h" or "days"; by default it follows the span.
        start, until: a window, in seconds since the run's start (default: all of it).
        width: figure width in inches.
        title: a title; by default the run id and how long its run span lasted.

    Returns a matplotlib Figure (shown as a picture in a notebook). Raises `BadValue` when
    no span is left to draw, when the spans hold several runs and `run_id` is not given,
    or for an unknown unit or an empty window.
    """
    call = "dl.viz.trace_plot"
    try:
        spans = list(spans)
    except TypeError:
        raise bad_type(call, "spans", f"spans is {type(spans).__name__}; give the finished "
                       f"spans of an exporter (exporter.get_finished_spans())") from None
    runs = sorted({_attr(s, "durablelab.run_id") for s in spans} - {None})
    if run_id is None:
        if len(runs) > 1:
            raise bad_value(call, "run_id", f"the spans are of {len(runs)} runs "
                            f"({', '.join(runs[:3])}{', ...' if len(runs) > 3 else ''}); "
                            f"give run_id= to pick one")
        run_id = runs[0] if runs else None
    mine = [s for s in spans if _attr(s, "durablelab.run_id") == run_id
            and s.start_time is not None and s.end_time is not None]
    if not mine:
        raise bad_value(call, "run_id", f"no finished span has durablelab.run_id = "
                        f"{run_id!r}; the spans are of {', '.join(runs[:5]) or 'no run'}. A "
                        f"run's own span ends when the run ends: run it to its end first")
    sizes = dict(UNITS)
    if unit is not None and unit not in sizes:
        raise bad_value(call, "unit", f"unit={unit!r}; use one of {', '.join(sizes)}, or None")
    origin = min(s.start_time for s in mine) / _NS
    end = max(s.end_time for s in mine) / _NS - origin
    left = 0.0 if start is None else float(start)
    right = max(end, left + 1.0) if until is None else float(until)   # 1 s: a run of 0 s
    if not right > left:
        raise bad_value(call, "until", f"the window [{left:g} s, {right:g} s] is empty; give "
                        f"until > start, in seconds since the run's start")
    span = max(right - left, 1e-9)
    shown, size = time_unit(span) if unit is None else (unit, sizes[unit])

    run_spans = [s for s in mine if s.name.startswith("run ")]
    wakeups = [s for s in mine if s.name.startswith("wake-up")]
    attempts = [s for s in mine if s.name.startswith("attempt ")]
    activities = list(dict.fromkeys(_attr(s, "durablelab.activity") or s.name[8:]
                                    for s in sorted(attempts, key=lambda s: s.start_time)))
    lanes = (["run"] if run_spans else []) + (["wake-ups"] if wakeups else []) + activities
    fig = Figure(figsize=(width, 1.3 + 0.36 * len(lanes)), layout="constrained")
    ax = fig.subplots()
    y = {lane: len(lanes) - 1 - i for i, lane in enumerate(lanes)}
    least = _MIN_WIDTH * span

    def bar(s, lane, colour, hatch=None, zorder=2):
        a, b = s.start_time / _NS - origin, s.end_time / _NS - origin
        if b < left or a > right:
            return
        a, b = max(a, left), min(max(b, a + least), right + least)
        ax.barh(y[lane], (b - a) / size, left=a / size, height=0.6, color=colour,
                hatch=hatch, edgecolor="#222222", linewidth=0.4, zorder=zorder)

    for s in run_spans:
        bar(s, "run", RUN_COLOUR)
    for s in wakeups:
        bar(s, "wake-ups", WAKEUP_COLOUR)
    seen = {}
    for s in attempts:
        error = _attr(s, "durablelab.error_class")
        colour = ERROR_COLOURS.get(error, OTHER_ERROR)
        seen.setdefault(error, colour)
        # a failed attempt on top: where bars meet (a whole morning in one sliver of a
        # three-day axis), the failure is what should show
        bar(s, _attr(s, "durablelab.activity") or s.name[8:], colour, _HATCH.get(error),
            zorder=2 if error is None else 3)

    counts = {"run": len(run_spans), "wake-ups": len(wakeups)}
    for name in activities:
        counts[name] = sum(1 for s in attempts
                           if (_attr(s, "durablelab.activity") or s.name[8:]) == name)
    ax.set_yticks([y[lane] for lane in lanes])
    ax.set_yticklabels([lane if lane == "run" else f"{lane} ({counts[lane]})"
                        for lane in lanes], fontsize=8)
    ax.set_ylim(-0.7, len(lanes) - 0.3)
    ax.set_xlim(left / size - 0.01 * span / size, right / size + 0.02 * span / size)
    ax.set_xlabel(f"virtual time since the run started ({shown})")
    ax.grid(axis="x", color="#DDDDDD", linewidth=0.6)
    ax.set_axisbelow(True)
    handles = [Patch(facecolor=RUN_COLOUR, label="run span"),
               Patch(facecolor=WAKEUP_COLOUR, label="wake-up span")]
    handles += [Patch(facecolor=colour, hatch=_HATCH.get(error), edgecolor="#222222",
                      label="attempt ok" if error is None else f"attempt: {error}")
                for error, colour in sorted(seen.items(), key=lambda kv: (kv[0] is not None,
                                                                          str(kv[0])))]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8,
              frameon=False, title="spans", title_fontsize=8)
    status = _attr(run_spans[0], "durablelab.status") if run_spans else None
    window = "" if start is None and until is None else (
        f", window {duration_text(left)} to {duration_text(right)}")
    fig.suptitle(title or f"trace of run {run_id}: {len(mine)} spans over "
                 f"{duration_text(end)}{f' ({status})' if status else ''}{window}",
                 fontsize=10)
    return fig


def _attr(span, key):
    attributes = getattr(span, "attributes", None) or {}
    return attributes.get(key)


__all__ = ["trace_plot", "ERROR_COLOURS"]
