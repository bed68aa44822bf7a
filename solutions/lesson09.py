"""Lesson 09 (non-determinism): solutions."""

import durablelab as dl
from durablelab.examples import hash_order


def step(*args, **kwargs):
    return {"args": list(args), "kwargs": kwargs}


def onboard(ctx: dl.Context, vendor: dict) -> str:
    """09.1: the longer sleep behind ctx.patched; a waiting run replays its one-hour sleep."""
    for name in ("fetch", "screen", "notify"):
        ctx.activity(name, step, vendor["id"], tier="gold")
    if vendor["amount"] > 100:
        ctx.activity("manual_review", step, vendor["amount"])
    else:
        ctx.activity("auto_approve", step, vendor["amount"])
    ctx.sleep(7200 if ctx.patched("two-hour-sleep") else 3600)
    ctx.wait_signal("approval")
    ctx.activity("activate", step, vendor["id"])
    return "active"


def send(to, text):
    return {"to": to, "text": text}


def welcome(ctx: dl.Context, customer: str) -> dict:
    """09.2: the coin is ctx.random(): drawn once, recorded, handed back on replay."""
    tier = "gold" if ctx.random() < 0.5 else "silver"
    ctx.log("decided tier", tier)
    ctx.activity("welcome_email", send, customer, "welcome!")
    ctx.sleep(3600)
    return {"customer": customer, "tier": tier}


def dict_flow(ctx: dl.Context, _) -> object:
    """09.3: the dict is built in an order no process changes."""
    regions = dict.fromkeys(sorted(hash_order.REGIONS), 0)
    ctx.activity("open_region", hash_order.notify, next(iter(regions)))
    return ctx.wait_signal("go")


#: 09.4: both arguments columns show the same first 2,000 characters; the digest, a hash of
#: the whole canonical arguments, differs.
FIELD = "digest"

#: What `dl.exercises.check` takes for each exercise (tests/test_exercises.py checks them all).
ANSWERS = {"09.1": lambda: onboard, "09.2": lambda: welcome, "09.3": lambda: dict_flow,
           "09.4": lambda: FIELD}
