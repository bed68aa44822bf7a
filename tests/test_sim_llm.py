"""The simulated model: a token bucket in virtual time, deterministic answers and defects,
token and cost accounting, a rate limit that 200 runs really share, and a scripted agent
that recovers from its own wrong-argument call."""

import json
from collections import Counter

import pytest

import durablelab as dl
from durablelab.clock import VirtualClock
from durablelab.examples.onboarding import DOCUMENTS
from durablelab.sim.llm import DEFECTS, REFUSAL, SimLLM, TokenBucket, count_tokens, load_scenario

SCENARIO = {"version": 1, "answers": [
    {"match": "fjord", "answer": {"legal_name": "Fjord Fasteners AS", "country": "NO"}},
    {"match": "weather", "answer": "Sunny, 21 degrees."},
    {"match": "sphinx", "answer": {"riddle": "man"}, "hopeless": ["sim-tiny"]},
]}


def prompt_for(vendor_id):
    return f"Extract legal_name, country and iban as JSON.\n\n{DOCUMENTS[vendor_id]}"


# --- TokenBucket ---------------------------------------------------------------------------

def test_token_bucket_grants_burst_then_one_token_per_interval():
    clock = VirtualClock()
    bucket = TokenBucket(rate=2, burst=3, clock=clock)
    schedule = []
    for at in [0, 0, 0, 0, 0.25, 0.5, 0.5, 1.0, 1.25, 10.0, 10.0, 10.0, 10.0]:
        clock.advance_to(at)
        schedule.append((at, bucket.take()))
    assert schedule == [(0, 0.0), (0, 0.0), (0, 0.0), (0, 0.5), (0.25, 0.25), (0.5, 0.0),
                        (0.5, 0.5), (1.0, 0.0), (1.25, 0.25),
                        (10.0, 0.0), (10.0, 0.0), (10.0, 0.0), (10.0, 0.5)]  # never above burst


def test_token_bucket_waiting_exactly_retry_after_is_granted():
    clock = VirtualClock()
    bucket = TokenBucket(rate=3, burst=1, clock=clock)
    assert bucket.take() == 0.0
    for _ in range(50):  # thirds do not add up exactly in floats; the wait must still suffice
        wait = bucket.take()
        assert wait == pytest.approx(1 / 3)
        clock.advance_to(clock.now() + wait)
        assert bucket.take() == 0.0


def test_token_bucket_needs_a_clock_and_sane_numbers():
    with pytest.raises(ValueError, match="no clock"):
        TokenBucket(1, 1).take()
    with pytest.raises(ValueError, match="rate must be"):
        TokenBucket(0, 1)
    with pytest.raises(ValueError, match="burst must be"):
        TokenBucket(1, 0)


# --- answers, tokens, cost -------------------------------------------------------------------

def test_complete_answers_from_scenario_with_counted_tokens_and_cost():
    llm = SimLLM(clock=VirtualClock(), scenario=SCENARIO, prices={"input": 1.0, "output": 3.0})
    reply = llm.complete("What is the weather like today?")  # 6 words -> 8 tokens
    assert reply == {"model": "sim-small", "text": "Sunny, 21 degrees.",
                     "usage": {"input_tokens": 8, "output_tokens": 4,  # 3 words -> 4
                               "cost": (8 * 1.0 + 4 * 3.0) / 1e6}}
    assert json.loads(llm.complete("FJORD?")["text"])["legal_name"] == "Fjord Fasteners AS"
    assert llm.complete("no pattern here")["text"] == "I don't have an answer for that."
    assert count_tokens("") == 0 and count_tokens("a b c") == 4


def test_same_seed_gives_same_answers_tokens_and_defects():
    def transcript(seed):
        llm = SimLLM(clock=VirtualClock(), scenario="vendor_extraction", seed=seed,
                     malformed_rate=0.5)
        replies = [llm.complete(prompt_for(v) + f"\n(try {i})") for i in range(40)
                   for v in ("v-42", "v-77")]
        return replies, [(c["digest"], c["outcome"], c["defect"]) for c in llm.calls]

    assert transcript(3) == transcript(3)
    assert transcript(3) != transcript(4)
    _, calls = transcript(3)
    defects = Counter(defect for _, _, defect in calls)
    assert set(defects) == {None, *DEFECTS}  # every kind shows up, and clean answers too


def test_each_defect_breaks_the_answer_in_its_own_way():
    llm = SimLLM(clock=VirtualClock(), scenario=SCENARIO, malformed_rate=1.0)
    seen = {}
    for i in range(30):
        reply = llm.complete(f"fjord {i}")
        seen.setdefault(llm.calls[-1]["defect"], reply["text"])
    with pytest.raises(json.JSONDecodeError):
        json.loads(seen["truncated"])
    assert json.loads(seen["schema"]).keys() in ({"legalName", "country"},
                                                 {"legal_name", "Country"})
    assert seen["refusal"] == REFUSAL


def test_feedback_repairs_the_answer_unless_the_model_is_hopeless():
    clock = VirtualClock()
    small = SimLLM("sim-small", clock=clock, scenario=SCENARIO, malformed_rate=1.0)
    assert small.calls == [] and small.complete("fjord")["text"] != json.dumps(
        SCENARIO["answers"][0]["answer"])
    repaired = small.complete("fjord", feedback="legal_name: Field required")
    assert json.loads(repaired["text"]) == SCENARIO["answers"][0]["answer"]
    assert [c["outcome"] for c in small.calls] == ["malformed", "ok"]
    tiny = SimLLM("sim-tiny", clock=clock, scenario=SCENARIO)
    answers = [tiny.complete("sphinx", feedback="try again")["text"] for _ in range(5)]
    assert all(a != '{"riddle": "man"}' for a in answers)
    assert SimLLM("sim-small", clock=clock, scenario=SCENARIO).complete("sphinx")["text"] == \
        '{"riddle": "man"}'


def test_usage_totals_equal_the_sum_over_calls():
    llm = SimLLM(clock=VirtualClock(), scenario="vendor_extraction", malformed_rate=0.3,
                 rate_limit=TokenBucket(rate=1, burst=5))
    replies = []
    for i in range(12):
        try:
            replies.append(llm.complete(prompt_for("v-42") + f" #{i}", feedback="x" * (i % 2)))
        except dl.RateLimited:
            pass
    answered = [c for c in llm.calls if c["outcome"] != "rate_limited"]
    assert len(answered) == len(replies) == llm.usage["calls"] == 5
    assert llm.usage["rate_limited"] == 7
    for field in ("input_tokens", "output_tokens"):
        assert llm.usage[field] == sum(c[field] for c in llm.calls) == \
            sum(r["usage"][field] for r in replies)
    assert llm.usage["cost"] == pytest.approx(sum(c["cost"] for c in llm.calls))
    assert llm.usage["cost"] == pytest.approx(llm.cost(llm.usage["input_tokens"],
                                                       llm.usage["output_tokens"]))
    llm.reset()
    assert llm.calls == [] and llm.usage["calls"] == 0 and llm.complete("fjord")


def test_fixture_answers_match_the_onboarding_documents():
    llm = SimLLM(clock=VirtualClock(), scenario="vendor_extraction")
    for vendor_id, document in DOCUMENTS.items():
        fields = json.loads(llm.complete(prompt_for(vendor_id))["text"])
        lines = dict(line.split(": ", 1) for line in document.splitlines())
        assert fields == {"legal_name": lines["Legal name"], "country": lines["Country"],
                          "iban": lines["IBAN"]}


@pytest.mark.parametrize("scenario, message", [
    ({"version": 1, "answerz": []}, "top level: unknown key 'answerz'"),
    ({"version": 2}, "version 2 is not supported"),
    ({"version": 1, "answers": [{"match": "(", "answer": "x"}]}, r"answers\[0\]: 'match'"),
    ({"version": 1, "answers": [{"match": "x", "anwser": "y"}]}, r"answers\[0\]: unknown key"),
    ({"version": 1, "agents": [{"match": "x", "steps": [{"note": "?"}]}]},
     r"steps\[0\] needs one of 'call', 'calls'"),
    ({"version": 1, "agents": [{"match": "x", "steps": [{"calls": []}]}]},
     r"steps\[0\]: 'calls' is a non-empty list"),
    ({"version": 1, "agents": [{"match": "x", "steps": [
        {"calls": [{"name": "a"}], "mistake": {"name": "b"}}]}]}, "goes with one 'call'"),
])
def test_bad_scenario_names_the_key_and_place(scenario, message):
    with pytest.raises(ValueError, match=message):
        load_scenario(scenario)


def test_bad_scenario_file_names_the_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"version": 1, "answers": [{"match": "x", "answer": 1, "hopless": true}]}')
    with pytest.raises(ValueError, match="unknown key 'hopless'") as info:
        SimLLM(clock=VirtualClock(), scenario=path)
    assert str(path) in str(info.value)
    with pytest.raises(ValueError, match="cannot read scenario file"):
        SimLLM(clock=VirtualClock(), scenario="no_such_scenario")


# --- in an engine ----------------------------------------------------------------------------

def peak_per_second(times):
    return max(Counter(int(t) for t in times).values())


def test_rate_limit_is_shared_by_200_concurrent_runs_and_retry_after_is_honoured():
    def storm(limited):
        engine = dl.Engine(durability="exit")  # one write per run: this test is about the model
        bucket = TokenBucket(rate=5, burst=10) if limited else None
        llm = SimLLM(clock=engine.clock, scenario="vendor_extraction", rate_limit=bucket)
        policy = dl.RetryPolicy(max_attempts=40, initial=1.0, max_interval=30)

        def extract(ctx, vendor_id):
            return ctx.activity("extract", llm.complete, prompt_for(vendor_id), policy=policy)

        ids = [engine.start(extract, "v-42", run_id=f"r{i}", seed=i) for i in range(200)]
        engine.run_until_idle()
        assert (engine.runs().status == "completed").all()
        last = engine.run(ids[-1])
        engine.close()
        return llm, last

    llm, last = storm(limited=True)
    ok = [c["at"] for c in llm.calls if c["outcome"] == "ok"]
    assert len(ok) == 200 and llm.usage["rate_limited"] > 200
    assert peak_per_second(ok) <= 5 + 10  # the rate plus the burst, at most
    # every refused request waited at least its retry_after before asking again
    by_key = {}
    for call in llm.calls:
        by_key.setdefault(call["key"], []).append(call)
    for calls in by_key.values():
        for before, after in zip(calls, calls[1:]):
            assert after["at"] - before["at"] >= before["retry_after"] - 1e-9
    limited = last.attempts[last.attempts.outcome == "rate_limited"]
    refused = [c["retry_after"] for c in by_key[f"{last.run_id}:1"][:-1]]
    assert len(limited) == len(refused) > 0
    assert all(d >= r for d, r in zip(limited.delay, refused))

    free, _ = storm(limited=False)
    assert peak_per_second(c["at"] for c in free.calls) == 200 > peak_per_second(ok)


def test_crash_does_not_reset_the_model_ledger(engine):
    llm = SimLLM(clock=engine.clock, scenario="vendor_extraction")

    def wf(ctx, _):
        return ctx.activity("extract", llm.complete, prompt_for("v-77"))["text"]

    run_id = engine.start(wf, None)
    engine.run_until_idle()
    engine.crash()
    assert llm.usage["calls"] == 1 and engine.run(run_id).status == "completed"


# --- the scripted agent ----------------------------------------------------------------------

ORDERS = {"A-1001": {"item": "kettle", "amount": 42.5, "status": "delivered damaged"}}


def lookup_order(order_id: str) -> dict:
    return ORDERS[order_id]


def refund(order_id: str, amount: float, idempotency_key=None) -> dict:
    return {"refunded": amount, "order_id": order_id}


TOOLS = {"lookup_order": lookup_order, "refund": refund}


def run_tool(name: str, arguments: dict, idempotency_key=None) -> dict:
    return TOOLS[name](**arguments)  # a wrong keyword raises TypeError: NonRetryable


def support_agent(llm):
    def support(ctx, question):
        messages = [{"role": "user", "content": question}]
        for turn in range(8):
            step = ctx.activity("agent_step", llm.agent_step, messages, sorted(TOOLS))
            if "final" in step:
                return {"answer": step["final"], "turns": turn + 1, "messages": messages}
            for call in step["tool_calls"]:
                try:
                    result = ctx.activity(f"tool:{call['name']}", run_tool, call["name"],
                                          call["arguments"])
                    messages.append({"role": "tool", "name": call["name"], "content": result})
                except dl.ActivityFailed as exc:
                    messages.append({"role": "tool", "name": call["name"],
                                     "error": exc.cause_message})
        raise RuntimeError("the agent did not finish in 8 turns")
    return support


def test_agent_reaches_its_final_answer_after_recovering_from_a_wrong_argument(engine):
    llm = SimLLM(clock=engine.clock, scenario="support_agent")
    run_id = engine.start(support_agent(llm), "My kettle arrived damaged, refund A-1001 please")
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "completed", run.error
    assert run.result["answer"].startswith("I'm sorry the kettle arrived damaged")
    tools = [(m["name"], "error" in m) for m in run.result["messages"][1:]]
    assert tools == [("lookup_order", True), ("lookup_order", False), ("refund", False)]
    assert "orderid" in run.result["messages"][1]["error"]
    failed = run.attempts[run.attempts.outcome == "non_retryable"]
    assert failed.activity.tolist() == ["tool:lookup_order"]  # not retried: a retry cannot help
    assert run.result["turns"] == 4 == llm.usage["calls"]
    assert llm.usage["cost"] > 0


def test_agent_without_the_tool_it_needs_says_so():
    llm = SimLLM(clock=VirtualClock(), scenario="support_agent")
    step = llm.agent_step([{"role": "user", "content": "refund my order"}], ["search"])
    assert "lookup_order" in step["final"] and set(step) == {"model", "final", "usage"}


def test_agent_with_no_matching_policy_answers_plainly():
    llm = SimLLM(clock=VirtualClock(), scenario="support_agent")
    step = llm.agent_step([{"role": "user", "content": "hello there"}], ["lookup_order"])
    assert step["final"] == "I don't have an answer for that."


TWO_AT_ONCE = {"version": 1, "agents": [{"match": "order", "steps": [
    {"calls": [{"name": "charge", "arguments": {"amount": 5}},
               {"name": "email", "arguments": {"to": "ada"}}]},
    {"final": "paid"}]}]}
SPECS = [{"name": "charge", "description": "", "parameters": {}},
         {"name": "email", "description": "", "parameters": {}}]


def tool_result(name, ok=True):
    return {"role": "tool", "tool_call_id": name, "name": name,
            "content": json.dumps({"ok": True} if ok else {"error": "503"})}


def test_a_step_of_several_calls_asks_for_them_in_one_answer_and_counts_each():
    llm = SimLLM(clock=VirtualClock(), scenario=TWO_AT_ONCE)
    ask = [{"role": "user", "content": "pay my order"}]
    first = llm(ask, SPECS)
    assert [(c["name"], c["arguments"]) for c in first["tool_calls"]] == [
        ("charge", {"amount": 5}), ("email", {"to": "ada"})]
    assert len({c["id"] for c in first["tool_calls"]}) == 2
    # one of the two answered: the answer asks again for the missing one only
    partly = llm(ask + [tool_result("charge"), tool_result("email", ok=False)], SPECS)
    assert [c["name"] for c in partly["tool_calls"]] == ["email"]
    done = llm(ask + [tool_result("charge"), tool_result("email")], SPECS)
    assert done["content"] == "paid" and done["tool_calls"] == []
    assert llm.usage["calls"] == 3
    missing = llm(ask, SPECS[:1])
    assert "'email'" in missing["content"] and missing["tool_calls"] == []
