"""Lesson 14's checker runs the checkout on durablelab's engine and on DBOS over SQLite, and
refuses the wrong answers learners most often give."""

from __future__ import annotations

import pytest
from exercise_cases import refuses

pytest.importorskip("dbos")

WRONG = [
    ("14.1", "ActivityFailed", "the exception the run ends with"),
    ("14.1", "NonRetryable", "the charge was retried"),
    ("14.1", "503 Service Unavailable", "not the error class either engine records"),
]


@pytest.mark.parametrize("exercise_id, answer, words", WRONG,
                         ids=[f"{w[0]}-{i}" for i, w in enumerate(WRONG)])
def test_lesson14_checker_refuses_a_common_wrong_answer(exercise_id, answer, words):
    refuses(exercise_id, answer, words, secret="Transient")


def test_14_1_reads_a_slip_of_case_as_the_class_and_names_a_typo():
    import durablelab as dl
    assert dl.exercises.check("14.1", "transient")
    assert dl.exercises.check("14.1", "dl.Transient")
    typo = dl.exercises.check("14.1", "Transiet")
    assert not typo and typo.wrong == ["'Transiet' is not spelled as a name: read it as "
                                       "'Transient'"]
