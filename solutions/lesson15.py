"""Lesson 15 (parallel tools and sub-agents): solutions."""

import durablelab as dl
from durablelab.examples import research

#: 15.1: made one after the other, the first charge is recorded before the second starts,
#: so a crash can only ever cut off one charge: only the after_effect points break.
SEQUENTIAL = {(1, "buy", "after_effect"), (2, "buy", "after_effect")}

#: 15.2: reads of 0.5 s at one in flight are two requests a second, all the bucket gains;
#: two in flight would be four a second, and the 429s' backoffs make that run slower.
FAST_LIMIT = 1


def research_or_cancelled(ctx, request):
    """15.3: the try sits outside the saga's with-block (inside research.research), so the
    saga sees Cancelled leave it and refunds both charges before this code answers."""
    try:
        return research.research(ctx, request)
    except dl.Cancelled as cancelled:
        return {"cancelled": True, "reason": cancelled.reason}


#: What `dl.exercises.check` takes for each exercise (tests/test_exercises.py checks them all).
ANSWERS = {"15.1": lambda: SEQUENTIAL, "15.2": lambda: FAST_LIMIT,
           "15.3": lambda: research_or_cancelled}
