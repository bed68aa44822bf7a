"""Retry policies and error classification: classify before you retry.

Retrying everything wastes money and hammers a failing service; retrying nothing turns
every blip into a failed run. So each failure is first put in one of four classes
(`classify`), and only then does a `RetryPolicy` decide how long to wait (`next_delay`).
The wait itself is not a `time.sleep`: the engine records it as a durable timer, so a
crash during a 15-minute backoff resumes the wait instead of restarting it.
"""

from __future__ import annotations

import fnmatch
import json
import math
import random
import socket
from dataclasses import dataclass, field, fields

from .breaker import CircuitBreaker
from .limits import AdaptiveThrottle, RetryQuota
from .errors import (ActivityError, ModelOutputError, NonRetryable, RateLimited, Transient,
                     bad_value)


@dataclass(frozen=True)
class RetryPolicy:
    """How often, and after how long, a failed activity attempt is tried again.

    The cap on the wait after attempt *n* (counting from 1) is::

        cap(n) = min(max_interval, initial * backoff ** (n - 1))

    With the defaults (``initial=1, backoff=2, max_interval=60``) the caps after attempts
    1, 2, 3, 4, ... are 1, 2, 4, 8, 16, 32, 60, 60 s. `jitter` says how the wait is drawn
    from it, with ``u`` a number in [0, 1) drawn for the attempt (seeded by the run, so a
    replay draws the same):

    - ``"none"``: exactly ``cap(n)``: 1, 2, 4, 8 s. Many runs failing together come back
      together, in lockstep.
    - ``"full"`` (the default): ``U(0, cap(n)) = u * cap(n)``: after attempt 3, u = 0.25
      waits 1 s. The widest spread, so the least contention (Brooker, 2015).
    - ``"equal"``: ``cap(n)/2 + U(0, cap(n)/2)``: after attempt 3, u = 0.25 waits
      2 + 0.5 = 2.5 s; never less than half the cap, so a run always backs off somewhat.
    - ``"decorrelated"``: ``min(max_interval, U(initial, 3 * previous))``, where
      ``previous`` is the wait before the failed attempt (``initial`` after attempt 1): u =
      0.5 waits U(1, 3) = 2 s after attempt 1, then U(1, 6) = 3.5 s, then U(1, 10.5) =
      5.75 s. It ignores `backoff` and the cap; each wait grows from the last one rather
      than from the attempt number (Brooker's "decorrelated jitter").
    - ``"additive"``: ``cap(n) + U(0, 1)`` seconds: one second at most added *after* the
      cap, as LangGraph's ``RetryPolicy(jitter=True)`` waits (and tenacity's
      ``wait_exponential() + wait_random(0, 1)``): after attempt 3, u = 0.25 waits
      4 + 0.25 = 4.25 s; a wait at the cap is up to 1 s longer than ``max_interval``.

    The first four are as Marc Brooker's "Exponential Backoff And Jitter" (AWS Architecture Blog,
    2015) defines them, with ``initial`` as his base. A `RateLimited` error waits at least
    its ``retry_after``. A wait that would end past the largest instant a float holds (a
    ``max_interval`` of 1e308 late in virtual time) ends at that instant instead: it is
    clamped where the engine schedules it, not refused here, since a policy cannot know
    when it will be used.

    Nothing retries forever by default: ``max_attempts=3`` counts the first attempt;
    ``max_attempts=None`` retries without limit (Temporal's default), so pair it with a
    run time-out (``start(timeout=)``, or a sweep's ``timeout``).
    Model-output errors (malformed JSON, schema violations) have their own small budget,
    ``model_output_budget`` retries, apart from ``max_attempts``.

    Two limits are shared by every run on an engine (one worker's memory, like
    `breaker`): ``budget=dl.RetryQuota(...)``, the AWS SDKs' token bucket, which refuses a
    retry once too many have been made, and ``throttle=dl.AdaptiveThrottle(...)``, the SRE
    book's client-side throttle, which refuses requests locally while the service rejects
    most of them (see `durablelab.limits`).
    """

    #: attempts in all, the first included; 1 means never retry; None means no limit.
    max_attempts: int | None = 3
    #: seconds: the cap after the first failed attempt.
    initial: float = 1.0
    #: factor by which the cap grows after each further failure.
    backoff: float = 2.0
    #: seconds: the cap never grows past this.
    max_interval: float = 60.0
    #: "full" (uniform in [0, cap]), "equal" (cap/2 plus uniform in [0, cap/2]),
    #: "decorrelated" (uniform in [initial, 3 x the previous wait], at most max_interval),
    #: "additive" (the cap plus uniform in [0, 1 s], as LangGraph) or "none" (the cap).
    jitter: str = "full"
    #: exception classes (or their names) that are never retried, whatever `classify` says.
    non_retryable: tuple = field(default=())
    #: retries allowed for ModelOutputError, apart from max_attempts.
    model_output_budget: int = 2
    #: a `CircuitBreaker` shared by every run calling this activity name, or None.
    breaker: CircuitBreaker | None = None
    #: a `RetryQuota` (token bucket) shared by every run calling this activity name, or None.
    budget: RetryQuota | None = None
    #: an `AdaptiveThrottle` shared by every run calling this activity name, or None.
    throttle: AdaptiveThrottle | None = None

    def __post_init__(self):
        problems = []
        if self.max_attempts is not None and (isinstance(self.max_attempts, bool) or not
                                              isinstance(self.max_attempts, int) or
                                              self.max_attempts < 1):
            problems.append(f"max_attempts={self.max_attempts!r} must be an int >= 1, or None "
                            f"for no limit")
        for name in ("initial", "max_interval"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                    0 <= value < math.inf):   # NaN fails too: it would become a timer's instant
                problems.append(f"{name}={value!r} must be a number of seconds >= 0 (and "
                                f"finite: a NaN or infinite wait is a timer that never fires)")
        if isinstance(self.backoff, bool) or not isinstance(self.backoff, (int, float)) or not (
                1 <= self.backoff < math.inf):
            problems.append(f"backoff={self.backoff!r} must be a number >= 1 (and finite: "
                            f"the factor each wait grows by; 1 keeps it constant)")
        if self.jitter not in JITTERS:
            problems.append(f"jitter={self.jitter!r} must be one of "
                            f"{', '.join(repr(j) for j in JITTERS)}")
        if self.budget is not None and not isinstance(self.budget, RetryQuota):
            problems.append(f"budget={self.budget!r} must be a dl.RetryQuota(...) or None")
        if self.throttle is not None and not isinstance(self.throttle, AdaptiveThrottle):
            problems.append(f"throttle={self.throttle!r} must be a dl.AdaptiveThrottle(...) "
                            f"or None")
        if not isinstance(self.model_output_budget, int) or self.model_output_budget < 0:
            problems.append(f"model_output_budget={self.model_output_budget!r} must be an int >= 0")
        if problems:
            raise bad_value("RetryPolicy", problems[0].partition("=")[0],
                            "; ".join(problems) + ". See help(dl.RetryPolicy)")
        object.__setattr__(self, "non_retryable", tuple(self.non_retryable))

    def __repr__(self) -> str:
        # The limits show only when set: a plain policy prints as it always did (lessons
        # compare the text).
        shown = [f"{f.name}={getattr(self, f.name)!r}" for f in fields(self)
                 if f.name not in ("budget", "throttle") or getattr(self, f.name) is not None]
        return f"RetryPolicy({', '.join(shown)})"

    def allows(self, attempts: int) -> bool:
        """Whether another attempt may follow `attempts` attempts (model-output retries aside)."""
        return self.max_attempts is None or attempts < self.max_attempts

    # --- the JSON form: a run stores its policy overrides with it (`start(policies=)`) --
    def to_dict(self) -> dict:
        """The policy as plain JSON data. Exception classes in `non_retryable` become their
        names (a name matches that class or any subclass of that name, as a class does)."""
        return {"max_attempts": self.max_attempts, "initial": self.initial,
                "backoff": self.backoff, "max_interval": self.max_interval,
                "jitter": self.jitter,
                "non_retryable": [item if isinstance(item, str) else item.__name__
                                  for item in self.non_retryable],
                "model_output_budget": self.model_output_budget,
                "breaker": None if self.breaker is None else {
                    "failures": self.breaker.failures,
                    "reset_after": self.breaker.reset_after},
                # only when set: every stored policy written before they existed stays
                # byte for byte what it was
                **({} if self.budget is None else {"budget": self.budget.to_dict()}),
                **({} if self.throttle is None else {"throttle": self.throttle.to_dict()})}

    @classmethod
    def from_dict(cls, data: dict, where: str = "RetryPolicy") -> "RetryPolicy":
        """The policy `to_dict` wrote. Missing keys take their defaults; an unknown key is
        an error naming it and the keys allowed (`where` says whose policy, for the message)."""
        from .errors import policy_error
        if not isinstance(data, dict):
            raise policy_error(where, None, f"expected an object of RetryPolicy fields, got "
                                            f"{type(data).__name__}")
        unknown = sorted(set(data) - set(_FIELDS))
        if unknown:
            raise policy_error(where, unknown[0], "unknown key")
        data = dict(data)
        breaker = data.pop("breaker", None)
        limits = {}
        for key, kind in (("budget", RetryQuota), ("throttle", AdaptiveThrottle)):
            value = data.pop(key, None)
            if value is None:
                continue
            allowed = set(kind.__dataclass_fields__)
            if not isinstance(value, dict) or set(value) - allowed:
                raise policy_error(where, None, f"{key}={value!r} must be an object with "
                                                f"keys among {', '.join(sorted(allowed))}")
            limits[key] = (kind, value)
        if "non_retryable" in data:
            names = data["non_retryable"]
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise policy_error(where, "non_retryable", "must be a list of exception names")
            data["non_retryable"] = tuple(names)
        if breaker is not None and (not isinstance(breaker, dict)
                                    or set(breaker) - {"failures", "reset_after"}):
            raise policy_error(where, None, f"breaker={breaker!r} must be an object with "
                                            f"'failures' and 'reset_after'")
        try:
            if breaker is not None:
                breaker = CircuitBreaker(**breaker)
            built = {key: kind(**value) for key, (kind, value) in limits.items()}
            return cls(**data, breaker=breaker, **built)
        except (TypeError, ValueError) as exc:
            problem = getattr(exc, "message", str(exc))   # ours already names the class
            problem = problem.removeprefix("RetryPolicy: ").removesuffix(
                ". See help(dl.RetryPolicy).")
            raise policy_error(where, None, problem) from None

    def to_json(self) -> str:
        """`to_dict` as JSON text (sorted keys: equal policies give equal text)."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "RetryPolicy":
        """The policy `to_json` wrote; strict about unknown keys, as `from_dict`."""
        from .errors import policy_error
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise policy_error("RetryPolicy.from_json", None, f"not valid JSON: {exc}") from None
        return cls.from_dict(data, "RetryPolicy.from_json")

    def cap(self, attempt: int) -> float:
        """The longest wait after failed attempt number `attempt` (1-based)."""
        try:
            grown = self.initial * self.backoff ** (attempt - 1)
        except OverflowError:   # attempt 1,100 of a policy without max_attempts
            return self.max_interval
        return min(self.max_interval, grown)

    def is_non_retryable(self, exc: BaseException) -> bool:
        for item in self.non_retryable:
            if isinstance(item, str):
                if any(cls.__name__ == item for cls in type(exc).__mro__):
                    return True
            elif isinstance(exc, item):
                return True
        return False


_FIELDS = ("max_attempts", "initial", "backoff", "max_interval", "jitter", "non_retryable",
           "model_output_budget", "breaker", "budget", "throttle")
#: the values `RetryPolicy(jitter=)` takes.
JITTERS = ("full", "equal", "decorrelated", "none", "additive")


class Overrides:
    """Policies that replace those the workflow code passes, by activity glob
    (`Engine.start(policies=)`, a sweep's policy). The first glob, in order, that matches an
    activity's name decides; an activity no glob matches keeps the policy its code gives.
    A run stores them as JSON (`to_json`), so they hold after recovery too."""

    def __init__(self, policies, where: str = "policies"):
        from .errors import policy_error
        if isinstance(policies, RetryPolicy):
            policies = {"*": policies}
        if not isinstance(policies, dict) or not policies:
            raise policy_error(where, None, f"expected a RetryPolicy or a non-empty "
                                            f"{{activity glob: RetryPolicy}}, got {policies!r}")
        self.rules: list[tuple[str, RetryPolicy]] = []
        for glob, policy in policies.items():
            if not isinstance(glob, str) or not glob:
                raise policy_error(where, None, f"activity glob {glob!r} must be a non-empty "
                                                f"string such as 'charge' or 'model*'")
            if isinstance(policy, dict):   # the JSON form
                policy = RetryPolicy.from_dict(policy, f"{where}[{glob!r}]")
            if not isinstance(policy, RetryPolicy):
                raise policy_error(where, None, f"the value for {glob!r} is {policy!r}, not "
                                                f"a dl.RetryPolicy")
            self.rules.append((glob, policy))
        self._found: dict[str, RetryPolicy | None] = {}
        self._json: str | None = None

    def for_activity(self, name: str) -> RetryPolicy | None:
        """The policy replacing `name`'s, or None when no glob matches it."""
        try:
            return self._found[name]
        except KeyError:
            found = next((p for g, p in self.rules
                          if g == name or fnmatch.fnmatchcase(name, g)), None)
            self._found[name] = found
            return found

    def to_dict(self) -> dict:
        return {glob: policy.to_dict() for glob, policy in self.rules}

    def to_json(self) -> str:
        """``json.dumps(self.to_dict())``, computed once: every run of a sweep's cell stores
        the same (the rules never change after construction)."""
        if self._json is None:
            self._json = json.dumps(self.to_dict())
        return self._json


def next_delay(policy: RetryPolicy, attempt: int, error: ActivityError,
               rng: random.Random, previous: float | None = None) -> float:
    """Seconds to wait after failed attempt `attempt` before the next one.

    Pure: the same policy, attempt, error, previous wait and generator state give the same
    delay. `previous` is the wait before attempt `attempt` (only ``"decorrelated"`` jitter
    reads it; None, as after attempt 1, means ``policy.initial``). A `RateLimited` error
    waits max(retry_after, the jittered delay). `rng` is anything with `uniform(a, b)`: a
    `random.Random`, or the hashed draws the engine uses (`durablelab.draws.Draws`). Each
    mode takes one draw, the full mode exactly the draw it always took, so adding modes
    changed no existing run's delays. The formulas are in `RetryPolicy`'s docstring.
    """
    jitter = policy.jitter
    if jitter == "full":
        delay = rng.uniform(0.0, policy.cap(attempt))
    elif jitter == "none":
        delay = policy.cap(attempt)
    elif jitter == "equal":
        half = policy.cap(attempt) / 2
        delay = half + rng.uniform(0.0, half)
    elif jitter == "additive":
        delay = policy.cap(attempt) + rng.uniform(0.0, 1.0)
    else:   # decorrelated
        before = policy.initial if previous is None else previous
        delay = min(policy.max_interval, rng.uniform(policy.initial, 3 * before))
    retry_after = getattr(error, "retry_after", None)
    if isinstance(error, RateLimited) and _finite_seconds(retry_after):
        delay = max(float(retry_after), delay)
    return delay


def previous_wait(rows) -> float | None:
    """The wait before the latest attempt of an activity, from its recorded failed attempts
    (`AttemptRecord` rows, oldest first), or None before any: what decorrelated jitter
    grows from. A row with no wait (an attempt lost with its worker, run again at once)
    is not a backoff the policy chose, so it is passed over."""
    for row in reversed(rows):
        if row.delay > 0:
            return row.delay
    return None


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
        seconds = float(value) if value is not None else None
    except (TypeError, ValueError, OverflowError):
        return None  # an HTTP date: treated as "no hint"; the policy's delay applies
    return seconds if _finite_seconds(seconds) else None


def _finite_seconds(value) -> bool:
    """Whether a server's Retry-After can be waited on: a finite number >= 0. Anything else
    (an inf or NaN header, a negative number) is no hint: a timer at infinity never fires."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and 0 <= value < math.inf)


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
    text = str(exc)
    message = f"{cause}: {text}" if text else cause
    status = _status_code(exc)
    if status == 429:
        return RateLimited(message, retry_after=_retry_after(exc), cause_class=cause)
    if status is not None and status >= 500:
        return Transient(message, cause_class=cause)
    if status is not None and 400 <= status < 500:
        return NonRetryable(message, cause_class=cause)
    names = _names(exc)   # not before: a status decides most HTTP errors (a 429 storm)
    if isinstance(exc, (TimeoutError, socket.timeout, ConnectionError)) or any(
            "Timeout" in n or "ConnectionError" in n for n in names):
        return Transient(message, cause_class=cause)
    if isinstance(exc, json.JSONDecodeError) or (
            "ValidationError" in names and type(exc).__module__.startswith("pydantic")):
        return ModelOutputError(message, cause_class=cause)
    if isinstance(exc, (ValueError, TypeError, KeyError, PermissionError)):
        return NonRetryable(message, cause_class=cause)
    return Transient(message, cause_class=cause)


__all__ = ["RetryPolicy", "Overrides", "next_delay", "previous_wait", "classify", "JITTERS",
           "Transient", "RateLimited", "NonRetryable", "ModelOutputError"]
