"""Lesson 12's checkers refuse the wrong answers learners most often give (each runs the
lesson's sweep on the answer)."""

from __future__ import annotations

import dataclasses

import pytest
from exercise_cases import refuses

import durablelab as dl

LANGGRAPH = dl.presets["langgraph-default"]

WRONG = [
    # 12.1: the lesson's lockstep policy cut to four attempts: the storm stays a storm.
    ("12.1", lambda: dl.RetryPolicy(max_attempts=4, initial=8.0, max_interval=60,
                                    jitter="none"), "without jitter"),
    # 12.1: jitter, but the lesson's short first wait: retries still crowd a few seconds.
    ("12.1", lambda: dl.RetryPolicy(max_attempts=4, initial=1.0, max_interval=30),
     "not spread over enough"),
    # 12.1: the lesson's JITTERED policy: it works, with six attempts.
    ("12.1", lambda: dl.RetryPolicy(max_attempts=6, initial=1.0, max_interval=30),
     "at most 4 attempts"),
    ("12.3", lambda: LANGGRAPH, "count the attempts the outage takes"),
    ("12.3", lambda: dataclasses.replace(LANGGRAPH, max_attempts=10), "fewer attempts survive"),
    ("12.3", lambda: dl.RetryPolicy(max_attempts=4), "initial, max_interval, jitter differ"),
]


@pytest.mark.parametrize("exercise_id, answer, words", WRONG,
                         ids=[f"{w[0]}-{i}" for i, w in enumerate(WRONG)])
def test_lesson12_checker_refuses_a_common_wrong_answer(exercise_id, answer, words):
    refuses(exercise_id, answer(), words)
