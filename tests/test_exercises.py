"""Every exercise that checks itself accepts its solution (solutions/) and refuses the wrong
answers learners most often give, saying what is wrong without printing the answer."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

import durablelab as dl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "solutions"))

from exercise_cases import refuses  # noqa: E402

import lesson01  # noqa: E402

# Every solutions/lessonNN.py says what it answers in ANSWERS (exercise id -> a callable
# giving the answer); wrong answers are tested here (01, 03, 04) or in test_exercises_NN.py.
SOLUTIONS = {exercise_id: answer
             for path in sorted((ROOT / "solutions").glob("lesson*.py"))
             for exercise_id, answer in importlib.import_module(path.stem).ANSWERS.items()}


def test_every_exercise_that_checks_itself_has_a_solution():
    assert set(SOLUTIONS) == set(dl.exercises.EXERCISES)


@pytest.mark.parametrize("exercise_id", sorted(SOLUTIONS))
def test_checker_accepts_its_solution(exercise_id):
    verdict = dl.exercises.check(exercise_id, SOLUTIONS[exercise_id]())
    assert verdict, str(verdict)
    assert verdict.wrong == [] and len(verdict.right) >= 1
    assert str(verdict).startswith(f"Exercise {exercise_id} (") and "solved" in str(verdict)


def waiting_run() -> dl.Run:
    lesson01.world.reset()
    with dl.Engine() as engine:
        run_id = engine.start(lesson01.onboard_vendor, {"vendor_id": "v-42"})
        engine.advance(3600)
        return engine.run(run_id)


def approved_run() -> dl.Run:
    lesson01.world.reset()
    with dl.Engine() as engine:
        run_id = engine.start(lesson01.onboard_vendor, {"vendor_id": "v-42"})
        engine.advance(3600)
        engine.signal(run_id, "approval", {"approved": True})
        engine.run_until_idle()
        return engine.run(run_id)


def approval_without_deadline(ctx, request):
    decision = ctx.wait_signal("approval")
    return {"approved": decision["approved"]}


def approval_without_a_none_path(ctx, request):
    decision = ctx.wait_signal("approval", timeout=86400)
    return {"approved": decision["approved"]}


# (exercise, a wrong answer, words the verdict must say, the answer it must not give away)
WRONG = [
    ("01.2", waiting_run, "call engine.run_until_idle()", None),
    ("01.2", approved_run, "received a signal", None),
    ("01.2", lambda: {"status": "declined"}, "give the run itself", None),
    ("01.3", lambda: "history_not_consumed", "replay stops before the end", "different_call"),
    ("01.3", lambda: {"remove": "different_call", "argument": "different_call"},
     "is not the reason", "different_arguments"),
    ("01.4", lambda: lesson01.onboard_vendor, "still calls sanctions_screen", None),
    ("01.4", lambda: unpatched_removal, "diverged", None),
    ("03.1", lambda: 1, "what the server asked for", "10"),
    ("03.1", lambda: 11, "not added", "10"),
    ("03.1", lambda: "10", "give a number", None),
    ("03.3", lambda: dl.RetryPolicy(max_attempts=1), "no longer retried either", None),
    ("03.3", lambda: dl.RetryPolicy(non_retryable=(ValueError,)), "still tried 3 times", None),
    ("03.3", lambda: dl.RetryPolicy(), "still tried 3 times", None),
    ("04.2", lambda: 30, "cut before it answers", "45"),
    ("04.2", lambda: 60, "a smaller time-out works too", "45"),
    ("04.5", lambda: approval_without_deadline, "still waits forever", None),
    ("04.5", lambda: approval_without_a_none_path, "must take a path for it", None),
]


def unpatched_removal(ctx, request):
    """01.4 done without ctx.patched: the step is simply gone, for old runs too."""
    from durablelab.examples.onboarding import (DAY, IO, MODEL, ask_approver, extract_fields,
                                                fetch_documents)
    vendor_id = request["vendor_id"]
    document = ctx.activity("fetch_documents", fetch_documents, vendor_id, policy=IO)
    fields = ctx.activity("extract_fields", extract_fields, document, policy=MODEL)
    ctx.activity("ask_approver", ask_approver, vendor_id, fields["legal_name"], policy=IO)
    decision = ctx.wait_signal("approval", deadline=ctx.now() + 3 * DAY)
    return {"approved": bool(decision and decision.get("approved"))}


@pytest.mark.parametrize("exercise_id, answer, words, secret", WRONG,
                         ids=[f"{w[0]}-{i}" for i, w in enumerate(WRONG)])
def test_checker_refuses_a_common_wrong_answer_without_giving_it_away(exercise_id, answer,
                                                                      words, secret):
    refuses(exercise_id, answer(), words, secret)


def test_unknown_exercise_names_the_ones_there_are():
    with pytest.raises(dl.DurableLabError, match="no exercise '9.9'.*01.2") as info:
        dl.exercises.check("9.9", 1)
    assert isinstance(info.value, ValueError)
    assert "03.1" in dl.exercises.listing()
