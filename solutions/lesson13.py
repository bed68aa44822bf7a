"""Lesson 13 (crash points, counterfactuals, the fault matrix): solutions."""

import durablelab as dl

#: 13.1: with the ERP honouring keys its after_effect point holds; the approval email, the
#: bank payee and the welcome email still repeat their effect after a crash there.
BROKEN = {(4, "ask_approver", "after_effect"), (9, "register_payee", "after_effect"),
          (10, "send_welcome", "after_effect")}

#: 13.2: only a policy without a limit meets the run's time-out first.
UNLIMITED = dl.RetryPolicy(max_attempts=None, initial=1.0, max_interval=100.0)

#: 13.3: once: a 400 is NonRetryable, so no policy gets a second call, whatever its
#: max_attempts, and none survives it.
CALLS_AFTER_400 = 1

#: What `dl.exercises.check` takes for each exercise (tests/test_exercises.py checks them all).
ANSWERS = {"13.1": lambda: BROKEN, "13.2": lambda: UNLIMITED, "13.3": lambda: CALLS_AFTER_400}
