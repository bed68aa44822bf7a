"""Lesson 02's checkers refuse the wrong answers learners most often give, say what is wrong,
and do not print the right count."""

import pytest
from exercise_cases import refuses

LOST = {"calls": 2, "honoured": 1, "ignored": 2, "like": "after_effect"}

# (exercise, a wrong answer, words the verdict must say, the answer it must not give away)
WRONG = [
    # a lost answer thought to be harmless, like a hang: one call, one charge
    ("02.1", {**LOST, "calls": 1, "ignored": 1, "like": "before_activity"},
     "is not the number of calls", None),
    ("02.1", {**LOST, "honoured": 2}, "with keys honoured: 2 is not", None),
    ("02.1", {**LOST, "like": "after_record"}, "after_record: compare", None),
    ("02.1", {"calls": 2}, "the dict has no", None),
    # one crash counted per run, not per activity
    ("02.2", {"payments": 2, "email": 1}, "email: 1 is not", None),
    ("02.2", {"payments": 1, "email": 1}, "payments: 1 is not", None),
    ("02.2", (2, 2), "give a dict", None),
    # the crash threw the recorded uuid away, so a new one was drawn: two keys
    ("02.3", 2, "what is it drawn from", None),
    ("02.3", 0, "is not the number of distinct keys", None),
    ("02.3", "1", "as a number", None),
    # batch taken to lose everything, as without the sleep
    ("02.4", 2, "without the sleep", None),
    ("02.4", 0, "is not the number of calls", None),
]


@pytest.mark.parametrize("exercise_id, answer, words, secret", WRONG,
                         ids=[f"{w[0]}-{i}" for i, w in enumerate(WRONG)])
def test_checker_refuses_a_common_wrong_answer(exercise_id, answer, words, secret):
    refuses(exercise_id, answer, words, secret)


def test_02_2_says_right_only_about_what_was_submitted():
    """The run's completing was called right next to two wrong counts: nothing was said
    about it, so a verdict on wrong counts calls nothing else right."""
    import durablelab as dl
    verdict = dl.exercises.check("02.2", {"payments": 1, "email": 1})
    assert not verdict and verdict.right == []
    assert len(verdict.wrong) == 2
