"""Checkers for the exercises of lesson 07 (signals, timers and people).

The checkers start the learner's expense workflow on their own engine, send the approvals
the exercise describes at the instants it names, and read what each run recorded: which
emails it sent, which waits it made and how it ended.
"""

from __future__ import annotations

from . import Stop, exercise

DAY = 86400.0
CLAIM = {"id": "exp-7", "approver": "ana@example.com", "manager": "max@example.com"}


def _scenario(workflow, signals):
    """Run `workflow` on CLAIM; `signals` is [(at seconds, value)] of "approval" signals.
    Returns the Run after run_until_idle()."""
    import durablelab as dl
    with dl.Engine() as engine:
        run_id = engine.start(workflow, CLAIM, run_id="expense")
        for n, (at, value) in enumerate(signals):
            engine.advance(at - engine.clock.now())
            if engine.run(run_id).status in ("completed", "failed", "diverged"):
                break
            engine.signal(run_id, "approval", value, signal_id=f"click-{n}")
        engine.run_until_idle()
        return engine.run(run_id)


def _notified(run) -> list[str]:
    """The activities of a run, in the order it recorded them."""
    history = run.history
    return list(history[history.kind == "activity"].name)


def _finished(run, what):
    if run.status != "completed":
        cause = getattr(run.error, "cause_class", None) or type(run.error).__name__
        raise Stop(f"{what}: the run is {run.status} ({cause}), not completed")


def expense(ctx, claim):
    """The lesson's expense approval: two days for the approver, one more for the manager."""
    ctx.activity("notify_approver", _notify, claim["approver"], f"Approve {claim['id']}?")
    decision = ctx.wait_signal("approval", timeout=2 * DAY)
    escalated = decision is None
    if escalated:
        ctx.activity("notify_manager", _notify, claim["manager"],
                     f"{claim['id']} waited 2 days: approve?")
        decision = ctx.wait_signal("approval", timeout=1 * DAY)
    if decision is None:
        return {"status": "declined", "reason": "nobody answered in 3 days"}
    return {"status": "approved" if decision["approved"] else "rejected",
            "by": decision["by"], "escalated": escalated}


def _notify(to, subject, idempotency_key=None):
    return {"to": to, "subject": subject}


def _workflow(fn):
    if not callable(fn):
        raise Stop(f"give the workflow function itself, not {type(fn).__name__}")
    return fn


@exercise("07.1", "Escalate a rejection",
          "your expense workflow function, where a rejection by the approver also goes to "
          "the manager")
def escalate_rejection(fn):
    fn = _workflow(fn)
    rejected = _scenario(fn, [(3600, {"approved": False, "by": "ana"}),
                              (7200, {"approved": True, "by": "max"})])
    _finished(rejected, "ana rejects, then max approves")
    asked = "notify_manager" in _notified(rejected)
    yield asked, ("a rejection by the approver goes to the manager" if asked else
                  "ana rejected and the manager was never asked")
    result = rejected.result if isinstance(rejected.result, dict) else {}
    by_max = result.get("status") == "approved" and result.get("by") == "max"
    yield by_max, ("and the manager's approval decides" if by_max else
                   f"after max approved, the result is {rejected.result}")
    approved = _scenario(fn, [(3600, {"approved": True, "by": "ana"})])
    _finished(approved, "ana approves")
    direct = "notify_manager" not in _notified(approved) and \
        (approved.result or {}).get("status") == "approved"
    yield direct, ("an approval by the approver still needs nobody else" if direct else
                   "when ana approves, the manager should not be asked")
    nobody = _scenario(fn, [])
    _finished(nobody, "nobody answers")
    declined = (nobody.result or {}).get("status") == "declined" and nobody.ended_at == 3 * DAY
    yield declined, ("nobody answering still ends in a decline after 3 days" if declined else
                     f"when nobody answers the run ends at {nobody.ended_at / DAY:g} days "
                     f"with {nobody.result}: keep both deadlines")


@exercise("07.2", "An early manager",
          "whose wait receives the manager's approval sent one day in: 'approver' or "
          "'manager'")
def early_manager(answer):
    if answer not in ("approver", "manager"):
        raise Stop("give 'approver' or 'manager'")
    run = _scenario(expense, [(DAY, {"approved": True, "by": "max"})])
    first = not (run.result or {}).get("escalated", True)
    truth = "approver" if first else "manager"
    if answer == truth:
        yield True, (f"the {truth}'s wait receives it: the first wait_signal('approval') "
                     f"gets the first 'approval' signal, whoever sent it")
    else:
        yield False, ("a signal is matched by name and order, not by who sent it; which "
                      "wait_signal('approval') is open one day in?")


@exercise("07.3", "A reminder",
          "your expense workflow function with a reminder to the approver after one day")
def reminder(fn):
    fn = _workflow(fn)
    nobody = _scenario(fn, [])
    _finished(nobody, "nobody answers")
    names = _notified(nobody)
    yield len(names) == 3 and names[-1] == "notify_manager", (
        "nobody answers: the approver is asked, reminded, then the manager is asked"
        if len(names) == 3 and names[-1] == "notify_manager" else
        f"nobody answers: the run sent {names}; expected the request, one reminder, then "
        f"the manager")
    attempts = nobody.attempts
    at = list(attempts[attempts.outcome == "ok"].started_at)
    timely = at == [0.0, 1 * DAY, 2 * DAY]
    yield timely, ("at 0, 1 and 2 days" if timely else
                   f"the emails went out at {[a / DAY for a in at]} days: remind after one "
                   f"day, escalate after two")
    declined = (nobody.result or {}).get("status") == "declined" and nobody.ended_at == 3 * DAY
    yield declined, ("and it declines after 3 days" if declined else
                     f"it ends at {nobody.ended_at / DAY:g} days with {nobody.result}")
    early = _scenario(fn, [(DAY / 2, {"approved": True, "by": "ana"})])
    _finished(early, "ana answers after half a day")
    quiet = len(_notified(early)) == 1 and (early.result or {}).get("status") == "approved"
    yield quiet, ("an approver who answers within a day gets no reminder" if quiet else
                  f"ana answered after half a day, and the run still sent {_notified(early)}")
    late = _scenario(fn, [(1.5 * DAY, {"approved": True, "by": "ana"})])
    _finished(late, "ana answers after a day and a half")
    reminded = len(_notified(late)) == 2 and (late.result or {}).get("status") == "approved" \
        and not (late.result or {}).get("escalated", False)
    yield reminded, ("an approval after the reminder is still the approver's, not escalated"
                     if reminded else
                     f"ana answered after the reminder (1.5 days), and the run sent "
                     f"{_notified(late)} and returned {late.result}")
