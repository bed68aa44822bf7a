"""Lesson 00 (quickstart): solution."""

#: 00.1: the 429 now asks for 300 s, so attempt 2 starts at 300 s; it answers broken JSON,
#: and attempt 3 follows after the policy's jittered backoff (1.75 s with seed 7).
THIRD_ATTEMPT_AT = 301.75

#: What `dl.exercises.check` takes for each exercise (tests/test_exercises.py checks them all).
ANSWERS = {"00.1": lambda: THIRD_ATTEMPT_AT}
