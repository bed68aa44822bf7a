"""Checkers for the exercises of lesson 14 (graduating to DBOS Transact). 14.1 runs the
lesson's checkout on both engines, durablelab's and DBOS over SQLite in a temporary folder,
so it needs the `dbos` extra (the `test` extra installs it) and no database server."""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path

from . import Stop, exercise, spelled

ORDER = {"sku": "sku-7", "customer": "c-1", "amount": 42.0}
#: the lesson's flaky payment service: its first two calls fail with a 503.
FAILURES = 2


def _checkout(max_attempts: int):
    """The lesson's checkout, with PAY cut to `max_attempts`, and its fresh flaky service."""
    import durablelab as dl
    from ..sim import Payments
    payments, flaky = Payments(honor_keys=True), {"failures_left": FAILURES}

    def charge(customer, amount, idempotency_key=None):
        if flaky["failures_left"] > 0:
            flaky["failures_left"] -= 1
            raise dl.Transient("503 Service Unavailable")
        return payments.charge(customer, amount, idempotency_key=idempotency_key)

    pay = dl.RetryPolicy(max_attempts=max_attempts, initial=0.05, backoff=2.0, jitter="none")

    def checkout(ctx, order):
        ctx.activity("reserve", lambda sku: {"sku": sku, "reserved": True}, order["sku"])
        receipt = ctx.activity("charge", charge, order["customer"], order["amount"],
                               policy=pay)
        ctx.activity("send_receipt", lambda c, i: {"to": c, "about": i}, order["customer"],
                     receipt["id"])
        return {"charge_id": receipt["id"]}

    return checkout, flaky


def both_engines(max_attempts: int) -> tuple[str | None, str | None]:
    """The error class of the checkout's failure on durablelab's engine and on DBOS."""
    import durablelab as dl
    from ..backends import dbos as backend
    if backend._open is not None:
        raise Stop("a DBOSRunner is still open in this process (DBOS is one instance per "
                   "process): call runner.close() first")
    checkout, _ = _checkout(max_attempts)
    with dl.Engine() as engine:
        run_id = engine.start(checkout, ORDER, run_id="exercise-14.1", seed=1)
        engine.run_until_idle()
        lab = engine.run(run_id)
    checkout, _ = _checkout(max_attempts)
    with tempfile.TemporaryDirectory(prefix="exercise14-") as folder:
        url = f"sqlite:///{Path(folder) / 'dbos.sqlite'}"
        with backend.DBOSRunner(url, workflows=[checkout]) as runner:
            dbos_id = runner.start(checkout, ORDER, run_id="exercise-14.1")
            try:
                runner.result(dbos_id, timeout=60)
            except dl.ActivityFailed:
                pass
            on_dbos = runner.run(dbos_id)
    return (getattr(lab.error, "error_class", None),
            getattr(on_dbos.error, "error_class", None))


#: The error classes an answer may name (durablelab's retry classes and run errors).
ERROR_CLASSES = ("Transient", "RateLimited", "NonRetryable", "ModelOutputError",
                 "ActivityFailed", "RunTimedOut", "WorkflowError")


@exercise("14.1", "Two attempts on both engines",
          "the error class (a string, run.error.error_class) both engines give the checkout "
          "when PAY allows only 2 attempts")
def two_attempts(answer):
    if not isinstance(answer, str):
        raise Stop(f"give the error class as a string, not {type(answer).__name__}")
    if importlib.util.find_spec("dbos") is None:
        raise Stop("this exercise runs DBOS Transact: pip install 'durablelab[dbos]'")
    lab, on_dbos = both_engines(2)
    if lab != on_dbos:
        yield False, f"the engines disagree here ({lab} and {on_dbos}): that is a bug to report"
        return
    said, slip = spelled(answer, ERROR_CLASSES)
    if slip:
        yield False, slip
    if said == lab:
        yield True, f"{said}: both engines fail the checkout with it"
    elif said == "ActivityFailed":
        yield False, ("ActivityFailed is the exception the run ends with, not the class of "
                      "failure the charge met")
    elif said == "NonRetryable":
        yield False, "NonRetryable is not it: the charge was retried, so its failures were not"
    else:
        yield False, f"{answer!r} is not the error class either engine records"
