"""Lesson 05 (malformed model output): solutions."""

from pydantic import BaseModel, Field

import durablelab as dl
from durablelab.examples.onboarding import DOCUMENTS
from durablelab.sim import SimLLM

PROMPT = "Extract the vendor's legal name, country and IBAN from this document.\n\n{document}"
MODEL = dl.RetryPolicy(max_attempts=3, model_output_budget=2, jitter="none")

#: 05.1: 17 of the 50 seeds break the first answer (30 % on average would be 15).
REPAIRED_RUNS = 17


class ThreeLetterFields(BaseModel):
    legal_name: str
    country: str = Field(pattern=r"^[A-Z]{3}$")
    iban: str


def impossible_schema() -> dl.Run:
    """05.2: the model keeps answering "NO"; every repair is refused the same way, and the
    run fails as a ModelOutputError once model_output_budget=2 repairs are spent."""
    with dl.Engine() as engine:
        llm = SimLLM("sim-small", clock=engine.clock, scenario="vendor_extraction", seed=1)

        def extract(ctx, vendor_id):
            return ctx.activity("extract", dl.structured(llm, ThreeLetterFields),
                                PROMPT.format(document=DOCUMENTS[vendor_id]), policy=MODEL)

        run_id = engine.start(extract, "v-42", run_id="three-letters")
        engine.run_until_idle()
        return engine.run(run_id)


#: 05.3: sim-small first answers well at once: one call, its cost only.
SMALL_FIRST_COST = 1.605e-05

#: 05.4: both stop at the sixth model call, position 11 (turns count every recorded
#: activity: 11 > 10; model calls count agent_step: 6 > 5).
POSITIONS = {"turns": 11, "model_calls": 11}

#: 05.5: without jitter the refused runs come back together, and are refused again.
REFUSED_IN_LOCKSTEP = 495

#: What `dl.exercises.check` takes for each exercise (tests/test_exercises.py checks them all).
ANSWERS = {
    "05.1": lambda: REPAIRED_RUNS,
    "05.2": impossible_schema,
    "05.3": lambda: SMALL_FIRST_COST,
    "05.4": lambda: POSITIONS,
    "05.5": lambda: REFUSED_IN_LOCKSTEP,
}
