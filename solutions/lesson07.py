"""Lesson 07 (signals, timers and people): solutions."""

import durablelab as dl
from durablelab.sim import Email

DAY = 86400.0
email = Email(honor_keys=True)


def notify(to, subject, idempotency_key=None):
    return email.send(to, subject, idempotency_key=idempotency_key)


def expense_escalating(ctx: dl.Context, claim: dict) -> dict:
    """07.1: a rejection goes to the manager as a silence does."""
    ctx.activity("notify_approver", notify, claim["approver"], f"Approve {claim['id']}?")
    decision = ctx.wait_signal("approval", timeout=2 * DAY)
    escalated = decision is None or not decision["approved"]
    if escalated:
        ctx.activity("notify_manager", notify, claim["manager"],
                     f"{claim['id']} was not approved: approve?")
        decision = ctx.wait_signal("approval", timeout=1 * DAY)
    if decision is None:
        return {"status": "declined", "reason": "nobody answered in 3 days"}
    return {"status": "approved" if decision["approved"] else "rejected",
            "by": decision["by"], "escalated": escalated}


#: 07.2: one day in, the approver's wait is the open one; signals are matched by name and
#: order, so the first wait_signal("approval") gets the manager's click.
EARLY_MANAGER = "approver"


def expense_with_reminder(ctx: dl.Context, claim: dict) -> dict:
    """07.3: two one-day waits for the approver, a reminder between them, then escalate.
    A run nobody answers records 9 events: 3 activities, and 3 waits of two events each
    (its start with the deadline, its end by the time-out)."""
    ctx.activity("notify_approver", notify, claim["approver"], f"Approve {claim['id']}?")
    decision = ctx.wait_signal("approval", timeout=1 * DAY)
    if decision is None:
        ctx.activity("remind_approver", notify, claim["approver"],
                     f"Reminder: approve {claim['id']}?")
        decision = ctx.wait_signal("approval", timeout=1 * DAY)
    escalated = decision is None
    if escalated:
        ctx.activity("notify_manager", notify, claim["manager"],
                     f"{claim['id']} waited 2 days: approve?")
        decision = ctx.wait_signal("approval", timeout=1 * DAY)
    if decision is None:
        return {"status": "declined", "reason": "nobody answered in 3 days"}
    return {"status": "approved" if decision["approved"] else "rejected",
            "by": decision["by"], "escalated": escalated}


#: What `dl.exercises.check` takes for each exercise (tests/test_exercises.py checks them all).
ANSWERS = {
    "07.1": lambda: expense_escalating,
    "07.2": lambda: EARLY_MANAGER,
    "07.3": lambda: expense_with_reminder,
}
