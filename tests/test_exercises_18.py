"""Lesson 18's checker refuses the answers learners most often give (the first client count
where one trial happened to favour full jitter, or the figures' 150 and 190), and its event
loop is the reference simulation of bench/brooker.py, draw for draw."""

import importlib.util
from pathlib import Path

import pytest
from exercise_cases import refuses

from durablelab.exercises import lesson18

PATH = Path(__file__).resolve().parent.parent / "bench" / "brooker.py"
spec = importlib.util.spec_from_file_location("brooker_bench", PATH)
reference = importlib.util.module_from_spec(spec)
spec.loader.exec_module(reference)

# (a wrong answer, words the verdict must say)
WRONG = [
    (100, "the reversal comes at more clients"),
    (170, "the reversal comes at fewer clients"),
    ("130", "give a number of clients"),
    (True, "give a number of clients"),
    (5, "outside the range"),
    (1000, "outside the range"),
]


@pytest.mark.parametrize("answer, words", WRONG, ids=[str(w[0]) for w in WRONG])
def test_checker_refuses_a_common_wrong_answer(answer, words):
    refuses("18.1", answer, words, secret=None)


@pytest.mark.parametrize("clients", [1, 7, 60])
@pytest.mark.parametrize("strategy", ["full", "decorrelated"])
def test_the_checkers_trial_is_the_reference_simulation(clients, strategy):
    for seed in range(4):
        assert lesson18._trial(clients, strategy, seed) == reference.trial(clients, strategy,
                                                                           seed)
