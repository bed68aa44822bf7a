"""Vendor onboarding: the worked example of the first lessons.

A new supplier sends documents; we read them, pull out the fields with a (simulated) model,
screen the company against a sanctions list, ask a person to approve, and then create the
vendor in the ERP, register its bank account and send a welcome email. It waits days for a
person, talks to four outside systems, and must never create a vendor or a payee twice:
exactly the shape of work durable execution is for.

The outside world lives in `world`, outside any worker, so a crash does not reset it and
its ledgers can count duplicate effects. `world.reset()` starts it afresh.
"""

from __future__ import annotations

import durablelab as dl
from durablelab.sim import ERP, Bank, Email

IO = dl.RetryPolicy(max_attempts=6, initial=1.0, backoff=2.0, max_interval=60)
MODEL = dl.RetryPolicy(max_attempts=3, initial=2.0, backoff=2.0, max_interval=20)
DAY = 86400.0

SANCTIONED_COUNTRIES = {"XX"}

#: the vendors' documents, as the document store would return them.
DOCUMENTS = {
    "v-42": "Legal name: Fjord Fasteners AS\nCountry: NO\nIBAN: NO93 8601 1117 947",
    "v-77": "Legal name: Shadow Supplies Ltd\nCountry: XX\nIBAN: XX00 0000 0000 000",
}


class World:
    """The systems outside the worker: an ERP, a bank, an email service."""

    def __init__(self, honor_keys: bool = True):
        self.erp, self.bank, self.email = ERP(honor_keys), Bank(honor_keys), Email(honor_keys)

    def reset(self, honor_keys: bool | None = None) -> None:
        for service in (self.erp, self.bank, self.email):
            service.reset()
            if honor_keys is not None:
                service.honor_keys = honor_keys


world = World()


def fresh_world(clock=None, honor_keys: bool = True) -> World:
    """The world above, reset (with keys honoured or not): a factory ``world(clock)`` for
    `dl.explore_crashes` and `dl.counterfactual`, which call it before each run. The
    activities below reach the services through this module's `world`, so a run gets a
    fresh world by resetting it; use ``functools.partial(fresh_world, honor_keys=False)``
    for services that ignore idempotency keys."""
    world.reset(honor_keys)
    return world


# --- activities: everything that touches the world ------------------------------------------

def fetch_documents(vendor_id: str) -> str:
    if vendor_id not in DOCUMENTS:
        raise KeyError(f"no documents for vendor {vendor_id!r}")  # NonRetryable
    return DOCUMENTS[vendor_id]


def extract_fields(document: str) -> dict:
    """Stands in for a model call that turns a document into fields."""
    fields = {}
    for line in document.splitlines():
        key, _, value = line.partition(":")
        fields[key.strip().lower().replace(" ", "_")] = value.strip()
    return {"legal_name": fields["legal_name"], "country": fields["country"],
            "iban": fields["iban"]}


def sanctions_screen(legal_name: str, country: str) -> dict:
    return {"match": country in SANCTIONED_COUNTRIES}


def ask_approver(vendor_id: str, legal_name: str, idempotency_key=None) -> dict:
    return world.email.send("approvals@example.com", f"Approve {legal_name} ({vendor_id})?",
                            idempotency_key=idempotency_key)


def create_vendor(legal_name: str, country: str, idempotency_key=None) -> dict:
    return world.erp.create_vendor(legal_name, country, idempotency_key=idempotency_key)


def deactivate_vendor(vendor_id: str, idempotency_key=None) -> dict:
    return world.erp.deactivate_vendor(vendor_id, idempotency_key=idempotency_key)


def register_payee(vendor_id: str, iban: str, idempotency_key=None) -> dict:
    return world.bank.register_payee(vendor_id, iban, idempotency_key=idempotency_key)


def remove_payee(payee_id: str, idempotency_key=None) -> dict:
    return world.bank.remove_payee(payee_id, idempotency_key=idempotency_key)


def send_welcome(vendor_id: str, legal_name: str, idempotency_key=None) -> dict:
    return world.email.send(f"{vendor_id}@vendors.example.com", f"Welcome, {legal_name}",
                            idempotency_key=idempotency_key)


# --- the workflow: plain code, replayed from the top on every wake-up -------------------------

def onboard_vendor(ctx: dl.Context, request: dict) -> dict:
    vendor_id = request["vendor_id"]
    document = ctx.activity("fetch_documents", fetch_documents, vendor_id, policy=IO)
    fields = ctx.activity("extract_fields", extract_fields, document, policy=MODEL)
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


# --- version 2: the change lesson 10 deploys while runs wait -------------------------------
# Sanctions lists change daily, and an approval can take three days: version 2 screens the
# company again right after the approval, before anything is created. Runs that recorded
# their approval under version 1 must not take the new step on replay (history has
# create_vendor where the new code asks for the recheck), so the step goes behind
# ctx.patched. `version_of` gives each version version 1's name: they are the same workflow.

def sanctions_recheck(legal_name: str, country: str) -> dict:
    return {"match": country in SANCTIONED_COUNTRIES, "list": "today"}


def _after_approval(ctx: dl.Context, vendor_id: str, fields: dict) -> dict:
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


def _version_2(ctx: dl.Context, request: dict, change: str) -> dict:
    vendor_id = request["vendor_id"]
    document = ctx.activity("fetch_documents", fetch_documents, vendor_id, policy=IO)
    fields = ctx.activity("extract_fields", extract_fields, document, policy=MODEL)
    screen = ctx.activity("sanctions_screen", sanctions_screen, fields["legal_name"],
                          fields["country"], policy=IO)
    if screen["match"]:
        return {"status": "rejected", "reason": "sanctions screening matched"}

    ctx.activity("ask_approver", ask_approver, vendor_id, fields["legal_name"], policy=IO)
    decision = ctx.wait_signal("approval", deadline=ctx.now() + 3 * DAY)
    if decision is None or not decision.get("approved"):
        return {"status": "declined", "timed_out": decision is None}

    if change == "deprecated":      # version 3: the old path is gone, the marker stays
        ctx.patched("sanctions-recheck")
    if change != "patched" or ctx.patched("sanctions-recheck"):
        recheck = ctx.activity("sanctions_recheck", sanctions_recheck, fields["legal_name"],
                               fields["country"], policy=IO)
        if recheck["match"]:
            return {"status": "rejected", "reason": "sanctions recheck matched"}
    return _after_approval(ctx, vendor_id, fields)


@dl.versioning.version_of(onboard_vendor)
def onboard_vendor_v2(ctx: dl.Context, request: dict) -> dict:
    """Version 2, deployed safely: the recheck only for runs that reach it under v2."""
    return _version_2(ctx, request, "patched")


@dl.versioning.version_of(onboard_vendor)
def onboard_vendor_v2_unpatched(ctx: dl.Context, request: dict) -> dict:
    """Version 2 as a hurried deploy writes it: the recheck for every run, old ones too."""
    return _version_2(ctx, request, "unguarded")


@dl.versioning.version_of(onboard_vendor)
def onboard_vendor_v3(ctx: dl.Context, request: dict) -> dict:
    """Version 3, the deprecation step: the old path deleted, once no run in flight carries
    it (replay_check on the unfinished runs says so). It still calls ctx.patched, so runs
    that recorded the marker under version 2 replay; it ignores the answer."""
    return _version_2(ctx, request, "deprecated")
