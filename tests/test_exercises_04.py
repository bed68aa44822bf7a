"""Lesson 04's exercises 04.1 and 04.3 refuse the wrong answers learners most often give
(04.2 and 04.5 are in test_exercises.py)."""

import pytest
from exercise_cases import refuses

WRONG = [
    ("04.1", {"charges": 1, "recorded": "ch_3"}, "too few charges", None),
    ("04.1", {"charges": 2, "recorded": "ch_3"}, "too few charges", "3"),
    ("04.1", {"charges": 3, "recorded": "ch_1"}, "first charge's answer was lost", "ch_3"),
    ("04.1", 3, "give a dict", None),
    ("04.3", {"ended_by": "start_to_close", "attempts": 1}, "has no start_to_close", None),
    ("04.3", {"ended_by": "schedule_to_close", "attempts": 3}, "only while the total has time left", None),
    ("04.3", {"ended_by": "heartbeat", "attempts": 1}, "does not end it", "schedule_to_close"),
]


@pytest.mark.parametrize("exercise_id, answer, words, secret", WRONG, ids=range(len(WRONG)))
def test_04_refuses_a_common_wrong_answer(exercise_id, answer, words, secret):
    refuses(exercise_id, answer, words, secret)


@pytest.mark.parametrize("written", ["Schedule-To-Close", "schedule to close",
                                     "'schedule_to_close'", "SCHEDULE_TO_CLOSE"])
def test_04_3_reads_a_slip_of_case_or_spacing_as_the_name(written):
    import durablelab as dl
    verdict = dl.exercises.check("04.3", {"ended_by": written, "attempts": 1})
    assert verdict, str(verdict)


def test_04_3_a_typo_is_a_spelling_point_not_a_wrong_idea():
    import durablelab as dl
    verdict = dl.exercises.check("04.3", {"ended_by": "schedule_to_clsoe", "attempts": 1})
    assert not verdict
    assert verdict.wrong == ["'schedule_to_clsoe' is not spelled as a name: read it as "
                             "'schedule_to_close'"]
    assert any("ends the hung attempt" in m for m in verdict.right)
