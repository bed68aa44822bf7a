"""dl.agents.react: the agent loop as workflow code, with the simulated model.

Every test counts what the world saw (the model's ledger, the services' effects), not only
what the run says, so a repeated model call or a doubled payment cannot hide.
"""

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import durablelab as dl
from durablelab import agents
from durablelab.agents.shop import TASK, Shop, durable_agent
from durablelab.faults import Crash, ServerError
from durablelab.sim import Payments, SimLLM

PLANS = Path(__file__).resolve().parent.parent / "datasets" / "faults"
FINAL = "Order A-1001 is paid"


def start(engine, shop, **options):
    """Start the shop's agent as a run of `engine`, in the world `shop`."""
    engine.world = shop
    return engine.start(durable_agent, TASK, **options)


def model_positions(run):
    return run.history[run.history.name == "model"].position.tolist()


# --- tools and their schema ------------------------------------------------------------

def test_tool_schema_comes_from_the_signature_without_key_or_feedback():
    def refund(order_id: str, amount: float = 0.0, feedback: str | None = None,
               idempotency_key: str | None = None) -> dict:
        """Refund an order.

        More text the model does not need."""
    schema = agents.tool_schema(refund)
    assert schema["name"] == "refund" and schema["description"] == "Refund an order."
    assert set(schema["parameters"]["properties"]) == {"order_id", "amount"}
    assert schema["parameters"]["required"] == ["order_id"]
    assert schema["parameters"]["additionalProperties"] is False


def test_tool_without_docstring_or_hint_is_refused_with_the_fix():
    def nodoc(x: int):
        pass

    def nohint(x):
        """Does x."""
    with pytest.raises(dl.DurableLabError, match="has no docstring"):
        agents.tool_schema(nodoc)
    with pytest.raises(TypeError, match="parameter 'x' has no type hint"):
        agents.tool_schema(nohint)


def test_check_call_names_the_misspelled_field():
    def lookup_order(order_id: str) -> dict:
        """Look an order up."""
    with pytest.raises(dl.ModelOutputError, match="orderid: Extra inputs are not permitted"):
        agents.check_call(lookup_order, {"orderid": "A-1"})
    with pytest.raises(dl.ModelOutputError, match="not valid JSON"):
        agents.check_call(lookup_order, '{"order_id": "A-')
    assert agents.check_call(lookup_order, '{"order_id": "A-1"}') == {"order_id": "A-1"}


def test_react_refuses_bad_configuration_with_the_fix():
    shop = Shop()
    def wf(ctx, kwargs):
        return agents.react(ctx, TASK, model=shop.model, tools=shop.tools, **kwargs)
    for kwargs, words in [({"approval": ["pay"]}, "no tool named 'pay'"),
                          ({"max_turns": 0}, "max_turns=0"),
                          ({"budget": {"cost": 1}}, "give a dl.Budget"),
                          ({"policies": {"refund": dl.RetryPolicy()}}, "neither 'model' nor")]:
        with pytest.raises((ValueError, TypeError), match=words):
            wf(None, kwargs)


# --- the three kinds of failure --------------------------------------------------------

def test_misspelled_argument_is_repaired_inside_the_model_call_without_a_turn():
    shop = Shop()
    with dl.Engine() as engine:
        run_id = start(engine, shop)
        engine.run_until_idle()
        run = engine.run(run_id)
    assert run.status == "completed", run.error
    assert run.result["stop_reason"] == "answered" and run.result["answer"].startswith(FINAL)
    assert run.result["turns"] == 4                       # lookup, charge, email, answer
    first = run.attempts[run.attempts.position == 1]
    assert first.outcome.tolist() == ["malformed", "ok"]
    assert "orderid: Extra inputs are not permitted" in first.error.iloc[0]
    assert [c["feedback"] is not None for c in shop.llm.calls] == [False, True, False,
                                                                   False, False]
    # the broken answer's tokens are paid and reported with the answer that was kept
    assert run.result["usage"]["tokens"] == (shop.llm.usage["input_tokens"]
                                             + shop.llm.usage["output_tokens"])
    assert run.history.value.iloc[0]["usage"]["discarded"]["input_tokens"] > 0
    assert len(shop.payments.effects) == 1 and len(shop.email.effects) == 1


def test_support_agent_fixes_its_orderid_after_the_validation_error():
    llm = SimLLM(clock=dl.VirtualClock(), scenario="support_agent")
    seen = []

    def lookup_order(order_id: str) -> dict:
        """Look an order up."""
        seen.append(order_id)
        return {"order_id": order_id, "amount": 42.5}

    def refund(order_id: str, amount: float) -> dict:
        """Refund an order."""
        return {"refunded": amount}

    def wf(ctx, task):
        return agents.react(ctx, task, model=llm, tools=[lookup_order, refund])
    with dl.Engine() as engine:
        run_id = engine.start(wf, "My kettle arrived damaged, refund A-1001 please")
        engine.run_until_idle()
        run = engine.run(run_id)
    assert run.result["stop_reason"] == "answered" and run.result["turns"] == 3
    assert seen == ["A-1001"]                 # the misspelled call never reached the tool
    assert run.attempts.outcome.tolist().count("malformed") == 1


def test_non_retryable_tool_error_goes_back_to_the_model_and_costs_a_turn():
    shop = Shop()
    lookups = []
    original = shop.tools[0]

    def lookup_order(order_id: str) -> dict:
        """Look up an order by its id: customer, amount (EUR) and email address."""
        lookups.append(order_id)
        if len(lookups) == 1:
            raise dl.NonRetryable("the order database says: not found, try again later")
        return original(order_id)
    shop.tools[0] = lookup_order
    with dl.Engine() as engine:
        run_id = start(engine, shop)
        engine.run_until_idle()
        run = engine.run(run_id)
    assert run.result["stop_reason"] == "answered"
    assert run.result["turns"] == 5                       # one more than without the error
    assert lookups == ["A-1001", "A-1001"]               # not retried by the engine
    looked = run.history[run.history.name == "lookup_order"]
    assert looked.ok.tolist() == [False, True]
    seen = [m for m in run.history[run.history.name == "model"].iloc[1:2].value]
    assert seen and seen[0]["tool_calls"][0]["name"] == "lookup_order"


def test_transient_tool_error_is_retried_by_the_engine_and_costs_no_turn():
    shop = Shop()
    plan = dl.FaultPlan([ServerError("charge_card", attempts=[1, 2])])
    with dl.Engine() as engine:
        run_id = start(engine, shop, faults=plan)
        engine.run_until_idle()
        run = engine.run(run_id)
    assert run.result["stop_reason"] == "answered" and run.result["turns"] == 4
    charge = run.attempts[run.attempts.activity == "charge_card"]
    assert charge.outcome.tolist() == ["transient", "transient", "ok"]
    assert shop.llm.usage["calls"] == 5                   # 4 turns + 1 repair, no more


def test_tool_result_that_is_not_json_fails_the_run_after_one_effect():
    payments = Payments()

    def charge_card(customer: str, amount: float, idempotency_key: str | None = None):
        """Charge a card."""
        payments.charge(customer, amount, idempotency_key=idempotency_key)
        return object()
    shop = Shop()
    shop.tools[1] = charge_card
    with dl.Engine() as engine:
        run_id = start(engine, shop)
        engine.run_until_idle()
        run = engine.run(run_id)
    assert run.status == "failed"
    assert isinstance(run.error, dl.ActivityFailed)
    assert run.error.cause_class == "SerializationError" and run.error.activity == "charge_card"
    assert len(payments.effects) == 1                     # not retried, not fed back


# --- stopping: turns, budgets, the circuit breaker, the fallback -----------------------

@pytest.mark.parametrize("limits, reason, turns", [
    ({"max_turns": 2}, "max_turns", 2),
    ({"budget": dl.Budget(model_calls=3)}, "budget:model_calls", 3),
    ({"budget": dl.Budget(turns=1)}, "budget:turns", 1),
    ({"budget": dl.Budget(tokens=400)}, "budget:tokens", 2),
    ({"budget": dl.Budget(cost=1e-9)}, "budget:cost", 1),
])
def test_limits_stop_the_loop_with_their_reason(limits, reason, turns):
    shop = Shop()

    def wf(ctx, task):
        return agents.react(ctx, task, model=shop.model, tools=shop.tools, **limits)
    with dl.Engine() as engine:
        run_id = engine.start(wf, TASK)
        engine.run_until_idle()
        run = engine.run(run_id)
    assert run.status == "completed", run.error           # a limit ends the run normally
    assert run.result["stop_reason"] == reason and run.result["answer"] is None
    assert run.result["turns"] == turns
    assert len(model_positions(run)) == turns             # no model call after the stop
    # the last turn's tools ran
    assert run.history.name.iloc[-1] != "model"


def test_open_circuit_stops_the_loop():
    asked = []

    def down(messages: list, tools: list) -> dict:
        asked.append(1)
        raise dl.Transient("503 Service Unavailable")
    policy = dl.RetryPolicy(max_attempts=4, jitter="none",
                            breaker=dl.CircuitBreaker(failures=2, reset_after=600))
    shop = Shop()

    def wf(ctx, task):
        return agents.react(ctx, task, model=down, tools=shop.tools,
                            policies={"model": policy})
    with dl.Engine() as engine:
        run_id = engine.start(wf, TASK)
        engine.run_until_idle()
        run = engine.run(run_id)
    assert run.status == "completed"
    assert run.result["stop_reason"] == "circuit_open" and run.result["turns"] == 0
    assert len(asked) == 2                                # the breaker spared the rest
    assert run.attempts.outcome.tolist()[-2:] == ["circuit_open", "circuit_open"]


def test_fallback_model_takes_over_when_the_first_fails_for_good():
    shop = Shop()

    def broken(messages: list, tools: list) -> dict:
        raise dl.NonRetryable("401 Unauthorized: bad key")

    def wf(ctx, task):
        return agents.react(ctx, task, model=[broken, shop.model], tools=shop.tools)
    with dl.Engine() as engine:
        run_id = engine.start(wf, TASK)
        engine.run_until_idle()
        run = engine.run(run_id)
    assert run.result["stop_reason"] == "answered" and run.result["turns"] == 4
    models = run.history[run.history.name == "model"]
    assert models.ok.tolist() == [False, True, True, True, True]   # asked once, then never


def test_model_failing_for_good_without_fallback_fails_the_run():
    def broken(messages: list, tools: list) -> dict:
        raise dl.NonRetryable("401 Unauthorized: bad key")

    def wf(ctx, task):
        return agents.react(ctx, task, model=broken, tools=Shop().tools)
    with dl.Engine() as engine:
        run_id = engine.start(wf, TASK)
        engine.run_until_idle()
        run = engine.run(run_id)
    assert run.status == "failed" and run.error.activity == "model"
    assert "401 Unauthorized" in run.error.cause_message


# --- approval gates --------------------------------------------------------------------

def gated_agent(ctx, approval):
    shop = ctx.world
    return agents.react(ctx, TASK, model=shop.model, tools=shop.tools, approval=approval)


def approval_run(engine, shop, approval=("charge_card",)):
    engine.world = shop
    return engine.start(gated_agent, approval if isinstance(approval, dict) else list(approval))


def test_approval_gate_waits_then_runs_once_on_a_double_click(tmp_path):
    shop = Shop()
    path = tmp_path / "runs.duckdb"
    engine = dl.Engine(path)
    run_id = approval_run(engine, shop)
    engine.advance(3600)                                  # an hour: nobody has clicked yet
    assert engine.run(run_id).status == "waiting" and shop.payments.effects == []
    asked = shop.llm.usage["calls"]
    engine.close()                                        # the worker goes away mid-wait
    engine = dl.Engine(path, world=shop)
    engine.advance(3600)
    assert shop.llm.usage["calls"] == asked               # recovery asked the model nothing
    assert engine.signal(run_id, "approve:charge_card", {"approved": True}, signal_id="click")
    assert not engine.signal(run_id, "approve:charge_card", {"approved": True},
                             signal_id="click")
    engine.run_until_idle()
    run = engine.run(run_id)
    engine.close()
    assert run.result["stop_reason"] == "answered"
    assert len(shop.payments.effects) == 1
    assert (run.history.name == "approve:charge_card").sum() == 2   # the wait and one signal


def test_approval_gate_survives_a_crash_during_the_wait():
    shop = Shop()
    with dl.Engine() as engine:
        run_id = approval_run(engine, shop, approval={"charge_card": 3600})
        engine.advance(60)
        asked = shop.llm.usage["calls"]
        engine.crash()
        engine.advance(60)
        assert engine.run(run_id).status == "waiting"
        engine.signal(run_id, "approve:charge_card", {"approved": True})
        engine.run_until_idle()
        run = engine.run(run_id)
    assert run.result["stop_reason"] == "answered" and len(shop.payments.effects) == 1
    assert shop.llm.usage["calls"] == asked + 2           # only the turns after the charge


@pytest.mark.parametrize("decision", ["refused", "deadline"])
def test_refusal_or_deadline_is_a_not_approved_observation(decision):
    shop = Shop()
    with dl.Engine() as engine:
        run_id = approval_run(engine, shop)
        engine.advance(60)
        if decision == "refused":
            engine.signal(run_id, "approve:charge_card", {"approved": False})
        engine.run_until_idle()                           # a deadline: one virtual day
        run = engine.run(run_id)
        if decision == "deadline":
            assert engine.clock.now() >= agents.APPROVAL_DEADLINE
    assert run.result["stop_reason"] == "answered"
    assert "charge_card was not approved" in run.result["answer"]
    assert shop.payments.effects == [] and shop.email.effects == []
    assert "charge_card" not in run.history.name.tolist()   # the tool never ran


# --- faults: the dataset plans and crash points ----------------------------------------

@pytest.mark.parametrize("path", sorted(PLANS.glob("*.json")), ids=lambda p: p.stem)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_agent_finishes_its_task_under_each_dataset_plan(path, seed):
    shop = Shop(seed)
    with dl.Engine() as engine:
        run_id = start(engine, shop, faults=path, seed=seed)
        engine.run_until_idle()
        run = engine.run(run_id)
        row = dl.compare([run]).loc[run_id]
    assert run.status == "completed", run.error
    assert run.result["stop_reason"] == "answered" and run.result["answer"].startswith(FINAL)
    assert len(shop.payments.effects) == 1 and len(shop.email.effects) == 1
    assert shop.payments.duplicate_effects == 0 and shop.email.duplicate_effects == 0
    assert run.result["turns"] == run.result["usage"]["model_calls"] <= row["model_calls"]
    # compare counts what the model billed, the broken answers thrown away included; only
    # answers lost with their attempt (a time-out, a crash after the call) report nothing
    model = run.attempts[run.attempts.activity == "model"]
    lost = int((model.outcome.eq("timeout") | model.error.eq("worker crashed at after_effect")
                ).sum())
    billed = shop.llm.usage
    assert row["model_calls"] == billed["calls"] - lost
    if not lost:
        assert row["tokens"] == billed["input_tokens"] + billed["output_tokens"]
        assert row["cost"] == pytest.approx(billed["cost"])
    assert row["duplicates_prevented"] <= row["effect_reexecutions"]


def test_compare_counts_duplicates_a_key_prevented():
    shop = Shop(honor_keys=True)
    plan = dl.FaultPlan([Crash("charge_card", point="after_effect"),
                         Crash("send_receipt", point="after_effect")])
    with dl.Engine() as engine:
        run_id = start(engine, shop, faults=plan)
        engine.run_until_idle()
        row = dl.compare([engine.run(run_id)]).loc[run_id]
    assert len(shop.payments.calls) == 2 and len(shop.payments.effects) == 1
    assert row["effect_reexecutions"] == 2 == row["duplicates_prevented"]
    # four turns, and the scenario's first answer that named a tool wrongly (billed too)
    assert row["model_calls"] == 5 == shop.llm.usage["calls"] and row["cost"] > 0


CRASH_RULES = st.lists(st.tuples(
    st.sampled_from(["model", "lookup_order", "charge_card", "send_receipt"]),
    st.sampled_from(list(dl.faults.CRASH_POINTS[:3])),
    st.integers(1, 3)), min_size=1, max_size=4)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules=CRASH_RULES, durability=st.sampled_from(["sync", "batch"]),
       seed=st.integers(0, 50))
def test_crashes_never_double_an_effect_nor_repeat_a_recorded_model_call(rules, durability,
                                                                         seed):
    shop = Shop(seed)
    plan = dl.FaultPlan([Crash(a, point=p, times=n) for a, p, n in rules])
    with dl.Engine(durability=durability) as engine:
        run_id = start(engine, shop, faults=plan, seed=seed)
        engine.run_until_idle()
        run = engine.run(run_id)
    assert run.status == "completed", run.error
    assert run.result["answer"].startswith(FINAL)
    assert len(shop.payments.effects) == 1 and len(shop.email.effects) == 1
    if durability == "batch":
        return     # a crash loses the wake-up's uncommitted records: calls repeat, keyed
    # each model position was asked once per attempt that reached an outcome (the answer
    # kept, and each broken answer repaired), plus once per crash that lost its answer:
    # a recorded answer is never asked for again
    lost = run.crashes[run.crashes.point == "after_effect"].position.tolist()
    for position in model_positions(run):
        asked = [c for c in shop.llm.calls if c["key"] == f"{run_id}:{position}"]
        attempts = run.attempts[(run.attempts.position == position)
                                & (run.attempts.outcome != "crashed")]
        assert len(asked) == len(attempts) + lost.count(position), (position, rules)
