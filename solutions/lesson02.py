"""Lesson 02 (crashes and idempotency): solutions."""

#: 02.1: the answer is lost after the effect, so the retry calls again (2 calls); a key makes
#: the second call a repeat (1 charge), without keys it is a second charge. The crash window.
LOST_ANSWER = {"calls": 2, "honoured": 1, "ignored": 2, "like": "after_effect"}

#: 02.2: each crash is in its own activity's window: each service is called twice.
CRASH_TWICE = {"payments": 2, "email": 2}

#: 02.3: ctx.uuid() is drawn from the run's seed and position, so the re-executed run draws
#: the same key again: one key.
DISTINCT_KEYS = 1

#: 02.4: in "batch" mode the first wake-up ends at the sleep and commits the charge; the
#: crash takes only the receipt's wake-up. One charge call.
BATCH_CHARGE_CALLS = 1

#: What `dl.exercises.check` takes for each exercise (tests/test_exercises.py checks them all).
ANSWERS = {
    "02.1": lambda: LOST_ANSWER,
    "02.2": lambda: CRASH_TWICE,
    "02.3": lambda: DISTINCT_KEYS,
    "02.4": lambda: BATCH_CHARGE_CALLS,
}
