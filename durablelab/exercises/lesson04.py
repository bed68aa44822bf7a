"""Checkers for the exercises of lesson 04 (time-outs and heartbeats)."""

from __future__ import annotations

import numbers

from . import Stop, exercise

#: the slow provider of the lesson's "breaking it" cell: every charge takes 45 s.
LATENCY = 45.0


def _attempts_with(start_to_close: float) -> tuple[str, int]:
    """(status, attempts) of a checkout whose charge takes LATENCY s, cut at start_to_close."""
    import durablelab as dl
    from ..sim import Payments
    payments = Payments()

    def charge(amount, idempotency_key=None):
        return payments.charge("c-1", amount, idempotency_key=idempotency_key)

    def checkout(ctx, amount):
        return ctx.activity("charge", charge, amount, start_to_close=start_to_close,
                            policy=dl.RetryPolicy(max_attempts=3, jitter="none"))

    with dl.Engine() as engine:
        run_id = engine.start(checkout, 42.0, faults=[dl.faults.Latency("charge",
                                                                          seconds=LATENCY)])
        engine.run_until_idle()
        run = engine.run(run_id)
    return run.status, len(run.attempts)


@exercise("04.2", "Fit the time-out",
          "the smallest start_to_close, in seconds, that lets the slow checkout complete in "
          "one attempt")
def fit_the_timeout(seconds):
    if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real) or seconds <= 0:
        raise Stop("give a number of seconds greater than 0")
    status, attempts = _attempts_with(float(seconds))
    if status != "completed" or attempts != 1:
        yield False, (f"with start_to_close={seconds:g} the charge is cut before it answers "
                      f"({attempts} attempt(s), the run {status}): look at how long one "
                      f"charge takes in the attempts table")
        return
    yield True, f"start_to_close={seconds:g} lets the charge complete in one attempt"
    status, attempts = _attempts_with(float(seconds) - 1)
    smaller = status == "completed" and attempts == 1
    yield not smaller, ("and a second less would not" if not smaller else
                        "but a smaller time-out works too: the smallest is what you need "
                        "to know before adding a margin")


@exercise("04.5", "Fix the approval",
          "your approval workflow function: a deadline on its wait and a path for None")
def fix_the_approval(fn):
    import durablelab as dl
    if not callable(fn):
        raise Stop("give the workflow function itself, not its result")
    with dl.Engine() as engine:
        silent = engine.start(fn, {"amount": 4200.0}, run_id="nobody-answers")
        answered = engine.start(fn, {"amount": 4200.0}, run_id="approved")
        engine.signal(answered, "approval", {"approved": True})
        engine.run_until_idle()
        silent, answered = engine.run(silent), engine.run(answered)
    if silent.status in ("running", "waiting"):
        yield False, ("with nobody answering, the run still waits forever: give wait_signal "
                      "a deadline= or a timeout=")
    elif silent.status == "failed":
        cause = getattr(silent.error, "cause_class", None) or type(silent.error).__name__
        yield False, (f"with nobody answering, the run fails ({cause}): the wait returns None "
                      f"at its deadline, and the code must take a path for it")
    else:
        yield True, "with nobody answering, the run ends by itself and completes"
        yield silent.result not in (None, {}), ("and its result says what happened"
                                                if silent.result not in (None, {}) else
                                                "but its result is empty: say it timed out")
    yield answered.status == "completed", ("an approval that arrives still completes the run"
                                           if answered.status == "completed" else
                                           f"an approval that arrives leaves the run "
                                           f"{answered.status}")
