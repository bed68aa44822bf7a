"""Lesson 01 (replay): solutions."""

import durablelab as dl
from durablelab.examples.onboarding import (DAY, IO, MODEL, ask_approver, create_vendor,
                                            deactivate_vendor, extract_fields, fetch_documents,
                                            onboard_vendor, register_payee, remove_payee,
                                            sanctions_screen, send_welcome, world)


def approval_timed_out() -> dl.Run:
    """01.2: a run that gets no approval ends by its 3-day deadline, in no real time."""
    world.reset()
    with dl.Engine() as engine:
        run_id = engine.start(onboard_vendor, {"vendor_id": "v-42"}, run_id="no-approval")
        engine.run_until_idle()
        return engine.run(run_id)


#: 01.1: after_record the charge is recorded before the worker dies, so replay hands it back;
#: before_activity nothing had been called yet. One call each, keys or not.
ERP_CALLS = {"after_record": 1, "before_activity": 1}

#: 01.3: removing a recorded step meets another step where it stood; a changed argument meets
#: the same step with a different digest.
REASONS = {"remove": "different_call", "argument": "different_arguments"}


def patched_onboard_vendor(ctx: dl.Context, request: dict) -> dict:
    """01.4: new runs skip the sanctions screen; runs recorded before keep it."""
    vendor_id = request["vendor_id"]
    document = ctx.activity("fetch_documents", fetch_documents, vendor_id, policy=IO)
    fields = ctx.activity("extract_fields", extract_fields, document, policy=MODEL)
    if not ctx.patched("drop-sanctions-screen"):
        screen = ctx.activity("sanctions_screen", sanctions_screen, fields["legal_name"],
                              fields["country"], policy=IO)
        if screen["match"]:
            return {"status": "rejected", "reason": "sanctions screening matched"}

    ctx.activity("ask_approver", ask_approver, vendor_id, fields["legal_name"], policy=IO)
    decision = ctx.wait_signal("approval", deadline=ctx.now() + 3 * DAY)
    if decision is None or not decision.get("approved"):
        return {"status": "declined", "timed_out": decision is None}

    with ctx.saga() as undo:
        vendor = ctx.activity("create_vendor", create_vendor, fields["legal_name"],
                              fields["country"], policy=IO)
        undo.add("deactivate_vendor", deactivate_vendor, vendor["id"])
        payee = ctx.activity("register_payee", register_payee, vendor["id"], fields["iban"],
                             policy=IO)
        undo.add("remove_payee", remove_payee, payee["id"])
        ctx.activity("send_welcome", send_welcome, vendor["id"], fields["legal_name"],
                     policy=IO)
    return {"status": "active", "vendor_id": vendor["id"], "payee_id": payee["id"]}

#: What `dl.exercises.check` takes for each exercise (tests/test_exercises.py checks them all).
ANSWERS = {
    "01.1": lambda: ERP_CALLS,
    "01.2": approval_timed_out,
    "01.3": lambda: REASONS,
    "01.4": lambda: patched_onboard_vendor,
}
