"""Lesson 15's checkers refuse the wrong answers learners most often give (each runs the
crash explorer, the research agent or the learner's workflow on the answer)."""

from __future__ import annotations

import pytest
from exercise_cases import refuses

import durablelab as dl
from durablelab.examples import research

CONCURRENT = {(1, "buy", "after_effect"), (1, "buy", "after_record"),
              (2, "buy", "before_activity"), (2, "buy", "after_effect")}


def cancel_caught_inside_the_saga(ctx, request):
    """15.3 with the try inside the with-block: the saga never sees the cancel, so nothing
    is refunded."""
    with ctx.saga() as saga:
        bought = [ctx.start_activity("buy", ctx.world.payments.charge, request["customer"],
                                     price) for price in request["paywalled"].values()]
        for receipt in ctx.gather(*bought):
            saga.add("refund", ctx.world.payments.refund, receipt["id"])
        titles = ctx.activity("search", ctx.world.search, request["question"])
        try:
            notes = ctx.map("read", ctx.world.read, titles, limit=request["limit"],
                            policy=research.MODEL)
        except dl.Cancelled as cancelled:
            return {"cancelled": True, "reason": cancelled.reason}
        return ctx.child(research.write_report, {"question": request["question"],
                                                 "notes": notes})


def catches_activity_failed(ctx, request):
    """15.3 catching the wrong class: dl.Cancelled is not an ActivityFailed."""
    try:
        return research.research(ctx, request)
    except dl.ActivityFailed:
        return {"cancelled": True}


def forgets_the_reason(ctx, request):
    try:
        return research.research(ctx, request)
    except dl.Cancelled:
        return {"cancelled": True}


WRONG = [
    # 15.1: section 4's answer, as if making the charges one by one changed nothing.
    ("15.1", lambda: CONCURRENT, "p1 buy after_record holds", None),
    ("15.1", lambda: {(1, "buy", "after_effect")}, "1 point(s) that break are missing",
     "(2, 'buy'"),
    ("15.1", lambda: "after_effect", "set of (position, activity, point)", None),
    # 15.2: the lesson's limit was for reads of 1 s, not 0.5 s.
    ("15.2", lambda: 2, "still refuses", None),
    ("15.2", lambda: 0, "whole number >= 1", None),
    ("15.2", lambda: "1", "whole number", None),
    # 15.3: the try inside the saga, the wrong exception class, the reason dropped.
    ("15.3", lambda: cancel_caught_inside_the_saga, "0 of the 2 charges were refunded", None),
    ("15.3", lambda: catches_activity_failed, "still ends 'cancelled'", None),
    ("15.3", lambda: forgets_the_reason, "carry the cancel's reason", None),
    ("15.3", lambda: research.research, "still ends 'cancelled'", None),
    ("15.3", lambda: {"cancelled": True}, "give your workflow function itself", None),
]


@pytest.mark.parametrize("exercise_id, answer, words, secret", WRONG,
                         ids=[f"{w[0]}-{i}" for i, w in enumerate(WRONG)])
def test_lesson15_checker_refuses_a_common_wrong_answer(exercise_id, answer, words, secret):
    refuses(exercise_id, answer(), words, secret)


def test_placeholder_is_not_yet_and_says_what_to_give():
    verdict = dl.exercises.check("15.2", None)
    assert not verdict and "no answer yet" in str(verdict) and "whole number" in str(verdict)
