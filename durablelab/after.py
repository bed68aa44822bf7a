"""`dl.sim.after`: the simulated world decides how long a call takes.

Under a `VirtualClock` an attempt takes no time unless something says otherwise. A fault
rule can (`Latency`), but it knows nothing of the world: a service under load answers more
slowly, a write sent over a network arrives later than a read. So simulated service code,
running inside an activity, may answer through ``dl.sim.after(seconds, value)`` (or
``error=``): the activity function returns that object, and the attempt ends `seconds` of
virtual time after it started, with that value, or failing with that error, as if the
function had raised it then.

The function itself runs at the attempt's start instant, and the engine runs attempts in
virtual-time order, so a service sees its requests in the order they reach it; only the
answer waits. Everything an attempt's end obeys still holds: a `start_to_close` shorter
than `seconds` cuts the attempt there as a time-out (the service still did the work, as a
real one would), a `Latency` fault adds to `seconds`, and the value must be JSON.
"""

from __future__ import annotations

import math

from .errors import bad_type, bad_value


class After:
    """An answer that arrives `seconds` after the attempt started: `value`, or `error`
    (an exception instance) raised then. Made by `after`; read by the attempt runner."""

    __slots__ = ("seconds", "value", "error")

    def __init__(self, seconds: float, value=None, error: Exception | None = None):
        self.seconds, self.value, self.error = seconds, value, error

    def __repr__(self) -> str:
        what = f"error={self.error!r}" if self.error is not None else f"value={self.value!r}"
        return f"dl.sim.after({self.seconds:g}, {what})"


def after(seconds: float, value=None, error: Exception | None = None) -> After:
    """Answer an activity `seconds` of virtual time after its attempt started.

    Return it from activity code (``return dl.sim.after(0.02, value=version)``): the
    attempt ends at ``started_at + seconds`` with `value`, or, with ``error=`` an exception
    instance, fails then with that error, classified as a raised one would be
    (`dl.classify`). A `start_to_close` shorter than `seconds` makes it a time-out at
    ``started_at + start_to_close``. `seconds` is a finite number >= 0; give `value` or
    `error`, not both. Raises `BadValue` or `BadType` naming the argument otherwise.
    """
    call = "dl.sim.after(seconds, value=None, error=None)"
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise bad_type(call, "seconds", f"seconds={seconds!r} must be a number of virtual "
                                        f"seconds (an int or a float), e.g. after(0.01, value=1)")
    if not math.isfinite(seconds) or seconds < 0:
        raise bad_value(call, "seconds", f"seconds={seconds!r} must be finite and >= 0: how "
                                         f"long after the attempt's start the answer arrives "
                                         f"(for an answer that never comes, use a Hang fault)")
    if error is not None:
        if not isinstance(error, Exception):
            raise bad_type(call, "error", f"error={error!r} must be an exception instance, "
                                          f"e.g. error=TimeoutError('slow')")
        if value is not None:
            raise bad_value(call, "value", "give value= or error=, not both: an attempt "
                                           "either answers or fails")
    return After(float(seconds), value, error)


__all__ = ["After", "after"]
