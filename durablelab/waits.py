"""Waits: a durable timer or a signal wait is two history events, its start and its end.

`ctx.sleep(seconds)` records a `sleep` event when the timer starts (its value holds the
seconds and the deadline) and a `timer_fired` event when it fires. `ctx.wait_signal(name)`
records a `wait_signal` event when the wait starts (with its deadline, if any) and then
`signal_received` when a signal ends it or `signal_timeout` when its deadline passes first.
A history imported from Temporal can also end a timer with `timer_canceled`.

A start and its end share their kind's family and their name. Several waits of one name
can stand in one history (a loop that sleeps, a second approval), so they pair first in,
first out: the k-th end of a name closes the k-th start of it. A start with no end yet is
a wait still open when the run was read.

Every view that shows a wait pairs it here: the timeline's waits lane and `dl.diagnose`'s
"waiting on a timer / for a signal".
"""

from __future__ import annotations

from typing import Any

from .history import SIGNAL_RECEIVED, SIGNAL_TIMEOUT, SLEEP, TIMER_FIRED, WAIT_SIGNAL

#: The kinds that start a wait, and the kinds that end one (-> the kind they end).
WAIT_STARTS = (SLEEP, WAIT_SIGNAL)
WAIT_ENDS = {TIMER_FIRED: SLEEP, "timer_canceled": SLEEP,   # canceled: Temporal imports
             SIGNAL_RECEIVED: WAIT_SIGNAL, SIGNAL_TIMEOUT: WAIT_SIGNAL}


def pair_waits(history) -> list[tuple[Any, Any]]:
    """Each wait in `history` (a `Run.history` frame) as (its start row, its end row), the
    end None while the wait is open, in the order the waits started. Rows are those of
    ``history.itertuples(index=False)``."""
    pairs, open_ = [], {}          # open_: (start kind, name) -> indexes into pairs
    for row in history.itertuples(index=False):
        if row.kind in WAIT_STARTS:
            open_.setdefault((row.kind, row.name), []).append(len(pairs))
            pairs.append((row, None))
        elif row.kind in WAIT_ENDS:
            starts = open_.get((WAIT_ENDS[row.kind], row.name))
            if starts:
                index = starts.pop(0)
                pairs[index] = (pairs[index][0], row)
    return pairs


__all__ = ["pair_waits", "WAIT_STARTS", "WAIT_ENDS"]
