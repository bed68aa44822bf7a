"""ReplayExplorer: step through one wake-up of a run, event by event.

Every time a run wakes up, its workflow code runs again from the top. Its first `ctx` calls
get their answers from history (they are *replayed*: an activity function does not run
again); once history runs out, the calls do new work that is recorded (*executed*). A
`Run.wakeups` row says how many of each a wake-up had: positions 1..replayed came back
from history, the next `recorded` positions were written in that wake-up.

The explorer shows one wake-up as a tape of positions. At each step it puts the history
event at that position (left) beside the code's request for it (right): the workflow line
that asked (`call_site`, shown through `linecache`, which also holds notebook cells), and
whether that request was replayed or executed. It reads only a `Run`'s frames, so it works
the same on a live engine's run, on a run loaded from an export and on an imported history.
"""

from __future__ import annotations

import html
import json
import linecache
import math
import operator
import os
import stat
from pathlib import Path
from typing import Any

import ipywidgets as widgets
from ..errors import BadType

REPLAYED, EXECUTED, NOT_REACHED = "replayed", "executed", "not reached"

# (background, text, border) of each mode, legible on light and dark notebook themes.
COLOURS = {REPLAYED: ("#e8f0fe", "#174ea6", "#4a7bd0"),
           EXECUTED: ("#e6f4ea", "#0d652d", "#34a853"),
           NOT_REACHED: ("#f1f3f4", "#5f6368", "#9aa0a6")}
BADGES = {REPLAYED: "REPLAYED from history", EXECUTED: "EXECUTED in this wake-up",
          NOT_REACHED: "NOT REACHED in this wake-up"}
VALUE_CHARS = 240    # a value longer than this is cut, with its full length said
CONTEXT_LINES = 2    # source lines shown on each side of the line that made the call
TAPE_CELLS = 100     # past this many steps the tape draws one bar per mode
STATIC_STEPS = 200   # the static copy writes out at most this many steps in all
SOURCE_BYTES = 4_000_000   # a call site's file is read only up to this size
LOST_POSITIONS = 10_000     # positions shown past the end of history (lost records)


def human(seconds: float) -> str:
    """A duration in the unit a person would say: '45 s', '15.0 min', '3.0 h', '1.0 d'."""
    for unit, length in (("d", 86400), ("h", 3600), ("min", 60)):
        if abs(seconds) >= length:
            return f"{seconds / length:.1f} {unit}"
    return f"{seconds:.3g} s"


def _missing(value: Any) -> bool:
    """None, NaN or pandas' NA: a cell a frame left empty."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return True
    return type(value).__name__ in ("NAType", "NaTType")


def _int(value: Any, default: int = 0) -> int:
    return default if _missing(value) else int(value)


def _decode(value: Any) -> Any:
    """Temporal payloads decoded for display (base64 and JSON only: nothing runs), by the
    importer's own rules."""
    try:
        from ..importers.temporal_json import decode_payloads
    except ImportError:   # without the importer there are no imported payloads to decode
        return value
    return decode_payloads(value)


def _short(value: Any, decode: bool = False, limit: int = VALUE_CHARS) -> str:
    """A value as one line of JSON text (payloads decoded if `decode`), cut at `limit`
    characters."""
    try:
        text = json.dumps(_decode(value) if decode else value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > limit:
        return f"{text[:limit]}… ({len(text):,} characters)"
    return text


# The events that end a wait: (the wait's ctx call, how it ended), with the name for {}.
WAIT_ENDS = {"timer_fired": ("ctx.sleep()", "the timer fired"),
             "signal_received": ("ctx.wait_signal({})", "signal {} arrived"),
             "signal_timeout": ("ctx.wait_signal({})", "its deadline passed first")}


def call_text(kind: str, name: str, value: Any = None, handle: Any = None) -> str:
    """The ctx call that records an event of `kind`, in the words the code used; for the
    end of work started concurrently (`handle`: the position that started it), that start."""
    quoted = repr(name)
    if not _missing(handle):
        started = "ctx.start_child" if kind == "child" else "ctx.start_activity"
        return f"the end of {started}({quoted}) at position {_int(handle)}"
    seconds = value.get("seconds") if isinstance(value, dict) else None
    return {
        "activity": f"ctx.activity({quoted})",
        "sleep": f"ctx.sleep({seconds:g})" if isinstance(seconds, (int, float)) else "ctx.sleep()",
        "timer_fired": "the timer of ctx.sleep() fired",
        "wait_signal": f"ctx.wait_signal({quoted})",
        "signal_received": f"signal {quoted} arrived for ctx.wait_signal({quoted})",
        "signal_timeout": f"ctx.wait_signal({quoted}) timed out",
        "now": "ctx.now()", "random": "ctx.random()", "uuid": "ctx.uuid()",
        "patched": f"ctx.patched({quoted})",
        "start_activity": f"ctx.start_activity({quoted})",
        "start_child": f"ctx.start_child({quoted})",
        "child": f"child run {quoted} ended",
        "cancelled": "engine.cancel() told the code here",
    }.get(kind, f"{kind} {quoted}")


def source_lines(call_site: str | None, context: int = CONTEXT_LINES):
    """(path, line number, [(number, text), ...]) around a 'file:line' call site, or None
    when the site is unknown or its source is not available here."""
    if not call_site:
        return None
    path, sep, number = call_site.rpartition(":")
    if not sep or not number.isdigit():
        return None
    lineno = int(number)
    lines = _source_of(path)
    if not 1 <= lineno <= len(lines):
        return None
    first, last = max(1, lineno - context), min(len(lines), lineno + context)
    while first < lineno and not lines[first - 1].strip():   # no blank lines at the edges
        first += 1
    while last > lineno and not lines[last - 1].strip():
        last -= 1
    # Indentation kept as written: it shows the block a call sits in (a loop, a saga).
    snippet = [(n, lines[n - 1].rstrip("\n").expandtabs(4)) for n in range(first, last + 1)]
    return path, lineno, snippet


def _source_of(path: str) -> list[str]:
    """The lines of the file a call site names, read only when it is Python source: a cell
    the notebook registered with `linecache`, or a regular ``.py`` file of at most
    SOURCE_BYTES. A call site comes from the run's history, which may be a stranger's
    export: "~/.ssh/id_rsa:1" must not put a private file in the explorer (and in the HTML
    `static_html` writes for sharing), nor "/dev/zero:1" or a FIFO hang it."""
    cached = linecache.cache.get(path)
    if cached is not None and len(cached) == 4 and cached[1] is None:
        return cached[2]   # registered in memory (a notebook cell): no file behind it
    if not path.endswith(".py"):
        return []
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return []
    if not stat.S_ISREG(info.st_mode) or info.st_size > SOURCE_BYTES:
        return []
    linecache.checkcache(path)   # a file edited since it was cached shows as it is now
    return linecache.getlines(path)


def display_path(path: str) -> str:
    """`path` as a reader knows it: relative to the working folder (the notebook's) when it
    is inside it, else relative to the folder holding the package (so a shipped example
    reads "durablelab/examples/onboarding.py", wherever it is installed or copied), else
    as recorded (a notebook cell's name, a file elsewhere)."""
    try:
        target = Path(path).resolve()
    except (OSError, ValueError):
        return path
    package = Path(__file__).resolve().parents[1]
    for base in (Path.cwd().resolve(), package.parent):
        try:
            return target.relative_to(base).as_posix()
        except ValueError:
            continue
    return path


def _table(rows) -> str:
    cells = "".join(
        f'<tr><td style="padding:1px 10px 1px 0;color:#80868b;vertical-align:top;'
        f'white-space:nowrap">{html.escape(key)}</td>'
        f'<td style="padding:1px 0;word-break:break-word">{cell}</td></tr>'
        for key, cell in rows)
    return f'<table style="border-collapse:collapse;font-size:13px">{cells}</table>'


def _badge(mode: str) -> str:
    background, text, border = COLOURS[mode]
    return (f'<div style="display:inline-block;padding:2px 8px;margin-bottom:6px;'
            f'background:{background};color:{text};border:1px solid {border};'
            f'border-radius:3px;font-weight:bold">{html.escape(BADGES[mode])}</div>')


def _pane(title: str, body: str) -> str:
    return (f'<div style="padding:6px 10px;border:1px solid #dadce0;border-radius:4px;'
            f'min-height:150px;line-height:1.4"><div style="font-weight:bold;margin-bottom:4px">'
            f'{html.escape(title)}</div>{body}</div>')


class ReplayExplorer:
    """An ipywidgets view that steps through one wake-up's replay of a run.

    Use it to see, step by step, what the workflow code asked for in one wake-up, what
    history held at that position, and whether the answer was handed back from history
    (replayed: the function did not run) or was new work recorded in that wake-up
    (executed).

    Args:
        run: a `dl.Run` (from `engine.run(run_id)`, `dl.load(path)` or an import). Only its
            frames are read: no engine is needed.
        wakeup: which row of `run.wakeups` to show (0-based; negative counts from the end);
            None shows the last wake-up.

    Controls: a dropdown of wake-ups, a slider over the wake-up's steps with ◀ / ▶, and a
    checkbox that extends the steps to the positions after the wake-up's end. The same
    moves are methods: `next()`, `previous()`, `select_wakeup(i)`. State for tests and
    code: `wakeup_index`, `step`, `steps`, `position`, `mode`, `summary`, `event_html`,
    `code_html`. Raises IndexError when `wakeup` is not a row of `run.wakeups`.

    A durablelab wake-up replays positions 1..replayed and then records the next
    `recorded` positions. A history that records which wake-up wrote each event (an
    optional `wakeup` column in `run.history`, as an importer may provide) is followed
    instead; an imported history without it is shown with that caveat.
    """

    def __init__(self, run, wakeup: int | None = None):
        for frame in ("history", "wakeups"):
            if not hasattr(run, frame):
                raise BadType(f"ReplayExplorer needs a durablelab Run (engine.run(run_id) "
                                f"or dl.load(path)); got {type(run).__name__}, which has no "
                                f".{frame} frame")
        self.run = run
        self._imported = getattr(run, "source", "durablelab") != "durablelab"
        rows = sorted(run.history.to_dict("records"), key=lambda row: _int(row["position"]))
        self._events = {_int(row["position"]): row for row in rows}
        self._wakeups = [(row.get("woke_at"), str(row.get("reason")),
                          _int(row.get("replayed")), _int(row.get("recorded")))
                         for row in run.wakeups.to_dict("records")]
        self._linked = "wakeup" in run.history and run.history["wakeup"].notna().any()
        self._plans = self._plans_of(rows)
        # Per position, read once: a frame lookup per step would cost more than the page.
        self._outcomes, self._crashes = {}, {}
        attempts = getattr(run, "attempts", None)
        if attempts is not None and {"position", "outcome"} <= set(attempts.columns):
            for position, outcome in zip(attempts["position"], attempts["outcome"]):
                self._outcomes.setdefault(_int(position, -1), []).append(str(outcome))
        crashes = getattr(run, "crashes", None)
        for row in [] if crashes is None else crashes.to_dict("records"):
            if row.get("run_id") == run.run_id:
                self._crashes.setdefault(_int(row.get("position"), -1), []).append(row)
        self._recorders = self._recorders_of(rows)
        self._busy = False
        self._walk: list = []          # the positions the slider walks, step 1 first
        self.wakeup_index: int | None = None

        self.dropdown = widgets.Dropdown(
            options=[(self._wakeup_label(i), i) for i in range(len(self._wakeups))],
            description="wake-up", layout=widgets.Layout(width="auto", max_width="640px"))
        self.slider = widgets.IntSlider(value=1, min=1, max=1, description="step",
                                        layout=widgets.Layout(flex="1 1 auto"))
        self.back = widgets.Button(description="◀", tooltip="previous step",
                                   layout=widgets.Layout(width="40px"))
        self.forward = widgets.Button(description="▶", tooltip="next step",
                                      layout=widgets.Layout(width="40px"))
        self.show_rest = widgets.Checkbox(value=False, indent=False,
                                          description="show positions it did not reach",
                                          layout=widgets.Layout(width="auto"))
        self.tape = widgets.HTML()
        self.event_pane = widgets.HTML(layout=widgets.Layout(flex="1 1 0%", min_width="0"))
        self.code_pane = widgets.HTML(layout=widgets.Layout(flex="1 1 0%", min_width="0"))
        self.summary_pane = widgets.HTML()
        self.notes_pane = widgets.HTML(self._notes_html())

        self.dropdown.observe(self._on_dropdown, names="value")
        self.slider.observe(self._on_slider, names="value")
        self.show_rest.observe(self._on_show_rest, names="value")
        self.back.on_click(lambda _: self.previous())
        self.forward.on_click(lambda _: self.next())

        if not self._wakeups:
            self.widget = widgets.VBox([widgets.HTML(self._empty_html()), self.notes_pane])
            return
        self.widget = widgets.VBox([
            self.dropdown,
            widgets.HBox([self.back, self.slider, self.forward, self.show_rest],
                         layout=widgets.Layout(align_items="center")),
            self.tape,
            widgets.HBox([self.event_pane, self.code_pane],
                         layout=widgets.Layout(grid_gap="8px", align_items="stretch")),
            self.summary_pane, self.notes_pane])
        self.select_wakeup(len(self._wakeups) - 1 if wakeup is None else wakeup)

    # --- what each wake-up did --------------------------------------------------------------
    def _plans_of(self, rows: list) -> list[tuple[list, list]]:
        """Per wake-up: (the positions it replayed, the positions it recorded), in order.
        Positions history no longer holds (records lost in a crash) continue the numbering."""
        positions = [_int(row["position"]) for row in rows]
        if self._linked:
            done: dict[int, list] = {}
            for row in rows:
                if not _missing(row.get("wakeup")):
                    done.setdefault(_int(row["wakeup"]), []).append(_int(row["position"]))
            return [(positions[:replayed], done.get(index, []))
                    for index, (_, _, replayed, _) in enumerate(self._wakeups)]
        longest = max((r + n for _, _, r, n in self._wakeups), default=0)
        # Lost records are a wake-up's worth or a few; a file claiming 10**9 (a crafted
        # one) must not make a list of 10**9 positions.
        longest = min(longest, len(positions) + LOST_POSITIONS)
        while len(positions) < longest:
            positions.append(positions[-1] + 1 if positions else 1)
        return [(positions[:replayed], positions[replayed:replayed + recorded])
                for _, _, replayed, recorded in self._wakeups]

    def _recorders_of(self, rows: list) -> dict:
        """position -> the wake-up whose record of it history holds. Without a `wakeup`
        column: the last wake-up that recorded it, since a wake-up records only past the end
        of the history it replayed, so a later one recording the same position means the
        earlier record was lost."""
        if self._linked:
            return {_int(row["position"]): _int(row.get("wakeup"), -1) for row in rows
                    if not _missing(row.get("wakeup"))}
        if self._imported:
            return {}   # durablelab's rule would only guess for another engine's history
        found = {}
        for index, (_, recorded) in enumerate(self._plans):
            found.update(dict.fromkeys(recorded, index))
        return found

    def _positions(self) -> list:
        """The positions the slider walks for this wake-up: its plan, then (with the box
        ticked, or when it has no steps) the positions after its last one."""
        replayed, recorded = self._plans[self.wakeup_index]
        plan = replayed + recorded
        if self.show_rest.value or not plan:
            plan = plan + self._after(plan)
        return plan

    def _after(self, plan: list) -> list:
        """The positions history holds after the last one of `plan`."""
        end = max(plan, default=0)
        return [p for p in self._events if p > end]

    # --- moving -----------------------------------------------------------------------------
    def select_wakeup(self, index: int) -> None:
        """Show wake-up `index` (a row of `run.wakeups`; negative counts from the end), from
        its first step."""
        count = len(self._wakeups)
        try:
            row = operator.index(index)     # numpy integers too, not 1.5
        except TypeError:
            row = None
        if row is None or not -count <= row < count:
            rows = f"{count} wake-up(s), 0 to {count - 1}" if count else "no wake-ups"
            raise IndexError(f"wake-up {index!r} is not a row of run.wakeups: run "
                             f"{self.run.run_id!r} has {rows}")
        self._busy = True
        try:
            self.wakeup_index = row % count
            self.dropdown.value = self.wakeup_index
            self._fit_slider(1)
            replayed, recorded = self._plans[self.wakeup_index]
            self.show_rest.disabled = not self._after(replayed + recorded)
        finally:
            self._busy = False
        self._render()

    def next(self) -> None:
        """One step forward (stays on the last step)."""
        self.slider.value = min(self.slider.value + 1, self.slider.max)

    def previous(self) -> None:
        """One step back (stays on the first step)."""
        self.slider.value = max(self.slider.value - 1, self.slider.min)

    def _fit_slider(self, value: int) -> None:
        self._walk = self._positions()
        self.slider.value = 1
        self.slider.max = max(len(self._walk), 1)
        self.slider.value = min(value, self.slider.max)

    def _on_dropdown(self, change) -> None:
        if not self._busy and change["new"] != self.wakeup_index:
            self.select_wakeup(change["new"])

    def _on_slider(self, change) -> None:
        if not self._busy:
            self._render()

    def _on_show_rest(self, change) -> None:
        if self.wakeup_index is not None:
            self._busy = True
            try:
                self._fit_slider(self.slider.value)
            finally:
                self._busy = False
            self._render()

    # --- state ------------------------------------------------------------------------------
    @property
    def steps(self) -> int:
        """The wake-up's steps: the events it replayed plus those it recorded."""
        if self.wakeup_index is None:
            return 0
        replayed, recorded = self._plans[self.wakeup_index]
        return len(replayed) + len(recorded)

    @property
    def step(self) -> int:
        """The current step, from 1 (0 when the run has no wake-ups)."""
        return 0 if self.wakeup_index is None else self.slider.value

    @property
    def position(self) -> int | None:
        """The history position of this step (in a durablelab run, the step itself: every
        wake-up replays from position 1); None when there is none."""
        if self.wakeup_index is None or not self._walk:
            return None
        return self._walk[self.slider.value - 1]

    @property
    def mode(self) -> str | None:
        """'replayed', 'executed' or 'not reached': what the code did at this step in this
        wake-up."""
        return None if self.wakeup_index is None else self._mode(self.slider.value)

    @property
    def event_html(self) -> str:
        return self.event_pane.value

    @property
    def code_html(self) -> str:
        return self.code_pane.value

    @property
    def summary(self) -> str:
        """One line on the wake-up shown: when and why it woke, what it replayed, recorded."""
        if self.wakeup_index is None:
            return f"run {self.run.run_id!r} has no wake-ups"
        woke_at, reason, replayed, recorded = self._wakeups[self.wakeup_index]
        return (f"woke at {self._when(woke_at)} for {reason}: replayed {replayed} "
                f"event{'' if replayed == 1 else 's'}, recorded {recorded}")

    def _mode(self, step: int) -> str:
        replayed, recorded = self._plans[self.wakeup_index]
        if step <= len(replayed):
            return REPLAYED
        return EXECUTED if step <= len(replayed) + len(recorded) else NOT_REACHED

    def _when(self, instant) -> str:
        """An instant as time since the run started, in human units."""
        if _missing(instant):
            return "an unknown time"
        start = getattr(self.run, "started_at", None)
        return human(instant - start) if not _missing(start) else f"t={instant:g} s"

    def _divergence(self):
        """The run's NonDeterminismError when this wake-up is where replay stopped."""
        error = getattr(self.run, "error", None)
        if (getattr(self.run, "status", None) != "diverged" or error is None
                or self.wakeup_index != len(self._wakeups) - 1):
            return None
        return error if getattr(error, "position", None) is not None else None

    # --- rendering --------------------------------------------------------------------------
    def _render(self) -> None:
        step, position = self.slider.value, self.position
        self.event_pane.value = self._event_html(position)
        self.code_pane.value = self._code_html(step, position)
        self.tape.value = self._tape_html(step)
        divergence = self._divergence()
        summary = self.summary
        if divergence is not None:
            summary += (f"; replay stopped at position {divergence.position}: "
                        f"non-determinism ({getattr(divergence, 'reason', '?')})")
        elif self.wakeup_index == len(self._wakeups) - 1:
            summary += f"; the run is now {getattr(self.run, 'status', '?')}"
        caveat = ""
        if self._imported and not self._linked:
            caveat = (f"<br><i>This {html.escape(str(self.run.source))} history does not say "
                      f"which events each wake-up replayed or recorded: the split shown "
                      f"assumes durablelab's rule (replay from the top, then record).</i>")
        self.summary_pane.value = (f'<div style="margin-top:6px;font-size:13px;line-height:1.4">'
                                   f'{html.escape(summary)}{caveat}</div>')
        self.back.disabled = self.slider.value <= self.slider.min
        self.forward.disabled = self.slider.value >= self.slider.max

    def _wakeup_label(self, index: int) -> str:
        woke_at, reason, replayed, recorded = self._wakeups[index]
        return (f"{index}: woke at {self._when(woke_at)} for {reason} · replayed {replayed}, "
                f"recorded {recorded}")

    def _tape_html(self, current: int) -> str:
        """The steps coloured by mode, the current one marked: a cell per step for a short
        wake-up, a bar per mode for a long one."""
        walk, last = self._walk, len(self._walk)
        if last <= TAPE_CELLS:
            cells = []
            for step, position in enumerate(walk, 1):
                mode = self._mode(step)
                background, text, border = COLOURS[mode]
                event = self._events.get(position)
                what = (call_text(event["kind"], event["name"], event.get("value"),
                                  event.get("handle")) if event else "no event")
                outline = "outline:2px solid #202124;" if step == current else ""
                cells.append(
                    f'<div title="{html.escape(f"position {position}: {what} ({mode})")}" '
                    f'style="flex:1 1 0;min-width:6px;max-width:36px;height:18px;'
                    f'background:{background};color:{text};border:1px solid {border};{outline}'
                    f'font-size:10px;text-align:center;line-height:18px;overflow:hidden">'
                    f'{position if last <= 40 else ""}</div>')
        else:
            replayed, recorded = self._plans[self.wakeup_index]
            ends = [(len(replayed), REPLAYED), (len(replayed) + len(recorded), EXECUTED),
                    (last, NOT_REACHED)]
            cells, first = [], 1
            for end, mode in ends:
                end = min(end, last)
                if end >= first:
                    cells.append(
                        f'<div title="positions {walk[first - 1]}–{walk[end - 1]}: {mode}" '
                        f'style="flex:{end - first + 1} 1 0;height:18px;'
                        f'background:{COLOURS[mode][0]};border:1px solid {COLOURS[mode][2]}">'
                        f'</div>')
                    first = end + 1
            left = 100 * (current - 0.5) / last
            cells.append(f'<div style="position:absolute;left:{left:.2f}%;top:-2px;width:2px;'
                         f'height:22px;background:#202124"></div>')
        legend = " ".join(
            f'<span style="color:{COLOURS[m][1]};background:{COLOURS[m][0]};padding:0 4px">'
            f'{html.escape(m)}</span>' for m in (REPLAYED, EXECUTED, NOT_REACHED))
        where = f"step {current} of {last} · position {walk[current - 1]}" if last else "no steps"
        return (f'<div style="display:flex;gap:1px;margin:4px 0;position:relative">'
                f'{"".join(cells)}</div><div style="font-size:11px;line-height:1.6">'
                f'{where} · {legend}</div>')

    def _event_html(self, position: int | None) -> str:
        if position is None:
            return _pane("History", "<p>History holds no events.</p>")
        event = self._events.get(position)
        title = f"History at position {position}"
        if event is None:
            return _pane(title, f"<p>History has no event at position {position} (what was "
                                f"recorded there was not kept).</p>")
        value, kind = event.get("value"), str(event["kind"])
        call = call_text(kind, event["name"], value, event.get("handle"))
        rows = [("position", html.escape(str(position))),
                ("call", f"<code>{html.escape(call)}</code>"),
                ("kind", html.escape(kind)),
                ("name", html.escape(str(event["name"]))),
                ("value", f"<code>{html.escape(_short(value, decode=self._imported))}</code>")]
        if not _missing(event.get("ok")) and not event["ok"]:
            rows.append(("ok", "<b>False</b>" + (": the activity failed for good"
                                                 if kind == "activity" else "")))
        if not _missing(event.get("recorded_at")):
            when, exact = self._when(event["recorded_at"]), f"{event['recorded_at']:g} s"
            rows.append(("recorded at", html.escape(
                when if when == exact else f"{when} (t={exact})")))
        if not _missing(event.get("attempt")):
            rows.append(("attempt", html.escape(self._attempts_text(position, event))))
        outcome = event.get("outcome")
        if not _missing(outcome):
            error = " ".join(str(event[k]) for k in ("error_class", "error")
                             if not _missing(event.get(k)))
            rows.append(("outcome", html.escape(f"{outcome}: {error}" if error else str(outcome))))
        rows.append(("recorded by", html.escape(self._recorder_text(position))))
        for row in self._crashes.get(position, ()):
            rows.append(("worker crash", html.escape(
                f"{row['point']} at {self._when(row['crashed_at'])}")))
        return _pane(title, _table(rows))

    def _attempts_text(self, position: int, event: dict) -> str:
        text = str(_int(event["attempt"]))
        outcomes = self._outcomes.get(position, [])
        return f"{text} (attempts: {' → '.join(outcomes)})" if len(outcomes) > 1 else text

    def _recorder_text(self, position: int) -> str:
        index = self._recorders.get(position)
        if self._imported and not self._linked:
            return f"not said by this {self.run.source} history"
        if index is None or not 0 <= index < len(self._wakeups):
            return "no wake-up's code (e.g. an attempt that ended between wake-ups)"
        woke_at, reason, _, _ = self._wakeups[index]
        return f"wake-up {index} (woke at {self._when(woke_at)} for {reason})"

    def _code_html(self, step: int, position: int | None) -> str:
        mode, index = self._mode(step), self.wakeup_index
        event = self._events.get(position)
        title = f"The code's request in wake-up {index}"
        if position is None:
            return _pane(title, "<p>This wake-up recorded nothing, and history holds no "
                                "events.</p>")
        parts = [_badge(mode)]
        if mode == NOT_REACHED:
            parts.append(f"<p>{html.escape(self._stop_text(position))}</p>")
        else:
            parts.append(f"<p>{self._request_text(mode, event)}</p>")
        recorder = self._recorders.get(position)
        if mode == EXECUTED and recorder is not None and recorder != index:
            parts.append(
                f'<p style="color:#b06000">⚠ What this wake-up recorded here was lost before '
                f'it was committed (a worker crash); the event shown was recorded again by '
                f'wake-up {recorder}.</p>')
        divergence = self._divergence()
        if divergence is not None and position == divergence.position:
            return _pane(title, "".join(parts) + self._divergence_html(divergence))
        if event is None:
            return _pane(title, "".join(parts))
        site = event.get("call_site")
        if mode == NOT_REACHED and not _missing(site):
            parts.append("<p>History recorded it later, asked for by this line:</p>")
        parts.append(self._site_html(None if _missing(site) else str(site)))
        return _pane(title, "".join(parts))

    @staticmethod
    def _request_text(mode: str, event: dict | None) -> str:
        """What the code asked for at a replayed or executed step, and what came of it (HTML)."""
        if event is None:
            return "History no longer holds what was recorded here."
        kind, name = event["kind"], event["name"]
        if kind in WAIT_ENDS:
            wait, ending = WAIT_ENDS[kind]
            wait = f"<code>{html.escape(wait.format(repr(name)))}</code>"
            ending = html.escape(ending.format(repr(name)))
            if mode == REPLAYED:
                return (f"The code reached {wait}; history says the wait already ended "
                        f"({ending}), so it did not wait again.")
            return f"The wait in {wait} ended in this wake-up ({ending}), and that was recorded."
        handle = event.get("handle")
        if not _missing(handle):   # the end of work the code started earlier, not a call
            end = f"<code>{html.escape(call_text(kind, name, handle=handle))}</code>"
            if mode == REPLAYED:
                ran = ("the child run was not started again" if kind == "child"
                       else "the activity function did not run")
                return (f"History holds {end}: the code waiting for it got the recorded "
                        f"answer back, and {ran}.")
            return f"Recorded in this wake-up: {end}, which the code was waiting for."
        call = f"<code>{html.escape(call_text(kind, name, event.get('value')))}</code>"
        if mode == REPLAYED:
            ran = ("the activity function did not run" if kind == "activity"
                   else "nothing was drawn, computed or recorded again")
            return f"The code asked for {call} and got the recorded answer back: {ran}."
        ran = ("the activity function ran and its outcome was recorded before the code got it"
               if kind == "activity" else "it was recorded in this wake-up")
        return (f"The code asked for {call}; history had nothing here yet, so this was new "
                f"work: {ran}.")

    def _stop_text(self, position: int) -> str:
        replayed, recorded = self._plans[self.wakeup_index]
        plan = replayed + recorded
        text = (f"The code did not reach position {position} in this wake-up: it stopped "
                + (f"after position {max(plan)}" if plan else "before its first recorded "
                   "ctx call"))
        if self.wakeup_index + 1 < len(self._wakeups):
            woke_at, reason, _, _ = self._wakeups[self.wakeup_index + 1]
            text += f"; the next wake-up came at {self._when(woke_at)} for {reason}"
        return text + "."

    def _divergence_html(self, error) -> str:
        requested = getattr(error, "requested", None)
        asked = ("the workflow returned instead" if not requested else
                 f"the code asked for {call_text(requested.get('kind'), requested.get('name'))}"
                 f" instead")
        return (f'<p style="color:#c5221f"><b>Replay stopped here: non-determinism.</b> '
                f'{html.escape(asked)} ({html.escape(str(getattr(error, "reason", "")))}).</p>'
                + self._site_html(getattr(error, "call_site", None)))

    def _site_html(self, site: str | None) -> str:
        """The workflow line at `site` ('file:line') with a little context, or why not."""
        if site is None:
            source = getattr(self.run, "source", "durablelab")
            why = ("" if source == "durablelab"
                   else f" ({source} histories do not record the code line)")
            return f"<p>No call site was recorded for this event{html.escape(why)}.</p>"
        found = source_lines(site)
        path, _, number = site.rpartition(":")
        shown = f"{display_path(path)}:{number}" if os.path.exists(path) else site
        where = (f'<div style="font-size:12px">workflow line <code>{html.escape(shown)}</code>'
                 f'{" (a notebook cell)" if found and not os.path.exists(path) else ""}</div>')
        if found is None:
            return where + ("<p>The source of this line is not available here (the file is "
                            "not on this machine, or has changed).</p>")
        _, lineno, lines = found
        rows, width = [], len(str(lines[-1][0]))
        for number, text in lines:
            mark = "→" if number == lineno else " "
            line = f"{mark} {number:>{width}} │ {html.escape(text)}"
            rows.append(f'<span style="background:#fef7e0;color:#202124;font-weight:bold">'
                        f'{line}</span>' if number == lineno else line)
        return where + ('<pre style="margin:4px 0;padding:4px;font-size:12px;line-height:1.4;'
                        'white-space:pre-wrap;word-break:normal;overflow-wrap:break-word">'
                        + "\n".join(rows) + "</pre>")

    def _notes_html(self) -> str:
        notes = [str(n) for n in getattr(self.run, "notes", ()) or ()]
        source = getattr(self.run, "source", "durablelab")
        if not notes and source == "durablelab":
            return ""
        items = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
        return (f'<div style="margin-top:6px;font-size:13px;line-height:1.4"><b>Notes on this '
                f'history (source: {html.escape(str(source))})</b>'
                + (f'<ul style="margin:2px 0">{items}</ul>' if items else "") + '</div>')

    def _empty_html(self) -> str:
        return (f'<p style="line-height:1.4">Run {html.escape(repr(self.run.run_id))} has no '
                f"wake-ups, so there is no replay to step through: its code has not run yet (a "
                f"run starts inside <code>engine.run_until_idle()</code> or "
                f"<code>engine.advance()</code>), or "
                f"the history it came from does not say when its code ran. Its history holds "
                f"{len(self._events)} event(s).</p>")

    # --- the static copy ------------------------------------------------------------------
    def static_html(self) -> str:
        """Every step of every wake-up written out, one after another: what a page without a
        kernel (the course's static site, a notebook viewer) shows in place of the widget,
        whose controls need Python. The wake-up on show is open; the others unfold."""
        if self.wakeup_index is None:
            return self._empty_html() + self._notes_html()
        shown, walk = self.wakeup_index, self._walk
        total = sum(len(self._static_walk(i)) for i in range(len(self._wakeups)))
        indexes = range(len(self._wakeups)) if total <= STATIC_STEPS else [shown]
        parts = [f'<div style="font-size:13px;line-height:1.4;margin-bottom:4px"><b>Replay '
                 f'explorer, written out</b>: run {html.escape(repr(self.run.run_id))}, '
                 f'every step of '
                 + ("each wake-up" if len(indexes) > 1 else f"wake-up {shown}")
                 + '. In a running notebook this is a widget you step through with ◀ ▶.'
                 + ('' if len(indexes) > 1 else
                    f' ({len(self._wakeups) - 1} other wake-up(s), {total} steps in all, '
                    f'are left out here.)') + '</div>']
        try:
            for index in indexes:
                self.wakeup_index = index
                self._walk = self._static_walk(index)
                steps = "".join(self._static_step(step)
                                for step in range(1, min(len(self._walk), STATIC_STEPS) + 1))
                parts.append(f'<details{" open" if index == shown else ""} style="margin:4px '
                             f'0"><summary style="cursor:pointer;font-size:13px">'
                             f'{html.escape(self._wakeup_label(index))}</summary>{steps}'
                             f'</details>')
        finally:
            self.wakeup_index, self._walk = shown, walk
        return "".join(parts) + self._notes_html()

    def _static_walk(self, index: int) -> list:
        """The positions the slider would walk for wake-up `index`, the box as it is."""
        replayed, recorded = self._plans[index]
        plan = replayed + recorded
        return plan + self._after(plan) if self.show_rest.value or not plan else plan

    def _static_step(self, step: int) -> str:
        position = self._walk[step - 1] if self._walk else None
        return (f'<div style="border-top:1px solid #dadce0;margin-top:6px;padding-top:4px">'
                f'{self._tape_html(step)}<div style="display:flex;gap:8px;'
                f'align-items:stretch"><div style="flex:1 1 0%;min-width:0">'
                f'{self._event_html(position)}</div><div style="flex:1 1 0%;min-width:0">'
                f'{self._code_html(step, position)}</div></div></div>')

    # --- display ----------------------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs) -> dict:
        """The widget, its short text form, and the static copy for a page without a kernel
        (JupyterLab shows the widget; a static page, which cannot run it, the copy)."""
        bundle = dict(self.widget._repr_mimebundle_(**kwargs) or {})
        bundle["text/plain"] = repr(self)   # the widget's own repr is long and unstable
        bundle["text/html"] = self.static_html()
        return bundle

    def __repr__(self) -> str:
        if self.wakeup_index is None:
            return f"ReplayExplorer(run {self.run.run_id!r}: no wake-ups)"
        return (f"ReplayExplorer(run {self.run.run_id!r}, wake-up {self.wakeup_index} of "
                f"0..{len(self._wakeups) - 1}, step {self.step} of {self.slider.max}: position "
                f"{self.position} {self.mode}; {self.summary})")


__all__ = ["ReplayExplorer", "human", "call_text", "source_lines"]
