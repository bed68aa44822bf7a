"""The quickstart's exercise refuses the wrong answers learners most often give."""

import pytest

import durablelab as dl
from exercise_cases import refuses

WRONG = [
    (300, "when the second attempt starts", "301"),
    (31.75, "the run with a 30 s Retry-After", "301"),
    (330, "is not when the third", "301"),
    ("301.75", "give a number", None),
]


@pytest.mark.parametrize("answer, words, secret", WRONG, ids=range(len(WRONG)))
def test_00_1_refuses_a_common_wrong_answer(answer, words, secret):
    refuses("00.1", answer, words, secret)


@pytest.mark.parametrize("answer", [301.8, 301.75, 301.7528])
def test_00_1_accepts_the_value_the_lessons_one_decimal_table_shows(answer):
    verdict = dl.exercises.check("00.1", answer)
    assert verdict, str(verdict)
