"""Lesson 08's exercises refuse the wrong answers learners most often give."""

import pytest
from exercise_cases import refuses

WRONG = [
    ("08.1", ["remove_payee"], "its service saw it once", None),
    ("08.1", ["deactivate_vendor"], "its service saw it once", None),
    ("08.1", "remove_payee", "as a list of names", None),
    ("08.3", ["register_payee", "remove_payee"], "does not run remove_payee again", None),
    ("08.3", 1, "as a list of names", None),
    ("08.3", [], "an effect that did happen is missing", "register_payee"),
]


@pytest.mark.parametrize("exercise_id, answer, words, secret", WRONG,
                         ids=[f"{w[0]}-{i}" for i, w in enumerate(WRONG)])
def test_checker_refuses_a_common_wrong_answer(exercise_id, answer, words, secret):
    refuses(exercise_id, answer, words, secret)
