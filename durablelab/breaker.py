"""A circuit breaker: stop hammering a service that keeps failing the same way.

Retries help a service that blips; they hurt one that is down, because every run keeps
knocking. A breaker counts consecutive failures of the same error class for one activity
name, across every run on the engine. After `failures` of them it *opens*: attempts fail
fast, without calling the function, for `reset_after` seconds. Then it lets one attempt
through (*half-open*): success closes it, failure opens it again. A fast failure is a
`Transient` error with cause `CircuitOpen`, so the run's retry policy still decides what
happens next, and the timeline shows how many calls the breaker spared the service.

The breaker's state lives in the worker's memory: a crash resets it, as it would a real
worker's.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import Transient, limit_error


@dataclass(frozen=True)
class CircuitBreaker:
    """Open after `failures` consecutive failures of one error class; try again after
    `reset_after` seconds."""

    failures: int = 5
    reset_after: float = 30.0

    def __post_init__(self):
        if isinstance(self.failures, bool) or not isinstance(self.failures, int) or \
                self.failures < 1:
            raise limit_error("CircuitBreaker", "failures", self.failures,
                              "an int >= 1 (failures in a row that open the breaker)")
        if isinstance(self.reset_after, bool) or not isinstance(self.reset_after, (int, float)) \
                or not 0 <= self.reset_after < float("inf"):
            raise limit_error("CircuitBreaker", "reset_after", self.reset_after,
                              "finite seconds >= 0 (how long it stays open)")


class BreakerState:
    """One activity name's breaker on one engine."""

    def __init__(self, config: CircuitBreaker):
        self.config = config
        self.streak = 0
        self.error_class: str | None = None
        self.opened_at: float | None = None

    def refuse(self, name: str, now: float) -> Transient | None:
        """The fast failure for an attempt starting at `now`, or None to let it through."""
        if self.opened_at is None or now >= self.opened_at + self.config.reset_after:
            return None  # closed, or half-open: one attempt goes through
        return Transient(
            f"circuit open for {name!r}: {self.streak} consecutive {self.error_class} failures; "
            f"not calling it until t={self.opened_at + self.config.reset_after:g}s",
            cause_class="CircuitOpen")

    def record(self, error_class: str | None, now: float) -> None:
        """Count an attempt's outcome: None for success."""
        if error_class is None:
            self.streak, self.error_class, self.opened_at = 0, None, None
            return
        if error_class == self.error_class:
            self.streak += 1
        else:
            self.streak, self.error_class = 1, error_class
        half_open = self.opened_at is not None
        if half_open or self.streak >= self.config.failures:
            self.opened_at = now
