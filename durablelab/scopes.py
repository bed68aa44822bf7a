"""`ctx.retry`: a retry scope wider than one activity.

A `RetryPolicy` on `ctx.activity` retries that one call. Some work can only be retried
whole: a read-modify-write under optimistic concurrency fails at the write, and writing
again with the version already read fails forever; the read must be made again too. So
``ctx.retry(policy, fn, *args)`` runs ``fn(ctx, *args)`` (workflow code, making several
activities) and, when it raises a retryable `ActivityFailed`, runs it again after a
durable backoff (`ctx.sleep`), up to ``policy.max_attempts`` times in all.

The wait after the scope's n-th failure is ``next_delay(policy, n, ...)``, the policy's
delay for attempt n with its jitter (decorrelated jitter grows from ``initial`` on the
first wait, then from the wait before). Its draw is a pure function of the run's seed, its
id and the history position of the sleep, so a replay sleeps exactly as long again, and the
sleep's recorded seconds match. Each try's activities are new history positions, so they
get their own fault draws and idempotency keys.

Retryable means the activity's last error was `Transient` or `RateLimited` (its own
retries spent), and its cause is not named in ``policy.non_retryable``; a `NonRetryable`
or model-output failure, or an activity abandoned by a cancel, propagates at once.
"""

from __future__ import annotations

from .draws import Draws
from .errors import ActivityFailed
from .retry import next_delay

RETRYABLE = ("Transient", "RateLimited")


def retryable(failure: ActivityFailed, policy) -> bool:
    """Whether the scope may run again after `failure` under `policy`."""
    if getattr(failure, "error_class", None) not in RETRYABLE:
        return False
    cause = getattr(failure, "cause_class", None)
    names = {item if isinstance(item, str) else item.__name__ for item in policy.non_retryable}
    return cause not in names


def run_scope(ctx, policy, fn, args, frame, guarded):
    """Run ``fn(ctx, *args)`` until it returns or fails for good (see the module
    docstring). `frame` is the workflow line of the ``ctx.retry`` call (its sleeps are
    recorded there); `guarded(call)` runs workflow code under the determinism guard."""
    tries, previous = 0, None
    while True:
        tries += 1
        try:
            return guarded(lambda: fn(ctx, *args))
        except ActivityFailed as failure:
            if not retryable(failure, policy) or not policy.allows(tries):
                raise
            state = ctx._state
            position = ctx._cursor.position + 1     # the sleep's: the same on every replay
            rng = Draws(f"ctx.retry:{state.seed}:{state.run_id}:{position}")
            previous = next_delay(policy, tries, failure, rng, previous)
            ctx._sleep(previous, frame)


__all__ = ["run_scope", "retryable"]
