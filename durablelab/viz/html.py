"""The notebook display of a Run: one small card that answers "where is this run, and what
did it cost to get there?"

Status first, then the result or the error, then the counts that tell the durable-execution
story: how many events history holds, how many attempts the activities took (and how each
ended), how many were retries, how often the worker died, and how many times the code woke
up and replayed history. Everything is escaped, styled inline (no external CSS or JS), and
drawn only from the run's data, so the same run always gives the same HTML.
"""

from __future__ import annotations

import datetime
import json
import math
from html import escape

from ..durations import duration_text
from .plots import OUTCOME_LABELS, PALETTE, activity_attempts

# (background, text): dark text on a light tint reads well in light and dark themes.
BADGES = {
    "completed": ("#DFF3EC", "#005C45"),
    "running": ("#E0EEF9", "#004F7C"),
    "waiting": ("#FFF4D6", "#6B4800"),
    "failed": ("#FBE3D6", "#8A3200"),
    "diverged": ("#F6E1EE", "#7A2C5C"),
    "continued": ("#EEEEEE", "#333333"),
}
RESULT_CHARS = 200
_EPOCH_2001 = 1e9        # a clock reading past this is a Unix time (an imported run)
_YEAR_9999 = 253_402_300_799   # the last second datetime can show


def run_html(run) -> str:
    """A compact HTML card for `run`: id, workflow, status, result or error, time span, and
    counts of events, attempts by outcome, retries, crashes and wake-ups; notes if any."""
    took = None if run.ended_at is None else duration_text(run.ended_at - run.started_at)
    rows = [("started", _instant(run.started_at)),
            ("ended", "—" if took is None else f"{_instant(run.ended_at)} (took {took})"),
            ("history", _plural(len(run.history), "event"))]
    attempts = activity_attempts(run)
    counts = attempts.outcome.value_counts()
    order = [o for o in OUTCOME_LABELS if o in counts] + sorted(set(counts.index) - set(PALETTE))
    outcomes = " · ".join(f"{counts[o]} {OUTCOME_LABELS.get(o, o)}" for o in order)
    rows.append(("attempts", _plural(len(attempts), "attempt")
                 + (f": {outcomes}" if outcomes else "")))
    retries = int((attempts.attempt.fillna(1) > 1).sum())
    rows.append(("retries", str(retries)))
    crashes = run.crashes
    others = int((crashes.run_id != run.run_id).sum()) if len(crashes) else 0
    rows.append(("worker crashes", str(len(crashes))
                 + (f" ({others} caused by another run)" if others else "")))
    wakeups = run.wakeups
    rows.append(("wake-ups", f"{len(wakeups)}, replaying {int(wakeups.replayed.sum())} and "
                             f"recording {_plural(int(wakeups.recorded.sum()), 'event')}"))

    source = getattr(run, "source", "durablelab")
    header = (f'<b style="font-family:monospace">{escape(str(run.run_id))}</b> '
              f"{_badge(run.status)} "
              f'<span style="color:#666">{escape(str(run.workflow))}'
              f'{"" if source == "durablelab" else " · from " + escape(str(source))}</span>')
    parts = [f"<div>{header}</div>", _outcome(run)]
    parts.append('<table style="border-collapse:collapse;margin-top:4px;font-size:90%">'
                 + "".join(f'<tr><td style="padding:1px 12px 1px 0;color:#666;'
                           f'text-align:left">{escape(k)}</td><td style="padding:1px 0;'
                           f'text-align:left">{escape(v)}</td></tr>' for k, v in rows)
                 + "</table>")
    for note in getattr(run, "notes", ()) or ():
        parts.append(f'<div style="margin-top:4px;font-size:90%;font-style:italic">'
                     f"Note: {escape(str(note))}</div>")
    return ('<div style="border:1px solid #ccc;border-radius:6px;padding:8px 12px;'
            'max-width:760px;line-height:1.45">' + "".join(p for p in parts if p) + "</div>")


def _badge(status: str) -> str:
    background, colour = BADGES.get(status, ("#EEEEEE", "#333333"))
    return (f'<span style="background:{background};color:{colour};border-radius:9px;'
            f'padding:1px 8px;font-size:85%;font-weight:600">{escape(str(status))}</span>')


def _outcome(run) -> str:
    """The result as short JSON, or the error's class and first line (the rest folded)."""
    if run.error is not None:
        name, message = _error_parts(run.error)
        first, _, rest = message.partition("\n")
        html = (f'<div style="margin-top:4px"><span style="color:#8A3200;font-weight:600">'
                f"{escape(name)}</span>: {escape(first)}</div>")
        if rest.strip():
            html += (f'<details style="font-size:90%"><summary>full message</summary>'
                     f'<pre style="white-space:pre-wrap;margin:2px 0">{escape(message)}</pre>'
                     f"</details>")
        return html
    if run.status != "completed" and run.result is None:
        return ""
    text = json.dumps(run.result, ensure_ascii=False, default=str)
    if len(text) > RESULT_CHARS:
        text = text[:RESULT_CHARS - 1] + "…"
    return (f'<div style="margin-top:4px">result: <code style="white-space:pre-wrap;'
            f'overflow-wrap:anywhere">'
            f"{escape(text)}</code></div>")


def _error_parts(error) -> tuple[str, str]:
    """(class name, message) of an exception, of its JSON form, or of plain text."""
    if isinstance(error, BaseException):
        return type(error).__name__, str(getattr(error, "message", None) or error)
    if isinstance(error, dict):   # an error as JSON, e.g. from an export
        return str(error.get("class", "error")), str(error.get("message", ""))
    return "error", str(error)


def _instant(seconds) -> str:
    if seconds is None:
        return "—"
    if not math.isfinite(seconds) or abs(seconds) > _YEAR_9999:
        return f"t = {seconds:.6g} s"   # past any calendar: a crafted file's time
    if seconds >= _EPOCH_2001:
        moment = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
        return moment.strftime("%Y-%m-%d %H:%M:%S UTC")
    if seconds < 60:
        return f"t = {duration_text(seconds)}"
    days, rest = divmod(round(seconds), 86400)
    clock = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"t = {days} d {clock}" if days else f"t = {clock}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")
