"""Checker for the exercise of lesson 00 (the quickstart)."""

from __future__ import annotations

import math
import numbers

from . import Stop, exercise


def _third_attempt_at(retry_after: float) -> float:
    """When the model's third attempt starts in the quickstart run, its 429 carrying
    `retry_after` seconds."""
    import durablelab as dl
    from ..examples import onboarding
    from ..examples.demo import TROUBLE
    plan = dl.FaultPlan([dl.faults.RateLimit("extract_fields", attempts=[1],
                                             retry_after=retry_after),
                         *[rule for rule in TROUBLE.rules if type(rule).__name__ != "RateLimit"]])
    onboarding.world.reset()
    with dl.Engine() as engine:
        run_id = engine.start(onboarding.onboard_vendor, {"vendor_id": "v-42"},
                              run_id="quickstart", faults=plan, seed=7)
        engine.advance(3600)
        attempts = engine.run(run_id).attempts
    onboarding.world.reset()
    model = attempts[attempts.activity == "extract_fields"]
    return float(model[model.attempt == 3].started_at.iloc[0])


def _same_shown(answer: float, truth: float) -> bool:
    """Whether `answer` is `truth` as the lesson's table shows it (one decimal: 301.8 for
    301.75...), or more precisely."""
    return abs(answer - truth) <= 0.05 + 1e-9


@exercise("00.1", "A longer Retry-After",
          "the virtual second at which the model's third attempt starts when its 429 asks "
          "for 300 s (a number)")
def longer_retry_after(seconds):
    if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real):
        raise Stop(f"give a number of seconds, not {type(seconds).__name__}")
    truth = _third_attempt_at(300)
    if _same_shown(seconds, truth):
        yield True, f"the third attempt starts at {seconds:g} s"
        yield True, "the 300 s the server asked for, then the short backoff after broken JSON"
    elif math.isclose(seconds, 300, abs_tol=0.01):
        yield False, ("300 s is when the second attempt starts; the third comes after the "
                      "second answer, the broken JSON, and its backoff")
    elif _same_shown(seconds, _third_attempt_at(30)):
        yield False, "that is the run with a 30 s Retry-After; change the rule to 300 s"
    else:
        yield False, (f"{seconds:g} s is not when the third extract_fields attempt starts; "
                      f"read started_at in run.attempts")
