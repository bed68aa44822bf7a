"""Sagas: undoing, step by step, work that cannot be rolled back in one transaction.

A *saga* is a sequence of steps, each with a *compensation*: an action that undoes its
effect (deactivate the vendor just created, remove the payee just registered). No database
transaction spans an ERP, a bank and an email service, so when a later step fails for good
the saga runs the compensations of the steps that succeeded, newest first, and the failure
propagates. Compensations are activities: recorded, retried, and replayed like any other,
so a crash in the middle of compensating resumes there and undoes nothing twice.

Two rules make a saga safe:

- **Irreversible steps last.** An email sent cannot be unsent. Put such steps after every
  step that can still fail, so that nothing needs undoing once they have happened.
- **A compensation that keeps failing goes to a person.** Retrying it forever hides the
  problem and blocks the run; giving up silently leaves a half-onboarded vendor. When a
  compensation fails for good, the run waits for the signal ``"compensate:<name>"`` with a
  deadline (`escalate_after` seconds, a day by default): ``{"retry": True}`` runs it again
  (after someone fixed the cause), ``{"resolved": True}`` records that a person undid the
  step by hand and goes on with the next compensation. If the deadline passes, the run fails
  with `CompensationFailed`, naming the compensation and those not run.

    with ctx.saga() as saga:
        vendor = ctx.activity("create_vendor", create_vendor, name)
        saga.add("deactivate_vendor", deactivate_vendor, vendor["id"])
        payee = ctx.activity("register_payee", register_payee, vendor["id"], iban)
        saga.add("remove_payee", remove_payee, payee["id"])
        ctx.activity("send_welcome", send_welcome, vendor["id"], name)  # fails: both undone
"""

from __future__ import annotations

from typing import Callable

from .errors import ActivityFailed, BadValue, Cancelled, compensation_failed
from .retry import RetryPolicy

#: Seconds a failed compensation waits for a person before the run fails: one day.
ESCALATE_AFTER = 86400.0


class Saga:
    """Compensations registered step by step, run in reverse when an activity fails."""

    def __init__(self, ctx, escalate_after: float = ESCALATE_AFTER):
        if isinstance(escalate_after, bool) or not isinstance(escalate_after, (int, float)) \
                or not escalate_after > 0:
            raise BadValue(f"ctx.saga(escalate_after={escalate_after!r}): give seconds > 0 "
                             f"that a failed compensation waits for a person")
        self._ctx = ctx
        self._undo: list[tuple] = []
        self.escalate_after = float(escalate_after)

    def add(self, name: str, fn: Callable, *args, policy: RetryPolicy | None = None,
            **kwargs) -> None:
        """Register the activity that undoes the step just completed (`policy`: its retry
        policy, 10 attempts by default)."""
        self._undo.append((name, fn, args, kwargs, policy or RetryPolicy(max_attempts=10)))

    def __enter__(self) -> "Saga":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None or not issubclass(exc_type, (ActivityFailed, Cancelled)):
            return False
        pending = list(reversed(self._undo))
        while pending:
            name, fn, args, kwargs, policy = pending[0]
            try:
                self._ctx.activity(name, fn, *args, policy=policy, **kwargs)
            except ActivityFailed as failed:
                answer = self._ctx.wait_signal(f"compensate:{name}",
                                               timeout=self.escalate_after)
                if answer is None:
                    raise compensation_failed(failed, self.escalate_after,
                                              [u[0] for u in pending[1:]], exc) from exc
                if isinstance(answer, dict) and answer.get("retry"):
                    continue          # someone fixed the cause: run the compensation again
            pending.pop(0)
        return False


__all__ = ["Saga", "ESCALATE_AFTER"]
