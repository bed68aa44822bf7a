"""Lesson 16's checkers refuse the wrong answers learners most often give: an alert rule that
reads only `.overdue` (blind to waits without a deadline) or pages for every waiting run; a
threshold above the transcript (the lesson's 64 kB) or below the drafts; a span count that
gives replayed steps a span of their own."""

import pytest
from exercise_cases import refuses

DAY = 86400.0


def only_overdue(board):
    return set(board.overdue.run_id)


def every_waiting_run(board):
    return list(board.waiting.run_id)


def no_deadline_at_any_age(board):
    waiting = board.waiting
    return set(waiting[waiting.overdue | waiting.deadline.isna()].run_id)


def broken(board):
    raise KeyError("age_days")


# (exercise, a wrong answer, words the verdict must say)
WRONG = [
    ("16.1", only_overdue, "does not page for the wait without a deadline"),
    ("16.1", every_waiting_run, "pages for a run still within its deadline"),
    ("16.1", no_deadline_at_any_age, "only hours old"),
    ("16.1", broken, "raised KeyError"),
    ("16.1", lambda board: 42, "return the run ids"),
    ("16.1", "overdue", "give the function itself"),
    ("16.2", 65536, "the transcript is still stored inline"),
    ("16.2", 500, "the drafts are stored by reference too"),
    ("16.2", 0, "must be a number of bytes >= 1"),
    ("16.2", 4096.0, "give a whole number of bytes"),
    ("16.3", 7, "does a step the fresh worker replayed"),
    ("16.3", 1, "fewer than the trace holds"),
    ("16.3", "four", "give a number of spans"),
]


@pytest.mark.parametrize("exercise_id, answer, words", WRONG,
                         ids=[f"{w[0]}-{i}" for i, w in enumerate(WRONG)])
def test_checker_refuses_a_common_wrong_answer(exercise_id, answer, words):
    refuses(exercise_id, answer, words, secret=None)
