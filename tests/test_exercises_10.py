"""Lesson 10's exercises refuse the wrong answers learners most often give."""

import pytest
from exercise_cases import refuses

import durablelab as dl
from durablelab.examples import onboarding as ob


@dl.versioning.version_of(ob.onboard_vendor)
def recheck_after_approval(ctx, request):
    """Lesson 10's own version 2: it rechecks, but after the approval."""
    return ob.onboard_vendor_v2(ctx, request)


@dl.versioning.version_of(ob.onboard_vendor)
def early_recheck_unpatched(ctx, request):
    """The recheck before the approval, for every run: the exercise's first step."""
    vendor_id = request["vendor_id"]
    document = ctx.activity("fetch_documents", ob.fetch_documents, vendor_id, policy=ob.IO)
    fields = ctx.activity("extract_fields", ob.extract_fields, document, policy=ob.MODEL)
    ctx.activity("sanctions_screen", ob.sanctions_screen, fields["legal_name"],
                 fields["country"], policy=ob.IO)
    ctx.activity("sanctions_recheck", ob.sanctions_recheck, fields["legal_name"],
                 fields["country"], policy=ob.IO)
    ctx.activity("ask_approver", ob.ask_approver, vendor_id, fields["legal_name"],
                 policy=ob.IO)
    decision = ctx.wait_signal("approval", deadline=ctx.now() + 3 * ob.DAY)
    return {"status": "active" if decision and decision.get("approved") else "declined"}


def recheck_not_a_version(ctx, request):
    return ob.onboard_vendor_v2(ctx, request)


WRONG = [
    ("10.1", "retry backoff", "retry backoff: with ctx.patched it replays", None),
    ("10.1", ["approval wait"], "is missing from your answer", "attempt in flight"),
    ("10.1", "in flight", "give parking points as the 'parked' column", None),
    ("10.2", lambda: ob.onboard_vendor_v2_unpatched, "the replay check flags", None),
    ("10.2", lambda: early_recheck_unpatched, "the replay check flags shipped runs", None),
    ("10.2", lambda: recheck_after_approval, "before ask_approver", None),
    ("10.2", lambda: recheck_not_a_version, "version_of(ob.onboard_vendor)", None),
    ("10.3", {"calls": 5, "latest": 9}, "the fork replays positions before 5", None),
    ("10.3", {"calls": 4, "latest": 10}, "replays the failed publish", None),
    ("10.3", {"calls": 4, "latest": 8}, "can start later", None),
]


@pytest.mark.parametrize("exercise_id, answer, words, secret", WRONG,
                         ids=[f"{w[0]}-{i}" for i, w in enumerate(WRONG)])
def test_checker_refuses_a_common_wrong_answer(exercise_id, answer, words, secret):
    refuses(exercise_id, answer() if callable(answer) else answer, words, secret)
