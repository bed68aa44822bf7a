"""Retry policies and error classification: classify before you retry.

Retrying everything wastes money and hammers a failing service; retrying nothing turns
every blip into a failed run. So each failure is first put in one of four classes
(`classify`), and only then does a `RetryPolicy` decide how long to wait (`next_delay`).
The wait itself is not a `time.sleep`: the engine records it as a durable timer, so a
crash during a 15-minute backoff resumes the wait instead of restarting it.
"""

from __future__ import annotations

import json
import random
import socket
from dataclasses import dataclass, field

from .breaker import CircuitBreaker
from .errors import ActivityError, ModelOutputError, NonRetryable, RateLimited, Transient


@dataclass(frozen=True)
class RetryPolicy:
    """How often, and after how long, a failed activity attempt is tried again.

    The cap on the wait after attempt *n* (counting from 1) is::

        cap(n) = min(max_interval, initial * backoff ** (n - 1))

    With the defaults (``initial=1, backoff=2, max_interval=60``) the caps after attempts
    1, 2, 3, 4, ... are 1, 2, 4, 8, 16, 32, 60, 60 s. With ``jitter="none"`` the wait is the
    cap; with ``jitter="full"`` it is drawn uniformly from ``[0, cap]`` (seeded by the run,
    so a replay draws the same), which spreads many runs' retries apart instead of letting
    them hit a recovering service in lockstep. A `RateLimited` error waits at least its
    ``retry_after``.

    Nothing retries forever by default: ``max_attempts=3`` counts the first attempt.
    Model-output errors (malformed JSON, schema violations) have their own small budget,
    ``model_output_budget`` retries, apart from ``max_attempts``.
    """

    #: attempts in all, the first included; 1 means never retry.
    max_attempts: int = 3
    #: seconds: the cap after the first failed attempt.
    initial: float = 1.0
    #: factor by which the cap grows after each further failure.
    backoff: float = 2.0
    #: seconds: the cap never grows past this.
    max_interval: float = 60.0
    #: "full" (uniform in [0, cap]) or "none" (exactly the cap).
    jitter: str = "full"
    #: exception classes (or their names) that are never retried, whatever `classify` says.
    non_retryable: tuple = field(default=())
    #: retries allowed for ModelOutputError, apart from max_attempts.
    model_output_budget: int = 2
    #: a `CircuitBreaker` shared by every run calling this activity name, or None.
    breaker: CircuitBreaker | None = None

    def __post_init__(self):
        problems = []
        if not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            problems.append(f"max_attempts={self.max_attempts!r} must be an int >= 1")
        for name in ("initial", "max_interval"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value < 0:
                problems.append(f"{name}={value!r} must be a number of seconds >= 0")
        if not isinstance(self.backoff, (int, float)) or self.backoff < 1:
            problems.append(f"backoff={self.backoff!r} must be a number >= 1")
        if self.jitter not in ("full", "none"):
            problems.append(f"jitter={self.jitter!r} must be 'full' or 'none'")
        if not isinstance(self.model_output_budget, int) or self.model_output_budget < 0:
            problems.append(f"model_output_budget={self.model_output_budget!r} must be an int >= 0")
        if problems:
            raise ValueError("RetryPolicy: " + "; ".join(problems))
        object.__setattr__(self, "non_retryable", tuple(self.non_retryable))

    def cap(self, attempt: int) -> float:
        """The longest wait after failed attempt number `attempt` (1-based)."""
        return min(self.max_interval, self.initial * self.backoff ** (attempt - 1))

    def is_non_retryable(self, exc: BaseException) -> bool:
        for item in self.non_retryable:
            if isinstance(item, str):
                if any(cls.__name__ == item for cls in type(exc).__mro__):
                    return True
            elif isinstance(exc, item):
                return True
        return False


def next_delay(policy: RetryPolicy, attempt: int, error: ActivityError,
               rng: random.Random) -> float:
    """Seconds to wait after failed attempt `attempt` before the next one.

    Pure: the same policy, attempt, error and generator state give the same delay. A
    `RateLimited` error waits max(retry_after, the jittered delay). `rng` is anything with
    `uniform(a, b)`: a `random.Random`, or the hashed draws the engine uses
    (`durablelab.draws.Draws`).
    """
    cap = policy.cap(attempt)
    delay = cap if policy.jitter == "none" else rng.uniform(0.0, cap)
    retry_after = getattr(error, "retry_after", None)
    if isinstance(error, RateLimited) and retry_after is not None:
        delay = max(float(retry_after), delay)
    return delay


# --- classification ----------------------------------------------------------------------

def _status_code(exc: BaseException) -> int | None:
    for owner in (exc, getattr(exc, "response", None)):
        for attr in ("status_code", "status", "code"):
            value = getattr(owner, attr, None)
            if isinstance(value, int) and 100 <= value <= 599:
                return value
    return None


def _retry_after(exc: BaseException) -> float | None:
    value = getattr(exc, "retry_after", None)
    if value is None:
        for owner in (exc, getattr(exc, "response", None)):
            headers = getattr(owner, "headers", None)
            if headers is not None and hasattr(headers, "get"):
                value = headers.get("Retry-After") or headers.get("retry-after")
                if value is not None:
                    break
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None  # an HTTP date: treated as "no hint"; the policy's delay applies


def _names(exc: BaseException) -> list[str]:
    return [cls.__name__ for cls in type(exc).__mro__]


def classify(exc: BaseException) -> ActivityError:
    """Map any exception to one of the four retry classes, as an instance.

    - already a retry class: returned as it is;
    - timeouts, connection errors, HTTP 5xx → `Transient`; HTTP 429 → `RateLimited`
      (carrying the Retry-After seconds when the exception or its response has them);
    - other HTTP 4xx, `ValueError`, `TypeError`, `KeyError`, permission errors →
      `NonRetryable`;
    - validation errors of model output (pydantic's `ValidationError`, malformed JSON) →
      `ModelOutputError`;
    - anything else → `Transient`.

    The result's message is ``"ClassName: message"`` of the original and its
    `cause_class` names the original class.
    """
    if isinstance(exc, ActivityError):
        return exc
    cause = type(exc).__name__
    message = f"{cause}: {exc}" if str(exc) else cause
    status = _status_code(exc)
    names = _names(exc)
    if status == 429:
        return RateLimited(message, retry_after=_retry_after(exc), cause_class=cause)
    if status is not None and status >= 500:
        return Transient(message, cause_class=cause)
    if status is not None and 400 <= status < 500:
        return NonRetryable(message, cause_class=cause)
    if isinstance(exc, (TimeoutError, socket.timeout, ConnectionError)) or any(
            "Timeout" in n or "ConnectionError" in n for n in names):
        return Transient(message, cause_class=cause)
    if isinstance(exc, json.JSONDecodeError) or (
            "ValidationError" in names and type(exc).__module__.startswith("pydantic")):
        return ModelOutputError(message, cause_class=cause)
    if isinstance(exc, (ValueError, TypeError, KeyError, PermissionError)):
        return NonRetryable(message, cause_class=cause)
    return Transient(message, cause_class=cause)


__all__ = ["RetryPolicy", "next_delay", "classify", "Transient", "RateLimited",
           "NonRetryable", "ModelOutputError"]
