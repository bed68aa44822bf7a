"""`Server`: a service whose latency grows with the requests it already holds.

Marc Brooker's minimal model of congestive collapse (2023): each request takes
``base + per_request x (requests in flight when it arrives)`` seconds, fixed at arrival. A
client that times out does not take its request back: the server still serves it, so a
burst of time-outs and immediate retries raises the load, which raises latency, which
causes more time-outs. After the trigger is gone the server can stay in that state (a
metastable failure) until backoff, a retry quota or a client-side throttle lets it drain.

`call` answers through `dl.sim.after`, so the activity's attempt ends when the server has
served it, or times out first at its `start_to_close`. It reads the engine's clock of the
attempt in progress, so it needs none of its own; give ``clock=`` to use it outside an
activity.
"""

from __future__ import annotations

import heapq
import math

from ..after import After, after
from ..errors import bad_type, bad_value
from ..heartbeat import attempt_now
from .services import ServiceUnavailable


def _seconds(call: str, name: str, value, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad_type(call, name, f"{name}={value!r} must be a number of seconds")
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise bad_value(call, name, f"{name}={value!r} must be finite and "
                                    f"{'> 0' if positive else '>= 0'} seconds")
    return float(value)


class Server:
    """A simulated service whose latency grows with its load.

    A request arriving at ``t`` with ``n`` requests already in flight takes ``base +
    per_request * n`` seconds: with the defaults, 1.0 s alone, 2.0 s behind 100 others.
    `capacity` bounds the requests in flight (None: unbounded); one that finds the server
    full is refused at once with a `ServiceUnavailable` (503, retryable). Counters:
    ``arrived``, ``refused``, ``served`` (so far), and ``calls`` (``{"at": t}`` per
    request that arrived, which a sweep's load plot reads).
    """

    def __init__(self, capacity: int | None = None, base: float = 1.0,
                 per_request: float = 0.01, clock=None):
        call = "dl.sim.Server(capacity=None, base=1.0, per_request=0.01)"
        if capacity is not None and (isinstance(capacity, bool) or not isinstance(capacity, int)
                                     or capacity < 1):
            raise bad_value(call, "capacity", f"capacity={capacity!r} must be an int >= 1 "
                                              f"(requests in flight at most), or None")
        self.capacity = capacity
        self.base = _seconds(call, "base", base)
        self.per_request = _seconds(call, "per_request", per_request)
        self.clock = clock
        self._ends: list[float] = []    # when each request in flight will have been served
        self.calls: list[dict] = []
        self.refused = 0
        self._done = 0

    def _now(self) -> float:
        now = self.clock.now() if self.clock is not None else attempt_now()
        if now is None:
            raise bad_value("Server.call()", "clock", (
                "called outside an activity attempt and without a clock: call it from "
                "activity code, or build the server with clock=engine.clock"))
        return now

    def in_flight(self, at: float | None = None) -> int:
        """Requests still being served at `at` (default: now)."""
        at = self._now() if at is None else at
        ends = self._ends
        while ends and ends[0] <= at:
            heapq.heappop(ends)
            self._done += 1
        return len(ends)

    @property
    def arrived(self) -> int:
        return len(self.calls)

    @property
    def served(self) -> int:
        """Requests fully served by now (refused ones are not)."""
        self.in_flight()
        return self._done

    def call(self, value=None) -> After:
        """Serve one request arriving now: `dl.sim.after(latency, value=value)`, or a
        refusal (`ServiceUnavailable`, at once) when `capacity` requests are in flight."""
        now = self._now()
        n = self.in_flight(now)
        self.calls.append({"at": now})
        if self.capacity is not None and n >= self.capacity:
            self.refused += 1
            return after(0.0, error=ServiceUnavailable(
                f"server full: {n} requests in flight (capacity={self.capacity})"))
        latency = self.base + self.per_request * n
        heapq.heappush(self._ends, now + latency)
        return after(latency, value=value)

    def __repr__(self) -> str:
        return (f"Server(capacity={self.capacity}, base={self.base:g}, "
                f"per_request={self.per_request:g}: {len(self._ends)} in flight)")


__all__ = ["Server"]
