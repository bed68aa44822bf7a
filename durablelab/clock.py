"""Time is a clock the engine owns.

Workflow code never reads the wall clock: it asks `ctx.now()`, which records the engine's
time once and replays it after. The engine's clock is either a `VirtualClock`, which jumps
straight to the next thing that is due (a three-day approval wait takes microseconds while
history still says three days passed), or a `WallClock`, which waits in real time.
"""

from __future__ import annotations

import time


class VirtualClock:
    """Simulated time in seconds. Only the engine moves it, and only forwards."""

    virtual = True

    def __init__(self, start: float = 0.0):
        self.start = float(start)
        self._now = float(start)

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
