"""Checkers for the exercises of lesson 05 (malformed model output).

Each checker builds the lesson's simulated models (`SimLLM` on the `vendor_extraction` and
`support_agent` scenarios), runs the experiment the exercise describes on its own engine,
and compares what the ledgers and runs say with the learner's number or run.
"""

from __future__ import annotations

import math
import numbers

from . import Stop, exercise

PROMPT = "Extract the vendor's legal name, country and IBAN from this document.\n\n{document}"
QUESTION = "My kettle arrived damaged. Please refund order A-1001."


def _schema():
    from pydantic import BaseModel, Field

    class VendorFields(BaseModel):
        legal_name: str
        country: str = Field(pattern=r"^[A-Z]{2}$")
        iban: str
    return VendorFields


def _model_policy():
    import durablelab as dl
    return dl.RetryPolicy(max_attempts=3, model_output_budget=2, jitter="none")


def _number(value, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
        raise Stop(f"give {what} as a number, not {type(value).__name__}")
    return value


def _repairs_needed(runs: int = 50) -> int:
    """How many of `runs` extractions of v-42, run n with SimLLM(malformed_rate=0.3,
    seed=n), needed a repair."""
    import durablelab as dl
    from ..examples.onboarding import DOCUMENTS
    from ..sim import SimLLM
    schema, policy = _schema(), _model_policy()
    with dl.Engine(durability="exit") as engine:
        models = {n: SimLLM("sim-small", clock=engine.clock, scenario="vendor_extraction",
                            seed=n, malformed_rate=0.3) for n in range(runs)}

        def extract(ctx, n):
            return ctx.activity("extract", dl.structured(models[n], schema),
                                PROMPT.format(document=DOCUMENTS["v-42"]), policy=policy)

        for n in range(runs):
            engine.start(extract, n, run_id=f"repair-{n:02d}")
        engine.run_until_idle()
    return sum(any(call["feedback"] for call in model.calls) for model in models.values())


@exercise("05.1", "How often does repair pay?",
          "how many of the 50 runs needed a repair (a number)")
def how_often_repair(answer):
    given = _number(answer, "the number of runs that needed a repair")
    truth = _repairs_needed()
    if given == truth:
        yield True, f"{given:g} of 50 runs needed a repair"
    elif given == 50 * 0.3:
        yield False, ("15 is 30 % of 50, what the rate would give on average; count the runs "
                      "whose model ledger has a call with feedback")
    elif given > 50:
        yield False, f"{given:g}: there are only 50 runs; count runs, not calls"
    else:
        yield False, (f"{given:g} is not the number of runs that needed a repair; a run needed "
                      f"one if its model got a call with feedback= (model.calls)")


@exercise("05.2", "A schema the model cannot meet",
          "the Run (engine.run(run_id)) of an extraction whose schema asks for a three-letter "
          "country")
def schema_cannot_meet(run):
    from ..run import Run
    if not isinstance(run, Run):
        raise Stop(f"give the run itself, engine.run(run_id), not {type(run).__name__}")
    attempts = run.attempts
    malformed = attempts[attempts.outcome == "malformed"]
    errors = " ".join(str(e) for e in malformed.error)
    three = "{3}" in errors
    if run.status == "completed":
        yield False, ("the run completed: its schema still accepts the model's country; "
                      "give country Field(pattern=r\"^[A-Z]{3}$\")")
        return
    yield three, ("the model's answers were checked against a three-letter country" if three
                  else "no attempt was refused for a three-letter country pattern: change "
                       "the schema's country field")
    cls = getattr(run.error, "error_class", None)
    yield cls == "ModelOutputError", (
        "and the run failed as a ModelOutputError once its repairs ran out"
        if cls == "ModelOutputError" else
        f"the run ended with {cls or type(run.error).__name__}, not because of the answers")
    budget = len(malformed) == 3
    yield budget, ("a first answer and two repairs, all refused: the model keeps giving the "
                   "country it read" if budget else
                   f"{len(malformed)} refused answers: use the lesson's MODEL policy "
                   f"(model_output_budget=2)")


def _fallback_cost(small_first: bool) -> float:
    """What both models billed for extracting v-42 with ask_structured([...])."""
    import durablelab as dl
    from ..examples.onboarding import fetch_documents
    from ..sim import SimLLM
    schema, policy = _schema(), _model_policy()
    with dl.Engine() as engine:
        tiny = SimLLM("sim-tiny", clock=engine.clock, scenario="vendor_extraction",
                      prices={"input": 0.05, "output": 0.20})
        small = SimLLM("sim-small", clock=engine.clock, scenario="vendor_extraction",
                       prices={"input": 0.15, "output": 0.60})
        models = [small, tiny] if small_first else [tiny, small]

        def extract(ctx, vendor_id):
            document = ctx.activity("fetch_documents", fetch_documents, vendor_id)
            return dl.ask_structured(ctx, "extract", PROMPT.format(document=document), schema,
                                     models, policy=policy)

        engine.start(extract, "v-42", run_id="order-of-models")
        engine.run_until_idle()
    return tiny.usage["cost"] + small.usage["cost"]


@exercise("05.3", "Order of models",
          "what the run costs in dollars with small before tiny, as both ledgers bill it "
          "(a number)")
def order_of_models(answer):
    given = _number(answer, "the cost in dollars")
    truth, before = _fallback_cost(True), _fallback_cost(False)
    if math.isclose(given, truth, rel_tol=0.01):
        yield True, "that is what the two ledgers bill for it"
        yield True, f"{before / truth:.1f} times cheaper than tiny first, for this document"
    elif math.isclose(given, before, rel_tol=0.01):
        yield False, "that is the cost with tiny first, from section 4: swap the two models"
    elif given > 1:
        yield False, (f"${given:g} for one extraction? The prices are per million tokens; "
                      f"read usage['cost'] from the models' ledgers")
    else:
        yield False, (f"${given:g} is not what the ledgers bill; add tiny.usage['cost'] and "
                      f"small.usage['cost']")


def _runaway(budget):
    """The BudgetExceeded met when the lesson's support agent, with its order service down,
    runs under `budget`."""
    import durablelab as dl
    from ..sim import SimLLM

    def lookup_order(order_id: str) -> dict:
        raise ConnectionError("order service unavailable")     # the service is down

    def refund(order_id: str, amount: float) -> dict:
        return {"refunded": amount, "order_id": order_id}

    tools = {"lookup_order": lookup_order, "refund": refund}
    tool_policy = dl.RetryPolicy(max_attempts=2, jitter="none")

    def run_tool(name, arguments):
        return tools[name](**arguments)

    with dl.Engine() as engine:
        agent = SimLLM("sim-small", clock=engine.clock, scenario="support_agent")

        def support_agent(ctx, question):
            messages = [{"role": "user", "content": question}]
            while True:
                step = ctx.activity("agent_step", agent.agent_step, messages, sorted(tools))
                if "final" in step:
                    return {"answer": step["final"]}
                for call in step["tool_calls"]:
                    try:
                        result = ctx.activity(f"tool:{call['name']}", run_tool, call["name"],
                                              call["arguments"], policy=tool_policy)
                        messages.append({"role": "tool", "name": call["name"],
                                         "content": result})
                    except dl.ActivityFailed as exc:
                        messages.append({"role": "tool", "name": call["name"],
                                         "error": exc.cause_message})

        run_id = engine.start(support_agent, QUESTION, run_id="runaway", budget=budget)
        engine.run_until_idle()
        error = engine.run(run_id).error
    if not isinstance(error, dl.BudgetExceeded):
        raise RuntimeError(f"lesson 05's runaway agent did not stop on {budget}: {error!r}")
    return error


@exercise("05.4", "Other limits",
          "a dict {'turns': err.position, 'model_calls': err.position}: where each "
          "BudgetExceeded stops the runaway agent")
def other_limits(answer):
    import durablelab as dl
    if not isinstance(answer, dict) or not {"turns", "model_calls"} <= set(answer):
        raise Stop("give a dict {'turns': err.position, 'model_calls': err.position}")
    for limit, budget in (("turns", dl.Budget(turns=10)),
                          ("model_calls", dl.Budget(model_calls=5))):
        given, error = answer[limit], _runaway(budget)
        if isinstance(given, bool) or not isinstance(given, int):
            yield False, f"{limit}: give the position, err.position, a whole number"
        elif given == error.position:
            yield True, (f"Budget({limit}=...) stops the run at position {given}, "
                         f"at {error.activity!r}")
        else:
            yield False, (f"Budget({limit}=...): position {given} is not where the run went "
                          f"over; which recorded activities count as a "
                          f"{limit[:-1].replace('_', ' ')}?")


def _refused(jitter: str) -> int:
    """Requests the shared bucket refused when 100 runs extract at once (lesson 05, §7)."""
    import durablelab as dl
    from ..examples.onboarding import DOCUMENTS
    from ..sim import SimLLM, TokenBucket
    policy = dl.RetryPolicy(max_attempts=30, initial=1.0, max_interval=30, jitter=jitter)
    with dl.Engine(durability="exit") as engine:
        shared = SimLLM("sim-small", clock=engine.clock, scenario="vendor_extraction",
                        rate_limit=TokenBucket(rate=5, burst=10))
        extract = dl.structured(shared, _schema())

        def onboard(ctx, vendor_id):
            return ctx.activity("extract", extract, PROMPT.format(document=DOCUMENTS[vendor_id]),
                                policy=policy)

        for i in range(100):
            engine.start(onboard, "v-42", run_id=f"vendor-{i:03d}", seed=i)
        engine.run_until_idle()
    return shared.usage["rate_limited"]


@exercise("05.5", "Lockstep",
          "how many requests the shared bucket refuses with jitter=\"none\" (a number)")
def lockstep(answer):
    given = _number(answer, "the number of refused requests")
    truth = _refused("none")
    if given == truth:
        yield True, f"{given:g} requests refused"
        yield True, "more than with full jitter: runs refused together come back together"
    elif given == _refused("full"):
        yield False, ("that is the count with full jitter, from the lesson's table; set "
                      "jitter=\"none\" in PATIENT")
    else:
        yield False, (f"{given:g} is not the number of 429s; read shared.usage['rate_limited'] "
                      f"after the runs")
