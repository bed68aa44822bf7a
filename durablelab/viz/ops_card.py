"""The notebook display of `dl.ops`: one card that answers "is anything stuck, and what is
the fleet costing?"

Alarms first (overdue runs, damaged runs, the oldest wait), then a row per workflow with the
counts an operator scans (runs by status, retry and failure rates, tokens and cost per run,
history size), then the overdue runs themselves. Styled inline and escaped, drawn only from
the board's frames, so the same board always gives the same HTML.
"""

from __future__ import annotations

from html import escape

from ..durations import duration_words

#: overdue runs listed on the card; the rest are in `Ops.overdue`.
SHOWN_OVERDUE = 10
_CELL = 'style="padding:1px 10px 1px 0;text-align:right"'
_HEAD = 'style="padding:1px 10px 1px 0;text-align:right;color:#666;font-weight:normal"'


def ops_html(board) -> str:
    """The HTML card of an `Ops` board."""
    overdue, waiting = board.overdue, board.waiting
    alarm = ("#8A3200", "#FBE3D6") if len(overdue) else ("#005C45", "#DFF3EC")
    headline = (f"{len(overdue)} overdue" if len(overdue) else "nothing overdue")
    parts = [
        f'<div><b>{len(board.frame) + len(board.damaged)} runs</b> of '
        f'{len(board.workflows)} workflow(s) · <span style="color:#666">'
        f'{escape(board.source)} at t = {board.now:g} s</span></div>',
        f'<div style="margin-top:4px"><span style="background:{alarm[1]};color:{alarm[0]};'
        f'border-radius:9px;padding:1px 8px;font-weight:600">{headline}</span> '
        f"{len(waiting)} waiting; oldest waiting {escape(duration_words(board.oldest_waiting))}"
        + (f'; <span style="color:#8A3200">{len(board.damaged)} damaged (set aside)</span>'
           if len(board.damaged) else "") + "</div>"]
    table = board.workflows
    if len(table):
        columns = [("runs", "runs", "{:d}"), ("completed", "completed", "{:d}"),
                   ("failed", "failed", "{:d}"), ("waiting", "waiting", "{:d}"),
                   ("overdue", "overdue", "{:d}"), ("retry_rate", "retry rate", "{:.1%}"),
                   ("failure_rate", "failure rate", "{:.1%}"),
                   ("tokens_per_run", "tokens/run", "{:,.0f}"),
                   ("cost_per_run", "cost/run", "dollars"),
                   ("replayed_per_wakeup", "replayed/wake-up", "{:.1f}"),
                   ("history_bytes_max", "largest history", "bytes")]
        head = "".join(f"<th {_HEAD}>{escape(label)}</th>" for _, label, _ in columns)
        body = ""
        for name, row in table.iterrows():
            cells = "".join(f"<td {_CELL}>{escape(_fmt(row[c], f))}</td>" for c, _, f in columns)
            body += (f'<tr><td style="padding:1px 10px 1px 0;font-family:monospace">'
                     f"{escape(str(name))}</td>{cells}</tr>")
        parts.append('<table style="border-collapse:collapse;margin-top:6px;font-size:90%">'
                     f'<tr><th style="text-align:left;color:#666;font-weight:normal">workflow'
                     f"</th>{head}</tr>{body}</table>")
    if len(overdue):
        items = "".join(
            f'<li><code>{escape(str(r.run_id))}</code> waits on {escape(str(r.on))} since '
            f"t = {r.since:g} s: {escape(duration_words(r.overdue_by))} past its deadline</li>"
            for r in overdue.head(SHOWN_OVERDUE).itertuples())
        more = len(overdue) - SHOWN_OVERDUE
        parts.append(f'<div style="margin-top:6px;font-size:90%">Overdue:<ul style="margin:2px 0">'
                     f"{items}</ul>" + (f"and {more} more in <code>.overdue</code>"
                                        if more > 0 else "") + "</div>")
    return ('<div style="border:1px solid #ccc;border-radius:6px;padding:8px 12px;'
            'max-width:900px;line-height:1.45">' + "".join(parts) + "</div>")


def _fmt(value, spec: str) -> str:
    if spec == "bytes":
        value = float(value)
        for unit in ("B", "kB", "MB", "GB"):
            if value < 1000 or unit == "GB":
                return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
            value /= 1000
    if spec == "dollars":   # a model call costs fractions of a cent: keep them visible
        value = float(value)
        return "$0" if value == 0 else f"${value:.6f}" if value < 0.01 else f"${value:,.2f}"
    if spec == "{:d}":
        return spec.format(int(value))
    return spec.format(float(value))


__all__ = ["ops_html"]
