"""Lesson 06 (looking at runs): solutions."""

import tempfile
from pathlib import Path

import durablelab as dl
from durablelab.examples.onboarding import DAY, onboard_vendor, world
from durablelab.sim import Email, Payments

F = dl.faults
PLAN = dl.FaultPlan([
    F.ServerError("fetch_documents", attempts=[1], status=503),
    F.RateLimit("extract_fields", attempts=[1], retry_after=3600),
    F.Crash("approval", point="during_wait"),
    F.Crash("create_vendor", point="after_effect"),
])

#: 06.1: the during_wait crash is due halfway through the wait the run really waits; approved
#: after a day, the wait is over before then. Only the create_vendor crash is left.
CRASHES = ["after_effect"]

#: 06.2: full jitter draws each wait below the cap the other run waits in full, and both meet
#: the same 429s: it finishes first. Without jitter: 1 + 2 + 4 s, then 1 + 2 + 4 s.
JITTER = {"first": "full", "none": 14.0}

#: 06.3: a Timeout rule loses an answer, and an activity without start_to_close waits for it
#: for ever; lesson 04's start_to_close (or heartbeat) ends such an attempt.
BLAME = "Timeout"

payments, email = Payments(), Email()


def charge_card(customer: str, amount: float, idempotency_key=None) -> dict:
    return payments.charge(customer, amount, idempotency_key=idempotency_key)


def send_receipt(to: str, charge_id: str, idempotency_key=None) -> dict:
    return email.send(to, f"Your receipt for {charge_id}", idempotency_key=idempotency_key)


def checkout(ctx, order):
    policy = dl.RetryPolicy(**order["retry"])
    charge = ctx.activity("charge_card", charge_card, order["customer"], order["amount"],
                          policy=policy)
    receipt = ctx.activity("send_receipt", send_receipt, order["email"], charge["id"],
                           policy=policy)
    return {"charge": charge["id"], "receipt": receipt["id"]}


def one_file() -> Path:
    """06.4: the onboarding run and both checkout runs, exported into one .jsonl."""
    world.reset()
    with dl.Engine() as engine:
        run_id = engine.start(onboard_vendor, {"vendor_id": "v-42"}, run_id="onboard-faults",
                              seed=7, faults=PLAN)
        engine.advance(2.5 * DAY)
        engine.signal(run_id, "approval", {"approved": True, "by": "maria"})
        engine.run_until_idle()
        runs = [engine.run(run_id)]
    storm = dl.FaultPlan([F.RateLimit("*", attempts=[1, 2, 3], p=0.6)])
    with dl.Engine() as shop:
        for name, max_attempts in (("hasty", 3), ("patient", 6)):
            order = {"customer": "ada", "amount": 42.0, "email": "ada@example.com",
                     "retry": {"max_attempts": max_attempts, "initial": 1.0, "backoff": 2.0,
                               "jitter": "none"}}
            shop.start(checkout, order, run_id=f"checkout-{name}", seed=16, faults=storm)
        shop.run_until_idle()
        runs += [shop.run("checkout-hasty"), shop.run("checkout-patient")]
    path = Path(tempfile.mkdtemp(prefix="durablelab-06-")) / "all.jsonl"
    dl.export(runs, path)
    return path


#: What `dl.exercises.check` takes for each exercise (tests/test_exercises.py checks them all).
ANSWERS = {
    "06.1": lambda: CRASHES,
    "06.2": lambda: JITTER,
    "06.3": lambda: BLAME,
    "06.4": one_file,
}
