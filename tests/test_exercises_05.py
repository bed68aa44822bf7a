"""Lesson 05's checkers refuse the wrong answers learners most often give, say what is wrong,
and do not print the right number."""

import sys
from pathlib import Path

import pytest
from exercise_cases import refuses

import durablelab as dl
from durablelab.exercises.lesson05 import _schema as lesson_schema

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "solutions"))
import lesson05  # noqa: E402


def the_lesson_schema() -> dl.Run:
    """05.2 without changing the schema: the extraction completes."""
    from durablelab.sim import SimLLM
    with dl.Engine() as engine:
        llm = SimLLM("sim-small", clock=engine.clock, scenario="vendor_extraction", seed=1)
        fields = dl.structured(llm, lesson_schema())

        def extract(ctx, vendor_id):
            return ctx.activity("extract", fields, lesson05.PROMPT.format(
                document=lesson05.DOCUMENTS[vendor_id]), policy=lesson05.MODEL)

        run_id = engine.start(extract, "v-42")
        engine.run_until_idle()
        return engine.run(run_id)


def a_generous_budget() -> dl.Run:
    """05.2 with the schema changed but four repairs allowed."""
    from durablelab.sim import SimLLM
    with dl.Engine() as engine:
        llm = SimLLM("sim-small", clock=engine.clock, scenario="vendor_extraction", seed=1)
        policy = dl.RetryPolicy(max_attempts=3, model_output_budget=4, jitter="none")

        def extract(ctx, vendor_id):
            return ctx.activity("extract", dl.structured(llm, lesson05.ThreeLetterFields),
                                lesson05.PROMPT.format(document=lesson05.DOCUMENTS[vendor_id]),
                                policy=policy)

        run_id = engine.start(extract, "v-42")
        engine.run_until_idle()
        return engine.run(run_id)


# (exercise, a wrong answer, words the verdict must say, the answer it must not give away)
WRONG = [
    ("05.1", lambda: 15, "30 % of 50", "17"),
    ("05.1", lambda: 69, "count runs, not calls", "17"),
    ("05.1", lambda: 12, "is not the number of runs", "17"),
    ("05.2", the_lesson_schema, "the run completed", None),
    ("05.2", a_generous_budget, "refused answers", None),
    ("05.2", lambda: "ModelOutputError", "give the run itself", None),
    ("05.3", lambda: 3.42e-05, "the cost with tiny first", None),
    ("05.3", lambda: 16.05, "per million tokens", None),
    ("05.3", lambda: 1.815e-05, "is not what the ledgers bill", None),
    ("05.4", lambda: {"turns": 10, "model_calls": 5}, "is not where the run went over", None),
    ("05.4", lambda: {"turns": "agent_step", "model_calls": "agent_step"},
     "a whole number", None),
    ("05.4", lambda: 11, "give a dict", None),
    ("05.5", lambda: 376, "the count with full jitter", "495"),
    ("05.5", lambda: 100, "is not the number of 429s", "495"),
]


@pytest.mark.parametrize("exercise_id, answer, words, secret", WRONG,
                         ids=[f"{w[0]}-{i}" for i, w in enumerate(WRONG)])
def test_checker_refuses_a_common_wrong_answer(exercise_id, answer, words, secret):
    refuses(exercise_id, answer(), words, secret)
