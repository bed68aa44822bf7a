"""Lesson 10 (versioning): solutions."""

import durablelab as dl
from durablelab.examples import onboarding as ob

#: 10.1: the patch saves the run mid-retry; but a hard stop loses an attempt in flight (only
#: its end is durable), so under version 2 that run records the marker and the recheck first,
#: create_vendor moves to another position, its idempotency key changes with it, and the ERP
#: creates a second vendor. ctx.patched cannot know that create_vendor had started.
BROKEN = ["attempt in flight"]


@dl.versioning.version_of(ob.onboard_vendor)
def onboard_vendor_v2_early(ctx: dl.Context, request: dict) -> dict:
    """10.2: the recheck before the approval, behind ctx.patched: every shipped run recorded
    ask_approver at position 4, and keeps it."""
    vendor_id = request["vendor_id"]
    document = ctx.activity("fetch_documents", ob.fetch_documents, vendor_id, policy=ob.IO)
    fields = ctx.activity("extract_fields", ob.extract_fields, document, policy=ob.MODEL)
    screen = ctx.activity("sanctions_screen", ob.sanctions_screen, fields["legal_name"],
                          fields["country"], policy=ob.IO)
    if screen["match"]:
        return {"status": "rejected", "reason": "sanctions screening matched"}
    if ctx.patched("recheck-before-approval"):
        recheck = ctx.activity("sanctions_recheck", ob.sanctions_recheck, fields["legal_name"],
                               fields["country"], policy=ob.IO)
        if recheck["match"]:
            return {"status": "rejected", "reason": "sanctions recheck matched"}
    ctx.activity("ask_approver", ob.ask_approver, vendor_id, fields["legal_name"],
                 policy=ob.IO)
    decision = ctx.wait_signal("approval", deadline=ctx.now() + 3 * ob.DAY)
    if decision is None or not decision.get("approved"):
        return {"status": "declined", "timed_out": decision is None}
    with ctx.saga() as undo:
        vendor = ctx.activity("create_vendor", ob.create_vendor, fields["legal_name"],
                              fields["country"], policy=ob.IO)
        undo.add("deactivate_vendor", ob.deactivate_vendor, vendor["id"])
        payee = ctx.activity("register_payee", ob.register_payee, vendor["id"], fields["iban"],
                             policy=ob.IO)
        undo.add("remove_payee", ob.remove_payee, payee["id"])
        ctx.activity("send_welcome", ob.send_welcome, vendor["id"], fields["legal_name"],
                     policy=ob.IO)
    return {"status": "active", "vendor_id": vendor["id"], "payee_id": payee["id"]}


#: 10.3: a fork at 5 replays the model calls at positions 1-4 and makes the other four; the
#: latest fork that still runs the fixed publish starts at its position, 9.
FORK = {"calls": 4, "latest": 9}

#: What `dl.exercises.check` takes for each exercise (tests/test_exercises.py checks them all).
ANSWERS = {"10.1": lambda: BROKEN, "10.2": lambda: onboard_vendor_v2_early,
           "10.3": lambda: FORK}
