"""Time is a clock the engine owns.

Workflow code never reads the wall clock: it asks `ctx.now()`, which records the engine's
time once and replays it after. The engine's clock is either a `VirtualClock`, which jumps
straight to the next thing that is due (a three-day approval wait takes microseconds while
history still says three days passed), or a `WallClock`, which waits in real time.
"""

from __future__ import annotations

import math
import sys
import time

from .errors import bad_type, bad_value

#: The largest instant a float holds. A wait the engine computes itself (a retry backoff,
#: a fault's latency) that would pass it ends here instead of at `inf`, which, once saved,
#: would break every later wake-up on the file. Waits a caller gives are refused instead
#: (`errors.check_later`).
LAST_INSTANT = sys.float_info.max


def within(instant: float, seconds: float) -> float:
    """`seconds`, shortened when need be so that `instant + seconds` stays a finite float
    (at most `LAST_INSTANT`). An infinite `seconds` (an attempt that never answers, which
    is never saved) is kept as it is."""
    if seconds == math.inf or math.isfinite(instant + seconds):
        return seconds
    seconds = LAST_INSTANT - instant
    while not math.isfinite(instant + seconds):   # rounding may still carry the sum over
        seconds = math.nextafter(seconds, 0.0)
    return seconds


def later(instant: float, seconds: float) -> float:
    """`instant + seconds`, held at about `LAST_INSTANT` when the sum would overflow."""
    return instant + within(instant, seconds)


class VirtualClock:
    """Simulated time in seconds. Only the engine moves it, and only forwards."""

    virtual = True

    def __init__(self, start: float = 0.0):
        if isinstance(start, bool) or not isinstance(start, (int, float)):
            raise bad_type("VirtualClock", "start", f"start={start!r} must be a number of "
                                                    f"seconds, for example start=0")
        given = start
        try:
            start = float(start)
        except OverflowError:   # an int past the largest float
            start = math.inf
        if not math.isfinite(start):   # the engine saves its clock: an inf would stay
            raise bad_value("VirtualClock", "start", (
                f"start={given!r} is not a finite number of seconds; an infinite or NaN "
                f"clock would be saved with the store and break every later wake-up. Give a "
                f"finite number, for example start=0"))
        self.start = start
        self._now = start

    def now(self) -> float:
        return self._now

    def advance_to(self, instant: float) -> None:
        """Jump to `instant`; never moves backwards."""
        if instant > self._now:
            self._now = float(instant)

    def sleep_until(self, instant: float) -> None:
        self.advance_to(instant)

    def __repr__(self) -> str:
        return f"VirtualClock(now={self._now:g})"


class WallClock:
    """Real time (`time.time()` seconds); waiting really sleeps."""

    virtual = False

    def now(self) -> float:
        return time.time()

    def advance_to(self, instant: float) -> None:
        """Real time cannot be moved; this only exists so engines treat both clocks alike."""

    def sleep_until(self, instant: float) -> None:
        delay = instant - time.time()
        if delay > 0:
            time.sleep(delay)

    def __repr__(self) -> str:
        return "WallClock()"
