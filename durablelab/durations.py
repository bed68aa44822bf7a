"""Durations in words: how durablelab says a number of seconds.

Time is float seconds everywhere in durablelab; only what a person reads is in bigger units.
Two forms, for two kinds of reading, both from the one table of units below:

- `duration_text(seconds)`, one unit and three figures: ``90 -> '1.5 min'``,
  ``3600 -> '1 h'``, ``86400 -> '1 day'``. For a label on a chart or a table cell, where it
  must be short.
- `duration_words(seconds)`, up to two whole units: ``150 -> '2 min 30 s'``,
  ``5400 -> '1 h 30 min'``, ``3 * 86400 -> '3 days'``. For a sentence (`dl.diagnose`), where
  "1.5 h" would make the reader multiply.

`time_unit(span)` picks the unit of a time axis `span` seconds long.
"""

from __future__ import annotations

import math

#: (name, seconds) of each unit, smallest first. "days" is said "day" when it is one.
UNITS = (("s", 1.0), ("min", 60.0), ("h", 3600.0), ("days", 86400.0))


def _name(unit: str, count_text: str) -> str:
    return "day" if unit == "days" and count_text == "1" else unit


def time_unit(span: float) -> tuple[str, float]:
    """The unit for an axis `span` seconds long: (name, seconds per unit).
    Under 2 min: s; under 2 h: min; under 2 days: h; else days."""
    for (name, size), (_, bigger) in zip(UNITS, UNITS[1:]):
        if span < 2 * bigger:
            return name, size
    return UNITS[-1]


def duration_text(seconds: float) -> str:
    """A duration in its largest whole unit: 3600 -> '1 h', 90 -> '1.5 min'."""
    seconds = float(seconds)
    name, size = next(((n, s) for n, s in reversed(UNITS) if abs(seconds) >= s), UNITS[0])
    value = seconds / size
    text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return f"{text} {_name(name, text)}"


def duration_words(seconds) -> str:
    """Seconds in the largest units that keep it short: 4 s, 2 min 30 s, 1 h 5 min, 3 days
    ("?" for a missing value). Under a minute it keeps three or four figures (12.5 s);
    from a minute on it counts whole seconds and says the two largest units."""
    try:
        seconds = float(seconds)
    except (TypeError, ValueError):     # None, pandas' NA
        return "?"
    if math.isnan(seconds):
        return "?"
    if seconds == math.inf:   # no whole units to count (round() would raise)
        return "forever"
    if seconds < 60:
        return f"{seconds:.3g} s" if seconds < 10 else f"{seconds:.4g} s"
    parts, rest = [], round(seconds)
    for name, size in reversed(UNITS):
        count, rest = divmod(rest, int(size))
        if count:
            parts.append(f"{count} {_name(name, str(count))}")
    return " ".join(parts[:2])


__all__ = ["duration_text", "duration_words", "time_unit", "UNITS"]
