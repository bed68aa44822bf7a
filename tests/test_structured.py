"""Structured output: validate with pydantic, feed the error back, give up on a small budget,
fall back to a second model, and stay deterministic on replay."""

import pytest
from pydantic import BaseModel

import durablelab as dl
from durablelab.examples.onboarding import DOCUMENTS
from durablelab.sim.llm import SimLLM, TokenBucket
from durablelab.structured import ask_structured, parse, structured


class VendorFields(BaseModel):
    legal_name: str
    country: str
    iban: str


FJORD = {"legal_name": "Fjord Fasteners AS", "country": "NO", "iban": "NO93 8601 1117 947"}
PROMPT = f"Extract the vendor's fields.\n\n{DOCUMENTS['v-42']}"


def model(engine, name="sim-small", **options):
    return SimLLM(name, clock=engine.clock, scenario="vendor_extraction", **options)


def run_once(engine, workflow, seed=0):
    run_id = engine.start(workflow, PROMPT, seed=seed)
    engine.run_until_idle()
    return engine.run(run_id)


def test_structured_returns_validated_fields_and_usage(engine):
    llm = model(engine)
    result = structured(llm, VendorFields)(PROMPT)
    call = llm.calls[-1]
    assert result == {**FJORD, "usage": {k: call[k] for k in ("input_tokens", "output_tokens",
                                                               "cost")}}
    assert structured(llm, VendorFields) is structured(llm, VendorFields)


@pytest.mark.parametrize("text, message", [
    ('{"legal_name": "Fjord', "not valid JSON .* it looks cut off"),
    ("I'm sorry, but I can't help with that request.", "prose or a refusal"),
    ('{"legalName": "F", "country": "NO", "iban": "x"}',
     r"does not match VendorFields: legal_name: Field required \(the answer had the fields: "
     r"legalName, country, iban\)"),
    ('["F"]', r"\(top level\): Input should be a valid dictionary"),
])
def test_parse_names_what_is_wrong(text, message):
    with pytest.raises(dl.ModelOutputError, match=message):
        parse(text, VendorFields)


def test_malformed_output_recovers_within_budget_with_feedback(engine):
    llm = model(engine, malformed_rate=1.0)  # every first try is broken

    def extract(ctx, prompt):
        return ctx.activity("extract", structured(llm, VendorFields), prompt,
                            policy=dl.RetryPolicy(model_output_budget=2, jitter="none"))

    run = run_once(engine, extract)
    assert run.status == "completed" and {k: run.result[k] for k in FJORD} == FJORD
    assert run.attempts.outcome.tolist() == ["malformed", "ok"]
    first_error = run.attempts.error.iloc[0]
    assert first_error.startswith("sim-small's answer")
    assert [c["feedback"] for c in llm.calls] == [None, first_error]  # the repair got it
    assert run.result["usage"]["input_tokens"] == llm.calls[-1]["input_tokens"]


def test_hopeless_model_fails_as_model_output_error_with_the_last_validation_error(engine):
    tiny = model(engine, "sim-tiny")

    def extract(ctx, prompt):
        return ctx.activity("extract", structured(tiny, VendorFields), prompt,
                            policy=dl.RetryPolicy(model_output_budget=2, jitter="none"))

    run = run_once(engine, extract)
    assert run.status == "failed"
    assert isinstance(run.error, dl.ActivityFailed) and run.error.error_class == "ModelOutputError"
    assert run.attempts.outcome.tolist() == ["malformed"] * 3  # the first try + 2 repairs
    last = run.attempts.error.iloc[-1]
    assert last.startswith("sim-tiny's answer") and last in run.error.message
    assert run.error.cause_message == last
    assert [c["feedback"] for c in tiny.calls] == [None, *run.attempts.error.iloc[:2]]


def test_falls_back_to_the_second_model_when_the_first_is_hopeless(engine):
    tiny, small = model(engine, "sim-tiny"), model(engine, "sim-small")

    def extract(ctx, prompt):
        return ask_structured(ctx, "extract", prompt, VendorFields, [tiny, small])

    run = run_once(engine, extract)
    assert run.status == "completed" and {k: run.result[k] for k in FJORD} == FJORD
    assert run.history.name.tolist() == ["extract:sim-tiny", "extract:sim-small"]
    assert run.history.ok.tolist() == [False, True]
    assert (tiny.usage["calls"], small.usage["calls"]) == (3, 1)

    engine.crash()  # replay after a crash asks nobody again and takes the same path
    engine.run_until_idle()
    assert (tiny.usage["calls"], small.usage["calls"]) == (3, 1)
    assert engine.run(run.run_id).result == run.result


def test_fallback_only_on_model_output_errors(engine):
    tiny = model(engine, "sim-tiny", rate_limit=TokenBucket(rate=0.001, burst=1))
    small = model(engine, "sim-small")
    tiny.complete("use up the only token")

    def extract(ctx, prompt):
        return ask_structured(ctx, "extract", prompt, VendorFields, [tiny, small],
                              policy=dl.RetryPolicy(max_attempts=2, initial=1, jitter="none"))

    run = run_once(engine, extract)
    assert run.status == "failed" and run.error.error_class == "RateLimited"
    assert small.usage["calls"] == 0


def test_every_model_hopeless_raises_the_last_failure(engine):
    scenario = {"version": 1, "answers": [{"match": "Fjord", "answer": FJORD, "hopeless": True}]}
    first, second = (SimLLM(name, clock=engine.clock, scenario=scenario)
                     for name in ("sim-tiny", "sim-small"))

    def extract(ctx, prompt):
        return ask_structured(ctx, "extract", prompt, VendorFields, [first, second])

    run = run_once(engine, extract)
    assert run.status == "failed" and run.error.activity == "extract:sim-small"
    assert run.history.name.tolist() == ["extract:sim-tiny", "extract:sim-small"]


def test_usage_in_results_matches_the_models_ledger(engine):
    llm = model(engine, malformed_rate=0.5, seed=1)

    def extract(ctx, prompt):
        return ctx.activity("extract", structured(llm, VendorFields), prompt)

    results = [run_once(engine, extract, seed=s).result for s in range(20)]
    ok = [c for c in llm.calls if c["outcome"] == "ok"]
    assert len(ok) == 20 and llm.usage["calls"] > 20  # broken answers were paid for too
    assert sum(r["usage"]["cost"] for r in results) == pytest.approx(sum(c["cost"] for c in ok))


def test_a_broken_answer_carries_its_usage_and_the_budget_counts_it(engine):
    tiny = model(engine, "sim-tiny")           # every answer is broken
    with pytest.raises(dl.ModelOutputError) as info:
        structured(tiny, VendorFields)(PROMPT)
    call = tiny.calls[-1]
    assert info.value.usage == {k: call[k] for k in ("input_tokens", "output_tokens", "cost")}

    def extract(ctx, prompt):
        return ctx.activity("extract", structured(tiny, VendorFields), prompt,
                            policy=dl.RetryPolicy(model_output_budget=5, jitter="none"))

    # two broken answers cost more than this many tokens: the third attempt never happens
    per_call = call["input_tokens"] + call["output_tokens"]
    run_id = engine.start(extract, PROMPT, budget=dl.Budget(tokens=int(per_call * 1.5)))
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "failed" and isinstance(run.error, dl.BudgetExceeded)
    assert run.error.limit == "tokens" and run.error.spent >= 2 * per_call - 50
    assert run.attempts.outcome.tolist() == ["malformed", "malformed"]
    assert len(tiny.calls) == 1 + 2          # the direct call above, then the run's two


def test_burnt_tokens_are_still_counted_after_a_reopen(db_path):
    from durablelab.sim.llm import SimLLM

    engine = dl.Engine(db_path)
    tiny = SimLLM("sim-tiny", clock=engine.clock, scenario="vendor_extraction")

    def extract_then_wait(ctx, prompt):
        try:
            ctx.activity("extract", structured(tiny, VendorFields), prompt,
                         policy=dl.RetryPolicy(model_output_budget=0, max_attempts=1))
        except dl.ActivityFailed:
            pass
        ctx.wait_signal("again")
        return ctx.activity("extract2", structured(tiny, VendorFields), prompt,
                            policy=dl.RetryPolicy(model_output_budget=0, max_attempts=1))

    run_id = engine.start(extract_then_wait, PROMPT, budget=dl.Budget(model_calls=1))
    engine.run_until_idle()
    assert engine.run(run_id).status == "waiting"   # one broken call: within the budget
    engine.close()
    engine = dl.Engine(db_path, workflows=[extract_then_wait])
    tiny.clock = engine.clock
    engine.signal(run_id, "again", None)
    engine.run_until_idle()
    run = engine.run(run_id)
    # the broken answer before the reopen still counts: the second call is one too many
    assert isinstance(run.error, dl.BudgetExceeded) and run.error.limit == "model_calls"
    assert run.error.spent == 2
    engine.close()
