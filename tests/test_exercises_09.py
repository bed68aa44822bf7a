"""Lesson 09's exercises refuse the wrong answers learners most often give."""

import random

import pytest
from exercise_cases import refuses

from durablelab.examples import hash_order


def step(*args, **kwargs):
    return {"args": list(args), "kwargs": kwargs}


def onboard(ctx, vendor, sleep=None):
    """The catalogue's onboard; `sleep` replaces its hour, for old runs and new alike."""
    for name in ("fetch", "screen", "notify"):
        ctx.activity(name, step, vendor["id"], tier="gold")
    if vendor["amount"] > 100:
        ctx.activity("manual_review", step, vendor["amount"])
    else:
        ctx.activity("auto_approve", step, vendor["amount"])
    ctx.sleep(sleep or 3600)
    ctx.wait_signal("approval")
    ctx.activity("activate", step, vendor["id"])
    return "active"


def onboard_longer_sleep(ctx, vendor):        # the change without a patch
    return onboard(ctx, vendor, sleep=7200)


def onboard_patch_inverted(ctx, vendor):      # the patch the wrong way round
    return onboard(ctx, vendor, sleep=3600 if ctx.patched("two-hour-sleep") else 7200)


def send(to, text):
    return {"to": to, "text": text}


def welcome_random_module(ctx, customer):     # the lesson's welcome, unchanged
    tier = "gold" if random.random() < 0.5 else "silver"
    ctx.activity("welcome_email", send, customer, "welcome!")
    ctx.sleep(3600)
    return {"customer": customer, "tier": tier}


def welcome_always_gold(ctx, customer):       # deterministic, but no longer a coin
    ctx.activity("welcome_email", send, customer, "welcome!")
    ctx.sleep(3600)
    return {"customer": customer, "tier": "gold"}


def dict_flow_list(ctx, _):                   # a list of the set is still in hash order
    regions = list(hash_order.REGIONS)
    ctx.activity("open_region", hash_order.notify, regions[0])
    return ctx.wait_signal("go")


WRONG = [
    ("09.1", onboard_longer_sleep, "diverged at position 5", None),
    ("09.1", onboard, "sleeps [3600.0] seconds", None),
    ("09.1", onboard_patch_inverted, "diverged", None),
    ("09.2", welcome_random_module, "the guard still stops it at random.random()", None),
    ("09.2", welcome_always_gold, "no longer drawn at random", None),
    ("09.3", hash_order.dict_flow, "opens another region", None),
    ("09.3", dict_flow_list, "opens another region", None),
    ("09.4", "arguments", "cannot tell the calls apart", "digest"),
    ("09.4", "name", "it is the same step", "digest"),
]


@pytest.mark.parametrize("exercise_id, answer, words, secret", WRONG,
                         ids=[f"{w[0]}-{i}" for i, w in enumerate(WRONG)])
def test_checker_refuses_a_common_wrong_answer(exercise_id, answer, words, secret):
    refuses(exercise_id, answer, words, secret)


def test_checker_leaves_the_random_module_and_the_regions_as_it_found_them():
    import durablelab as dl
    random.seed(11)
    before = random.random()
    random.seed(11)
    dl.exercises.check("09.2", welcome_random_module)
    dl.exercises.check("09.3", hash_order.dict_flow)
    assert random.random() == before
    assert type(hash_order.REGIONS) is set and hash_order.REGIONS == {"eu", "us", "apac"}
