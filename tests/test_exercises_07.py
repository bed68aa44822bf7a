"""Lesson 07's checkers refuse the wrong answers learners most often give: they run the
learner's workflow through the approvals the exercise describes and say what went wrong."""

import pytest
from exercise_cases import refuses

from durablelab.exercises.lesson07 import DAY, expense


def notify(to, subject, idempotency_key=None):
    return {"to": to}


def rejection_ends_it(ctx, claim):
    """07.1 where a rejection is escalated but the manager's answer is thrown away."""
    ctx.activity("notify_approver", notify, claim["approver"], "approve?")
    decision = ctx.wait_signal("approval", timeout=2 * DAY)
    if decision is None or not decision["approved"]:
        ctx.activity("notify_manager", notify, claim["manager"], "approve?")
        ctx.wait_signal("approval", timeout=1 * DAY)
        return {"status": "declined"}
    return {"status": "approved", "by": decision["by"], "escalated": False}


def escalate_everything(ctx, claim):
    """07.1 where even an approval goes to the manager."""
    ctx.activity("notify_approver", notify, claim["approver"], "approve?")
    ctx.wait_signal("approval", timeout=2 * DAY)
    ctx.activity("notify_manager", notify, claim["manager"], "approve?")
    decision = ctx.wait_signal("approval", timeout=1 * DAY)
    if decision is None:
        return {"status": "declined"}
    return {"status": "approved" if decision["approved"] else "rejected", "by": decision["by"]}


def reminder_in_place_of_escalation(ctx, claim):
    """07.3 where the reminder after a day replaces the manager."""
    ctx.activity("notify_approver", notify, claim["approver"], "approve?")
    decision = ctx.wait_signal("approval", timeout=1 * DAY)
    if decision is None:
        ctx.activity("remind_approver", notify, claim["approver"], "reminder")
        decision = ctx.wait_signal("approval", timeout=2 * DAY)
    if decision is None:
        return {"status": "declined"}
    return {"status": "approved", "by": decision["by"], "escalated": False}


def reminder_that_restarts_the_clock(ctx, claim):
    """07.3 where the reminder waits two more days: escalation comes at three, not two."""
    ctx.activity("notify_approver", notify, claim["approver"], "approve?")
    decision = ctx.wait_signal("approval", timeout=1 * DAY)
    if decision is None:
        ctx.activity("remind_approver", notify, claim["approver"], "reminder")
        decision = ctx.wait_signal("approval", timeout=2 * DAY)
    if decision is None:
        ctx.activity("notify_manager", notify, claim["manager"], "approve?")
        decision = ctx.wait_signal("approval", timeout=1 * DAY)
    if decision is None:
        return {"status": "declined"}
    return {"status": "approved", "by": decision["by"], "escalated": False}


# (exercise, a wrong answer, words the verdict must say)
WRONG = [
    ("07.1", expense, "the manager was never asked"),
    ("07.1", rejection_ends_it, "after max approved"),
    ("07.1", escalate_everything, "the manager should not be asked"),
    ("07.1", {"status": "approved"}, "give the workflow function"),
    ("07.2", "manager", "matched by name and order"),
    ("07.2", 1, "give 'approver' or 'manager'"),
    ("07.3", expense, "expected the request, one reminder"),
    ("07.3", reminder_in_place_of_escalation, "expected the request, one reminder"),
    ("07.3", reminder_that_restarts_the_clock, "escalate after two"),
]


@pytest.mark.parametrize("exercise_id, answer, words", WRONG,
                         ids=[f"{w[0]}-{i}" for i, w in enumerate(WRONG)])
def test_checker_refuses_a_common_wrong_answer(exercise_id, answer, words):
    refuses(exercise_id, answer, words)
