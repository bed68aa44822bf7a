"""Lesson 01's exercise 01.1 refuses the wrong answers learners most often give (the other
exercises of lesson 01 are in test_exercises.py)."""

import pytest
from exercise_cases import refuses

WRONG = [
    ({"after_record": 2, "before_activity": 1}, "what the crash window costs"),
    ({"after_record": 1, "before_activity": 2}, "what the crash window costs"),
    ({"after_record": 0, "before_activity": 1}, "is not the number of calls"),
    ({"after_record": 1}, "give a dict"),
]


@pytest.mark.parametrize("answer, words", WRONG, ids=range(len(WRONG)))
def test_01_1_refuses_a_common_wrong_answer(answer, words):
    refuses("01.1", answer, words)
