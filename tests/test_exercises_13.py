"""Lesson 13's checkers refuse the wrong answers learners most often give (each runs the
crash explorer, the fault matrix or a counterfactual on the answer)."""

from __future__ import annotations

import pytest
from exercise_cases import refuses

import durablelab as dl
from durablelab.examples import onboarding

SECTION_1 = {(4, "ask_approver", "after_effect"), (8, "create_vendor", "after_effect"),
             (9, "register_payee", "after_effect"), (10, "send_welcome", "after_effect")}

WRONG = [
    # 13.1: section 1's answer, as if keys on the ERP changed nothing.
    ("13.1", lambda: SECTION_1, "p8 create_vendor after_effect holds", None),
    # 13.1: only the bank, forgetting that email ignores keys too.
    ("13.1", lambda: {(9, "register_payee", "after_effect")}, "2 point(s) that break are "
     "missing", "send_welcome"),
    ("13.1", lambda: "register_payee", "set of (position, activity, point)", None),
    # 13.2: the lesson's other policies give up by themselves.
    ("13.2", lambda: onboarding.IO, "gives up by itself after 6 attempt(s)", None),
    ("13.2", lambda: dl.RetryPolicy(), "gives up by itself after 3 attempt(s)", None),
    ("13.2", lambda: "unlimited", "give the policy itself", None),
    # 13.3: more attempts do not help against a 400.
    ("13.3", lambda: 6, "IO's max_attempts", None),
    ("13.3", lambda: 0, "a call that was made", None),
    ("13.3", lambda: onboarding.IO, "give a whole number of calls", None),
]


@pytest.mark.parametrize("exercise_id, answer, words, secret", WRONG,
                         ids=[f"{w[0]}-{i}" for i, w in enumerate(WRONG)])
def test_lesson13_checker_refuses_a_common_wrong_answer(exercise_id, answer, words, secret):
    refuses(exercise_id, answer(), words, secret)



def test_placeholder_is_not_yet_and_says_what_to_give():
    verdict = dl.exercises.check("13.1", None)
    assert not verdict and "not yet" in str(verdict) and "no answer yet" in str(verdict)
