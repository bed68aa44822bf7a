"""Checkers for the exercises of lesson 03 (retries)."""

from __future__ import annotations

import numbers

from . import Stop, exercise


def _wait_after_429(retry_after: float, initial: float) -> float:
    """The delay the engine chose after a 429 carrying `retry_after`, under
    RetryPolicy(initial=initial, jitter="none")."""
    import durablelab as dl

    def flow(ctx, _):
        return ctx.activity("call", lambda: "ok",
                            policy=dl.RetryPolicy(initial=initial, jitter="none"))

    with dl.Engine() as engine:
        run_id = engine.start(flow, None, faults=[dl.faults.RateLimit(
            "call", attempts=[1], retry_after=retry_after)])
        engine.run_until_idle()
        return float(engine.run(run_id).attempts["delay"].iloc[0])


@exercise("03.1", "Retry-After smaller than the backoff",
          "the seconds the engine waits before the second attempt (a number)")
def retry_after_smaller(seconds):
    if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real):
        raise Stop(f"give a number of seconds, not {type(seconds).__name__}")
    truth = _wait_after_429(retry_after=1, initial=10.0)
    if seconds == truth:
        yield True, f"{seconds:g} s: the engine waits that long"
        yield True, "neither the server's wait nor the policy's is cut short"
    elif seconds == 1:
        yield False, ("1 s is what the server asked for; Retry-After is the least the engine "
                      "waits, and the policy may ask for longer")
    elif seconds == 1 + truth:
        yield False, "the two waits are not added: the engine takes one of them"
    else:
        yield False, f"{seconds:g} s is not the wait the engine chooses here"


@exercise("03.3", "Fix the wrapped refund with a policy",
          "a dl.RetryPolicy that makes the wrapped refund fail after one call")
def wrapped_refund(policy):
    import durablelab as dl
    if not isinstance(policy, dl.RetryPolicy):
        raise Stop(f"give a dl.RetryPolicy, not {type(policy).__name__}")
    calls = []

    def refund_wrapped(charge_id):
        calls.append(charge_id)
        raise RuntimeError(f"refund of {charge_id} failed: HTTP Error 404: Not Found")

    def blip(charge_id, attempt=[0]):
        attempt[0] += 1
        if attempt[0] == 1:
            raise ConnectionResetError("connection reset by peer")
        return {"refunded": charge_id}

    def order(ctx, charge_id):
        return ctx.activity("refund", refund_wrapped, charge_id, policy=policy)

    def flaky(ctx, charge_id):
        return ctx.activity("refund", blip, charge_id, policy=policy)

    with dl.Engine() as engine:
        failed = engine.start(order, "ch_missing", run_id="wrapped")
        healed = engine.start(flaky, "ch_1", run_id="blip")
        engine.run_until_idle()
        failed, healed = engine.run(failed), engine.run(healed)
    yield len(calls) == 1, ("the wrapped 404 is tried once" if len(calls) == 1 else
                            f"the wrapped 404 is still tried {len(calls)} times")
    if len(calls) == 1:
        cls = getattr(failed.error, "error_class", None)
        yield cls == "NonRetryable", ("and fails as NonRetryable" if cls == "NonRetryable" else
                                      f"but it fails as {cls}, not as an error a retry "
                                      f"cannot help")
    yield healed.status == "completed", (
        "a connection reset is still retried" if healed.status == "completed" else
        "but a connection reset is no longer retried either: the policy gives up on every "
        "error, not on the one the wrapper raises")
