"""Lesson 16 (operating durable agents): solutions."""

DAY = 86400.0


def alerts(board) -> set:
    """16.1: page for every overdue run, and for every wait without a deadline older than a
    day: `.overdue` alone never sees the second kind, only its age does."""
    waiting = board.waiting
    stuck = waiting.overdue | (waiting.deadline.isna() & (waiting.age > DAY))
    return set(waiting[stuck].run_id)


#: 16.2: any threshold from the drafts' 1,000 bytes of JSON up to just below the
#: transcript's (about 9.4 kB): a value goes by reference when its JSON is longer than it.
THRESHOLD = 4096

#: 16.3: the lookup, the attachment, the model's answer and the reply: four attempt spans.
#: After the crash the fresh worker replays the first three from history, which is not new
#: work and gets no attempt span (its wake-up span says it replayed 3 events).
ATTEMPT_SPANS = 4

#: What `dl.exercises.check` takes for each exercise (tests/test_exercises.py checks them all).
ANSWERS = {"16.1": lambda: alerts, "16.2": lambda: THRESHOLD, "16.3": lambda: ATTEMPT_SPANS}
