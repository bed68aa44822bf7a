"""Lesson 03 (retries): solutions."""

import durablelab as dl

#: 03.1: the engine waits max(Retry-After, the policy's delay): the policy asks for 10 s.
WAIT = 10.0

#: 03.3: the wrapper turned a 404 into a RuntimeError, so name that class as not retryable.
POLICY = dl.RetryPolicy(max_attempts=6, jitter="none", non_retryable=(RuntimeError,))

#: What `dl.exercises.check` takes for each exercise (tests/test_exercises.py checks them all).
ANSWERS = {"03.1": lambda: WAIT, "03.3": lambda: POLICY}
