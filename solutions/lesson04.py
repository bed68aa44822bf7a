"""Lesson 04 (time-outs and heartbeats): solutions."""

import durablelab as dl

#: 04.1: both lost answers were charges; the third attempt's answer is the one recorded.
LOST_ANSWERS = {"charges": 3, "recorded": "ch_3"}

#: 04.3: schedule_to_close ends the hung attempt itself, and leaves no time for a retry.
ONLY_A_TOTAL = {"ended_by": "schedule_to_close", "attempts": 1}

#: 04.2: a charge takes 45 s, so one attempt needs at least 45 s.
START_TO_CLOSE = 45


def approval(ctx: dl.Context, request: dict) -> dict:
    """04.5: the wait ends by its deadline, and None has a path of its own."""
    decision = ctx.wait_signal("approval", timeout=86400)
    if decision is None:
        return {"approved": False, "timed_out": True}
    return {"approved": decision["approved"], "timed_out": False}

#: What `dl.exercises.check` takes for each exercise (tests/test_exercises.py checks them all).
ANSWERS = {"04.1": lambda: LOST_ANSWERS, "04.2": lambda: START_TO_CLOSE,
           "04.3": lambda: ONLY_A_TOTAL, "04.5": lambda: approval}
