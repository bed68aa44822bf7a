"""Checkers for the exercises of lesson 04 (time-outs and heartbeats)."""

from __future__ import annotations

import numbers

from . import Stop, exercise, spelled

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


def _checkout_run(limits: dict, faults: list, honor_keys: bool):
    """(the Run, the provider's effects) of the lesson's checkout under `limits` and `faults`:
    three attempts, no jitter, as the lesson's PAY policy."""
    import durablelab as dl
    from ..sim import Payments
    payments = Payments(honor_keys=honor_keys)
    policy = dl.RetryPolicy(max_attempts=3, initial=1.0, backoff=2.0, jitter="none")

    def charge(amount, idempotency_key=None):
        return payments.charge("c-1", amount, idempotency_key=idempotency_key)

    def checkout(ctx, amount):
        return {"charge_id": ctx.activity("charge", charge, amount, policy=policy,
                                          **limits)["id"]}

    with dl.Engine() as engine:
        run_id = engine.start(checkout, 42.0, faults=faults)
        engine.run_until_idle()
        engine.advance(7 * 86400)
        return engine.run(run_id), payments.effects


def _counted_dict(answer, keys: tuple[str, ...], example: str) -> dict:
    if not isinstance(answer, dict) or set(answer) != set(keys):
        raise Stop(f"give a dict with the keys {', '.join(keys)}, such as {example}")
    return answer


@exercise("04.1", "Two lost answers",
          'a dict {"charges": the charges the provider made, "recorded": the charge id the '
          'run records}')
def two_lost_answers(answer):
    import durablelab as dl
    answer = _counted_dict(answer, ("charges", "recorded"), '{"charges": 0, "recorded": "ch_0"}')
    run, effects = _checkout_run({"start_to_close": 30},
                                 [dl.faults.Timeout("charge", attempts=[1, 2])], False)
    charges, recorded = len(effects), run.result["charge_id"]
    if answer["charges"] == charges:
        yield True, "that many charges: each attempt reached the provider and charged the card"
    elif answer["charges"] in (1, 2):
        yield False, ("too few charges: a lost answer is a charge that happened, and a "
                      "provider that ignores keys charges again on every attempt that reaches it")
    else:
        yield False, f"{answer['charges']!r} is not the number of charges the provider made"
    if answer["recorded"] == recorded:
        yield True, "and the run records the charge whose answer came back"
    elif answer["recorded"] == "ch_1":
        yield False, ("the first charge's answer was lost: the run records only an answer "
                      "that reached it")
    else:
        yield False, f"{answer['recorded']!r} is not the charge the run records"


@exercise("04.3", "Only a total",
          'a dict {"ended_by": the setting that ends the hung attempt, "attempts": how many '
          'attempts are made}')
def only_a_total(answer):
    import durablelab as dl
    answer = _counted_dict(answer, ("ended_by", "attempts"),
                           '{"ended_by": "heartbeat", "attempts": 0}')
    run, _ = _checkout_run({"schedule_to_close": 300}, [dl.faults.Hang("charge")], True)
    error = str(run.attempts["error"].iloc[0])
    settings = ("start_to_close", "schedule_to_close", "heartbeat")
    ended_by = next(s for s in settings if s in error)
    said, slip = (spelled(answer["ended_by"], settings) if isinstance(answer["ended_by"], str)
                  else (None, None))
    if slip:
        yield False, slip
    if said == ended_by:
        yield True, "that setting ends the hung attempt, though it bounds the whole activity"
    elif said == "start_to_close":
        yield False, "this checkout has no start_to_close: something else ends the attempt"
    else:
        yield False, (f"{answer['ended_by']!r} does not end it: read the error of the "
                      f"attempt in run.attempts")
    if answer["attempts"] == len(run.attempts):
        yield True, "and that is every attempt: the total is spent before a retry could start"
    elif answer["attempts"] == 3:
        yield False, ("the policy allows that many, but an attempt starts only while the "
                      "total has time left: read when the next one would start")
    else:
        yield False, f"{answer['attempts']!r} is not the number of attempts made"


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
