"""Lesson 06's checkers refuse the wrong answers learners most often give, say what is wrong,
and do not give the right reading away."""

import pytest
from exercise_cases import refuses

import durablelab as dl


def a_short_export(tmp_path):
    """06.4 with the checkout runs left out."""
    run = dl.Engine()
    run_id = run.start(lambda ctx, _: ctx.activity("noop", lambda: 1), None)
    run.run_until_idle()
    path = tmp_path / "one.jsonl"
    dl.export([run.run(run_id)], path)
    run.close()
    return path


# (exercise, a wrong answer, words the verdict must say, the answer it must not give away)
WRONG = [
    ("06.1", lambda tmp: ["during_wait", "after_effect"], "approved after 2.5 days", None),
    ("06.1", lambda tmp: ["during_wait"], "does not die during its wait", None),
    ("06.1", lambda tmp: "after_effect", "give a list", None),
    ("06.2", lambda tmp: {"first": "none", "none": 14.0}, "compare each wait with its cap",
     None),
    ("06.2", lambda tmp: {"first": "full", "none": 7.0}, "is not that run's virtual_duration",
     "14"),
    ("06.2", lambda tmp: {"none": 14.0}, "give a dict", None),
    ("06.3", lambda tmp: "Latency", "are still running", None),
    ("06.3", lambda tmp: "Crash", "are still running", None),
    ("06.3", lambda tmp: "Hang", "the plan has no Hang rule", None),
    ("06.4", a_short_export, "checkout runs are missing", None),
    ("06.4", lambda tmp: tmp / "nowhere.jsonl", "there is no file", None),
]


@pytest.mark.parametrize("exercise_id, answer, words, secret", WRONG,
                         ids=[f"{w[0]}-{i}" for i, w in enumerate(WRONG)])
def test_checker_refuses_a_common_wrong_answer(exercise_id, answer, words, secret, tmp_path):
    refuses(exercise_id, answer(tmp_path), words, secret)
