"""Retry limits shared by many runs: a retry quota and a client-side throttle.

Backoff and jitter decide *when* one run retries; they cannot see that a thousand other
runs are retrying against the same struggling service. Two published mechanisms look at
all of a client's calls at once, and both live in the worker's memory, shared by every run
on the engine that calls the same activity name (as a `CircuitBreaker` is; a crash resets
them, as it would a real client's):

- `RetryQuota`, the token bucket of the AWS SDKs' "standard" retry mode. Every retry takes
  tokens from the bucket (`retry_cost`, or `timeout_cost` after a time-out); a success
  puts some back. When the bucket cannot pay for a retry, the retry is not made and the
  attempt fails for good: in an outage the client soon stops multiplying its load, while
  a few blips never empty the bucket.
- `AdaptiveThrottle`, client-side adaptive throttling from Google's SRE book ("Handling
  Overload"). Over the last `window` seconds the client counts the requests it wanted to
  send and those the service accepted, and refuses a new request locally, without
  sending it, with probability ``max(0, (requests - k * accepts) / (requests + 1))``. A
  healthy service accepts nearly all, and nothing is refused; a service rejecting most
  requests sees only about `k` times what it accepts.

A throttle's refusal is recorded as a failed attempt with outcome ``"throttled"`` (cause
``ThrottledLocally``, a `Transient` error, so the policy may retry it later); it never
reached the service, so a service's own counts never include it. A quota's refusal is not
an attempt at all: the activity fails for good with its last real error, and the failure
says the quota was empty.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import asdict, dataclass

from .errors import ModelOutputError, NonRetryable, Transient, limit_error


def _number(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


@dataclass(frozen=True)
class RetryQuota:
    """A token bucket that every retry of an activity must pay from (the AWS SDKs'
    standard retry mode; these defaults are theirs).

    The bucket starts full at `capacity` tokens. A retry after a time-out costs
    `timeout_cost`, any other retry `retry_cost`; a bucket holding less than the cost makes
    no retry, and the attempt fails for good. A success puts back what its activity's last
    retry took, or `success_refund` if it needed no retry, never filling past `capacity`.
    With the defaults, 100 retries in a row empty a full bucket (500 / 5); a retry that then
    succeeds gives its 5 back, a first-try success adds 1, and a retry that fails again
    keeps what it took, so only a service that stays down drains the bucket.
    """

    #: tokens in a full bucket (and in a fresh one).
    capacity: float = 500
    #: tokens a retry takes.
    retry_cost: float = 5
    #: tokens a retry after a time-out takes.
    timeout_cost: float = 10
    #: tokens a success without a retry puts back.
    success_refund: float = 1

    def __post_init__(self):
        for name in ("capacity", "retry_cost", "timeout_cost", "success_refund"):
            value = getattr(self, name)
            if not _number(value) or value < 0:
                raise limit_error("RetryQuota", name, value,
                                  "a finite number of tokens >= 0 (see help(dl.RetryQuota))")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class AdaptiveThrottle:
    """Refuse requests locally while the service rejects most of them (Google SRE book,
    "Handling Overload": client-side adaptive throttling).

    Over the last `window` seconds, ``requests`` counts the attempts the client wanted to
    make (refused ones too) and ``accepts`` those the service answered (a success, or an
    answer no retry can change: a non-retryable error, a malformed model answer). A new
    attempt is refused without being sent with probability::

        max(0, (requests - k * accepts) / (requests + 1))

    With ``k=2``: 100 requests and 60 accepts refuse nobody (100 < 120); 100 requests and
    10 accepts refuse (100 - 20) / 101 = 79 % of new ones, so the service sees about
    ``k`` times what it accepts. `k` must be above 1: at ``k <= 1`` the client refuses
    requests while the service still accepts them (k = 1 and 99 accepts of 100 refuse one
    in 101); the book uses 2.
    """

    #: how many times its accepted requests the client may still send (> 1).
    k: float = 2.0
    #: seconds of recent requests the counts cover (> 0).
    window: float = 120.0

    def __post_init__(self):
        if not _number(self.k) or self.k <= 1:
            raise limit_error("AdaptiveThrottle", "k", self.k, (
                "a finite number > 1 (the SRE book uses 2): at k <= 1 the client refuses "
                "requests the service would accept"))
        if not _number(self.window) or self.window <= 0:
            raise limit_error("AdaptiveThrottle", "window", self.window, (
                "finite seconds > 0 (how far back requests and accepts are counted; the SRE "
                "book uses two minutes, window=120.0)"))

    def to_dict(self) -> dict:
        return asdict(self)


class QuotaState:
    """One activity name's bucket on one worker."""

    def __init__(self, config: RetryQuota):
        self.config = config
        self.tokens = config.capacity
        #: (run id, position) -> tokens its latest retry took (given back on its success).
        self.taken: dict[tuple[str, int], float] = {}
        #: retries refused for want of tokens.
        self.refused = 0

    def take(self, key: tuple[str, int], timed_out: bool) -> str | None:
        """Pay for a retry; None if paid, else why it is not made (for the failure)."""
        cost = self.config.timeout_cost if timed_out else self.config.retry_cost
        if self.tokens < cost:
            self.refused += 1
            self.taken.pop(key, None)
            return (f"the retry quota is empty ({self.tokens:g} of {self.config.capacity:g} "
                    f"tokens left, a retry {'after a time-out ' if timed_out else ''}costs "
                    f"{cost:g}; dl.RetryQuota is shared by every run calling this activity)")
        self.tokens -= cost
        self.taken[key] = cost
        return None

    def ended(self, key: tuple[str, int], ok: bool) -> None:
        """The activity ended: a success puts tokens back; a failure for good none."""
        cost = self.taken.pop(key, None)
        if ok:
            refund = self.config.success_refund if cost is None else cost
            self.tokens = min(self.config.capacity, self.tokens + refund)


class ThrottleState:
    """One activity name's throttle on one worker: the instants of recent requests and
    accepts (virtual seconds, oldest first)."""

    def __init__(self, config: AdaptiveThrottle):
        self.config = config
        self.requests: deque[float] = deque()
        self.accepts: deque[float] = deque()
        #: requests refused locally.
        self.refused = 0

    def _drop_before(self, now: float) -> None:
        oldest = now - self.config.window
        for times in (self.requests, self.accepts):
            while times and times[0] <= oldest:
                times.popleft()

    def probability(self, now: float) -> float:
        """The chance a request made at `now` is refused."""
        self._drop_before(now)
        requests = len(self.requests)
        return max(0.0, (requests - self.config.k * len(self.accepts)) / (requests + 1))

    def refuse(self, name: str, now: float, rng) -> Transient | None:
        """Count a request at `now`; the local refusal, or None to send it. `rng.random()` is
        drawn only when the chance is above 0."""
        p = self.probability(now)
        self.requests.append(now)
        if p <= 0.0 or rng.random() >= p:
            return None
        self.refused += 1
        requests, accepts = len(self.requests) - 1, len(self.accepts)
        return Transient(
            f"throttled locally: the service accepted {accepts} of the last {requests} "
            f"requests to {name!r} within {self.config.window:g}s, so this one was refused "
            f"with probability {p:.2f} and never sent (dl.AdaptiveThrottle(k="
            f"{self.config.k:g}))", cause_class="ThrottledLocally")

    def accepted(self, at: float) -> None:
        """The service accepted a request that ended at `at`."""
        times = self.accepts
        times.append(at)
        i = len(times) - 1     # attempts end in virtual-time order; keep the deque sorted
        while i > 0 and times[i - 1] > at:
            times[i - 1], times[i] = times[i], times[i - 1]
            i -= 1


class SharedLimits:
    """A worker's retry quotas and throttles, by activity name (a policy with other limits
    for the same name starts that name afresh, as breakers do)."""

    def __init__(self):
        self.quotas: dict[str, QuotaState] = {}
        self.throttles: dict[str, ThrottleState] = {}

    def quota(self, name: str, config: RetryQuota) -> QuotaState:
        state = self.quotas.get(name)
        if state is None or state.config != config:
            state = self.quotas[name] = QuotaState(config)
        return state

    def throttle(self, name: str, config: AdaptiveThrottle) -> ThrottleState:
        state = self.throttles.get(name)
        if state is None or state.config != config:
            state = self.throttles[name] = ThrottleState(config)
        return state

    # --- the two places the attempt runner asks ----------------------------------------
    def refuse(self, policy, name: str, now: float, rng) -> Transient | None:
        """At an attempt's start: the throttle's refusal, or None to make the attempt."""
        return self.throttle(name, policy.throttle).refuse(name, now, rng)

    def ended(self, policy, name: str, key: tuple[str, int], at: float, error,
              retrying: bool, timed_out: bool) -> str | None:
        """At an attempt's end (`error` None on success), when the policy would retry
        (`retrying`) or not: count it, and pay for the retry. Returns why the quota refuses
        the retry, or None."""
        if policy.throttle is not None and _accepted(error):
            self.throttle(name, policy.throttle).accepted(at)
        if policy.budget is None:
            return None
        quota = self.quota(name, policy.budget)
        if retrying:
            return quota.take(key, timed_out)
        quota.ended(key, error is None)
        return None


def _accepted(error) -> bool:
    """Whether the service took the request: it answered, even with an error no retry can
    change. A rejection (429, 5xx, time-out) or a local refusal is not an accept."""
    if error is None:
        return True
    return isinstance(error, (NonRetryable, ModelOutputError))


__all__ = ["RetryQuota", "AdaptiveThrottle", "SharedLimits", "QuotaState", "ThrottleState"]
