"""A Pydantic AI agent under durablelab (`durablelab.agents.pydantic_ai`): its model requests
and tool calls are activities, so crashes, fault plans, the crash explorer, sweeps and
replay checks apply to it unchanged.

Two models drive the same order agent: Pydantic AI's `FunctionModel` (a scripted brain in
this process, which counts how often it is asked) and its OpenAI provider against
`dl.agents.FakeChatServer` (a real HTTP client meeting real 429s, 503s, broken arguments
and hangs; the server counts the requests that reached it).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import warnings

import pytest

if os.environ.get("DURABLELAB_REQUIRE_BRIDGES"):   # CI installs the extra: never skip there
    import pydantic_ai  # noqa: F401
else:
    pytest.importorskip("pydantic_ai")

import durablelab as dl                                              # noqa: E402
from durablelab.agents import FakeChatServer                         # noqa: E402
from durablelab.agents import pydantic_ai as pai                     # noqa: E402
from durablelab.agents.shop import ORDERS, TASK                      # noqa: E402
from durablelab.errors import (AgentConfigError, FrameworkError,     # noqa: E402
                               RetryAmplificationWarning)
from durablelab.faults import Crash, Latency, RateLimit              # noqa: E402
from durablelab.sim import Email, Payments                           # noqa: E402
from pydantic_ai import Agent, ModelMessagesTypeAdapter, ModelRetry, RunContext  # noqa: E402
from pydantic_ai.messages import (ModelResponse, TextPart, ToolCallPart,  # noqa: E402
                                  ToolReturnPart)
from pydantic_ai.models.function import AgentInfo, FunctionModel     # noqa: E402

FINAL = "Order A-1001 is paid"
STEPS = [("lookup_order", {"order_id": "A-1001"}),
         ("charge_card", {"customer": "c-7", "amount": 42.5}),
         ("send_receipt", {"to": "ada@example.com", "subject": "Your receipt"})]


class World:
    """The shop the tools act on; `world(clock)` for sweeps and the crash explorer."""

    def __init__(self, clock=None, honor_charge_keys: bool = True,
                 honor_receipt_keys: bool = True):
        self.payments = Payments(honor_keys=honor_charge_keys)
        self.email = Email(honor_keys=honor_receipt_keys)


class Brain:
    """A scripted order agent for `FunctionModel`: one tool call per answer (or all three
    at once), then the final answer; `asked` counts the requests that reached it."""

    def __init__(self, together: bool = False):
        self.asked, self.together = 0, together

    def __call__(self, messages, info: AgentInfo) -> ModelResponse:
        self.asked += 1
        done = sum(isinstance(part, ToolReturnPart) and part.outcome == "success"
                   for m in messages for part in m.parts)
        if self.together and done == 0:
            return ModelResponse(parts=[ToolCallPart(n, a) for n, a in STEPS])
        if done < len(STEPS):
            return ModelResponse(parts=[ToolCallPart(*STEPS[done])])
        return ModelResponse(parts=[TextPart(f"{FINAL}: charged and receipted.")])


def add_tools(agent: Agent) -> Agent:
    """The shop's three tools. A Pydantic AI tool's signature is its schema, so the
    idempotency key comes from `dl.idempotency_key()`."""

    @agent.tool_plain
    def lookup_order(order_id: str) -> dict:
        """Look up an order by its id: customer, amount (EUR) and email address."""
        return dict(ORDERS[order_id])

    @agent.tool
    def charge_card(rc: RunContext[World], customer: str, amount: float) -> dict:
        """Charge `amount` EUR to the customer's card on file."""
        return rc.deps.payments.charge(customer, amount, idempotency_key=dl.idempotency_key())

    @agent.tool
    def send_receipt(rc: RunContext[World], to: str, subject: str) -> dict:
        """Email the receipt for an order to the customer."""
        return rc.deps.email.send(to, subject, idempotency_key=dl.idempotency_key())

    return agent


def shop_agent(brain=None, name="shop", **durability) -> Agent:
    return add_tools(Agent(FunctionModel(brain or Brain()), name=name, deps_type=World,
                           capabilities=[pai.Durability(**durability)]))


def run_once(workflow, world=None, faults=None, engine=None, prompt=TASK, **start):
    engine = engine or dl.Engine(world=world)
    run_id = engine.start(workflow, prompt, faults=faults, **start)
    engine.run_until_idle()
    return engine.run(run_id)


def names(run) -> list[str]:
    return run.history[run.history.kind == "activity"].name.tolist()


# --- FunctionModel: what becomes an activity, and what a crash repeats -------------------------

def test_model_requests_and_tool_calls_are_activities_named_as_react_names_them():
    brain, world = Brain(), World()
    run = run_once(pai.DurableAgent(shop_agent(brain)).workflow, world)
    assert run.status == "completed", run.error
    assert names(run) == ["model", "lookup_order", "model", "charge_card", "model",
                          "send_receipt", "model"]
    assert run.result["output"].startswith(FINAL) and brain.asked == 4
    assert run.result["usage"]["model_calls"] == 4 and run.result["usage"]["tool_calls"] == 3
    # the conversation in Pydantic AI's own JSON form, and tools keyed by their position
    messages = ModelMessagesTypeAdapter.validate_python(run.result["messages"])
    assert len(messages) == 8
    assert world.payments.effects[0]["key"] == f"{run.run_id}:4"
    assert dl.compare([run]).loc[run.run_id, "model_calls"] == 4


def test_a_crash_after_the_charge_does_not_ask_the_model_again():
    brain, world = Brain(), World()
    plan = dl.FaultPlan([Crash("charge_card", point="after_effect")])
    run = run_once(pai.DurableAgent(shop_agent(brain)).workflow, world, faults=plan)
    assert run.status == "completed" and run.result["output"].startswith(FINAL)
    assert brain.asked == 4                                   # as without the crash
    assert (run.attempts.outcome == "crashed").sum() == 1
    keys = [call["key"] for call in world.payments.calls]
    assert len(keys) == 2 and keys[0] == keys[1]              # charged twice, one key...
    assert len(world.payments.effects) == 1                   # ...so charged once


def test_outside_a_workflow_the_capability_changes_nothing():
    def ask(capabilities):
        def brain(messages, info):
            if len(messages) == 1:
                return ModelResponse(parts=[ToolCallPart(*STEPS[0])])
            return ModelResponse(parts=[TextPart(str(messages[-1].parts[0].content))])
        agent = Agent(FunctionModel(brain), name="plain", capabilities=capabilities)

        @agent.tool_plain
        def lookup_order(order_id: str) -> dict:
            """Look up an order."""
            return dict(ORDERS[order_id])
        result = agent.run_sync("look up A-1001")
        return result.output, [[type(p).__name__ for p in m.parts]
                               for m in result.all_messages()]
    assert ask([pai.Durability()]) == ask([])
    assert "c-7" in ask([pai.Durability()])[0]


def test_where_an_event_loop_already_runs_as_in_a_notebook_the_agent_still_runs():
    brain, world = Brain(), World()
    workflow = pai.DurableAgent(shop_agent(brain, name="kernel")).workflow

    async def cell():         # a notebook cell: the kernel's loop runs in this thread
        return run_once(workflow, world, faults=dl.FaultPlan([
            Crash("charge_card", point="after_effect")]))
    run = asyncio.run(cell())
    assert run.status == "completed", run.error
    assert brain.asked == 4 and len(world.payments.effects) == 1


def test_the_crash_explorer_finds_exactly_the_windows_of_tools_that_ignore_their_key():
    workflow = pai.DurableAgent(shop_agent()).workflow

    def one_charge_one_receipt(run, world):
        assert run.status == "completed", run.error
        assert len(world.payments.effects) == 1, f"{len(world.payments.effects)} charges"
        assert len(world.email.effects) == 1, f"{len(world.email.effects)} receipts"

    # the charge ignores its key, the receipt honours its own: of the 21 crash points (7
    # activities, 3 points each) only the charge's window between effect and record breaks
    report = dl.explore_crashes(workflow, TASK, one_charge_one_receipt,
                                world=lambda clock: World(honor_charge_keys=False))
    assert len(report.frame) == 1 + 21 and report.frame.fired.iloc[1:].all()
    broken = report.broken
    assert list(zip(broken.activity, broken.point)) == [("charge_card", "after_effect")]
    assert "2 charges" in broken.detail.iloc[0]


def test_a_sweep_over_policies_and_fault_plans_runs_the_agent():
    workflow = pai.DurableAgent(shop_agent(name="swept")).workflow
    experiment = dl.sweep(workflow, [TASK],
                          policies={"patient": dl.RetryPolicy(max_attempts=5, jitter="none"),
                                    "impatient": dl.presets["no-retries"]},
                          fault_plans={"429 once": dl.FaultPlan([RateLimit("model",
                                                                           attempts=[1],
                                                                           retry_after=3)]),
                                       "calm": dl.FaultPlan([])},
                          seeds=range(2), world=World)
    frame = experiment.frame.set_index(["policy", "fault_plan"])
    assert len(frame) == 8
    assert (frame.loc[("patient", "429 once"), "status"] == "completed").all()
    assert (frame.loc[("impatient", "429 once"), "status"] == "failed").all()
    assert (frame.loc[("patient", "calm"), "model_calls"] == 4).all()


def test_parallel_tool_calls_overlap_and_each_has_its_own_key():
    world = World()
    agent = shop_agent(Brain(together=True), name="parallel", parallel_tools=True)
    plan = dl.FaultPlan([Latency("charge_card", 5.0), Latency("send_receipt", 3.0)])
    run = run_once(pai.DurableAgent(agent).workflow, world, faults=plan)
    assert run.status == "completed", run.error
    started = run.history[run.history.kind == "start_activity"]
    assert started.name.tolist() == ["lookup_order", "charge_card", "send_receipt"]
    attempts = run.attempts.set_index("activity")
    assert attempts.loc["send_receipt", "ended_at"] == 3.0        # side by side, not after
    assert attempts.loc["charge_card", "ended_at"] == 5.0
    keys = {world.payments.effects[0]["key"], world.email.effects[0]["key"]}
    assert keys == {f"{run.run_id}:{p}" for p in started.position.tolist()[1:]}
    assert dl.replay_check(pai.DurableAgent(agent).workflow, [run]).ok


# --- replay: the digest covers content, not timestamps --------------------------------------

def test_a_fresh_worker_replays_the_conversation_without_asking_again(tmp_path):
    path = str(tmp_path / "runs.duckdb")
    brain, world = Brain(), World()
    workflow = pai.DurableAgent(shop_agent(brain, name="replayed")).workflow
    plan = dl.FaultPlan([RateLimit("model", position=[5], attempts=[1], retry_after=60)])
    engine = dl.Engine(path, world=world)
    run_id = engine.start(workflow, TASK, faults=plan)
    engine.advance(30)                    # into the 60 s the 429 asked for
    assert engine.run(run_id).status == "waiting" and brain.asked == 2
    engine.close()
    time.sleep(0.01)           # Pydantic AI stamps the replayed messages with a later time
    engine = dl.Engine(path, world=world, workflows=[workflow])
    engine.run_until_idle()
    run = engine.run(run_id)
    engine.close()
    assert run.status == "completed", run.error
    assert brain.asked == 4 and len(world.payments.effects) == 1
    recorded = run.history[run.history.name == "model"]
    assert "timestamp" not in recorded.args.iloc[1] and "A-1001" in recorded.args.iloc[1]
    assert dl.replay_check(workflow, path).ok


def test_a_changed_prompt_or_tool_schema_is_a_non_determinism_error():
    runs = [run_once(pai.DurableAgent(shop_agent(name="checked")).workflow, World())]
    assert dl.replay_check(pai.DurableAgent(shop_agent(name="checked")).workflow, runs).ok

    terse = add_tools(Agent(FunctionModel(Brain()), name="checked", deps_type=World,
                            instructions="Answer in one line."))
    report = dl.replay_check(pai.DurableAgent(terse).workflow, runs)
    assert not report.ok and report.frame.position.tolist() == [1]
    assert report.frame.cause.iloc[0] == "different_arguments"
    assert "Answer in one line." in report.frame.requested.iloc[0]

    changed = Agent(FunctionModel(Brain()), name="checked", deps_type=World)
    add_tools(changed)

    @changed.tool_plain
    def refund(order_id: str) -> dict:
        """Refund an order."""
        return {}
    report = dl.replay_check(pai.DurableAgent(changed).workflow, runs)
    assert not report.ok and report.frame.position.tolist() == [1]
    assert report.frame.cause.iloc[0] == "different_arguments"


def test_the_model_digest_leaves_out_timestamps_and_generated_ids():
    from pydantic_ai.models import ModelRequestParameters

    def conversation(prompt):
        agent = Agent(FunctionModel(lambda messages, info: ModelResponse(
            parts=[TextPart("hello")])), name="a")
        return agent.run_sync(prompt).all_messages()

    def digested(messages):
        return pai.model_request_args((None, messages, None, ModelRequestParameters(), None))
    first = conversation("hi")
    time.sleep(0.01)
    second = conversation("hi")
    assert first[0].timestamp != second[0].timestamp and first[0].run_id != second[0].run_id
    assert digested(first) == digested(second)
    assert digested(first) != digested(conversation("hi there"))
    # only messages' and parts' own stamps are left out: a tool argument named "id" counts
    asked = [ModelResponse(parts=[ToolCallPart("lookup_order", {"id": order}, "call-1")])
             for order in ("A-1", "A-2")]
    assert digested(first[:1] + asked[:1]) != digested(first[:1] + asked[1:])


# --- bad cases ------------------------------------------------------------------------------

def test_a_tool_that_raises_fails_the_run_and_a_model_retry_goes_back_to_the_model():
    brain = Brain()
    agent = Agent(FunctionModel(brain), name="raising", deps_type=World)
    asked: list[str] = []

    @agent.tool_plain
    def lookup_order(order_id: str) -> dict:
        """Look up an order."""
        asked.append(order_id)
        if len(asked) == 1:
            raise ModelRetry("the order service is warming up; ask again")
        raise KeyError(order_id)                  # a bug in the tool: NonRetryable
    run = run_once(pai.DurableAgent(agent).workflow, World())
    assert run.status == "failed" and isinstance(run.error, dl.ActivityFailed)
    assert run.error.activity == "lookup_order" and "KeyError" in run.error.message
    assert names(run) == ["model", "lookup_order", "model", "lookup_order"]
    assert brain.asked == 2                       # the ModelRetry went back once


def test_a_model_that_answers_garbage_forever_stops_at_the_budget():
    def garbage(messages, info):
        return ModelResponse(parts=[ToolCallPart("lookup_order", {"orderid": "A-1001"})])
    agent = add_tools(Agent(FunctionModel(garbage), name="garbage", deps_type=World,
                            retries=100))
    run = run_once(pai.DurableAgent(agent).workflow, World(), budget=dl.Budget(model_calls=5))
    assert run.status == "failed" and isinstance(run.error, dl.BudgetExceeded)
    # the budget is checked as each answer is recorded: the sixth went over and ended it
    assert names(run) == ["model"] * 6 and "6 spent, 5 allowed" in run.error.message


@pytest.mark.parametrize("make, words", [
    (lambda: pai.Durability(model_timeout=0), "model_timeout=0"),
    (lambda: pai.Durability(tool_policy={"max_attempts": 3}), "tool_policy="),
    (lambda: pai.Durability(parallel_tools="yes"), "parallel_tools='yes'"),
    (lambda: pai.DurableAgent("shop"), "give a pydantic_ai.Agent"),
    (lambda: pai.DurableAgent(Agent(FunctionModel(Brain()))), "has no name"),
    (lambda: pai.DurableAgent(shop_agent(), durability=pai.Durability()),
     "already has a Durability"),
    (lambda: pai.run(None, shop_agent(), TASK), "give the workflow's ctx"),
])
def test_bad_arguments_are_refused_with_the_fix(make, words):
    with pytest.raises(AgentConfigError, match=words) as info:
        make()
    assert isinstance(info.value, (ValueError, TypeError))


@pytest.mark.parametrize("version", ["2.67.9", "3.0.0", "1.0.3"])
def test_a_pydantic_ai_outside_the_supported_range_is_named(version):
    with pytest.raises(FrameworkError, match=f"Pydantic AI {version} is installed") as info:
        pai._check_version(version)
    assert info.value.version == version and "pydantic-ai-slim>=2.68,<3" in str(info.value)
    pai._check_version("2.68.0")


def test_without_the_extra_the_import_says_which_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pydantic_ai", None)     # as if not installed
    monkeypatch.delitem(sys.modules, "durablelab.agents.pydantic_ai")
    with pytest.raises(ImportError, match=r"pip install 'durablelab\[pydantic-ai\]'") as info:
        import durablelab.agents.pydantic_ai   # noqa: F401
    assert isinstance(info.value, FrameworkError) and info.value.extra == "pydantic-ai"


# --- the OpenAI provider against a misbehaving local server ------------------------------------

def openai_agent(server, max_retries=0, timeout=0.3, name="orders") -> Agent:
    from openai import AsyncOpenAI
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    client = AsyncOpenAI(base_url=server.url, api_key="local", max_retries=max_retries,
                         timeout=timeout)
    model = OpenAIChatModel("fake-model", provider=OpenAIProvider(openai_client=client))
    return add_tools(Agent(model, name=name, deps_type=World,
                           capabilities=[pai.Durability()]))


def model_attempts(run):
    return run.attempts[run.attempts.activity == "model"]


def test_the_openai_agent_finishes_and_repairs_the_scenarios_misspelled_call_itself():
    world = World()
    with FakeChatServer() as server:
        run = run_once(pai.DurableAgent(openai_agent(server)).workflow, world)
    assert run.status == "completed", run.error
    assert run.result["output"].startswith(FINAL)
    # the scenario's first call misspells an argument: Pydantic AI checks it against the
    # schema and asks again (one more model activity), and the tool runs once
    assert names(run) == ["model", "model", "lookup_order", "model", "charge_card", "model",
                          "send_receipt", "model"]
    assert server.counts() == {"ok": 5}
    assert len(world.payments.effects) == 1 and len(world.email.effects) == 1
    row = dl.compare([run]).loc[run.run_id]
    assert row["model_calls"] == 5 and row["tokens"] > 0


def test_a_429_with_retry_after_waits_that_long_in_virtual_time():
    with FakeChatServer(script=["429"], retry_after=7) as server:
        started = time.monotonic()
        run = run_once(pai.DurableAgent(openai_agent(server)).workflow, World())
        elapsed = time.monotonic() - started
    first, second = model_attempts(run).iloc[0], model_attempts(run).iloc[1]
    assert first.outcome == "rate_limited" and first.delay >= 7.0
    assert second.started_at - first.ended_at >= 7.0          # virtual seconds...
    assert elapsed < 7.0                                      # ...not real ones
    assert run.status == "completed" and server.counts() == {"429": 1, "ok": 5}


def test_503s_are_retried_by_the_engine_and_broken_arguments_by_pydantic_ai():
    with FakeChatServer(script=["503", "503"]) as server:
        run = run_once(pai.DurableAgent(openai_agent(server)).workflow, World())
    assert model_attempts(run).outcome.tolist()[:3] == ["transient", "transient", "ok"]
    assert run.status == "completed"
    with FakeChatServer(script=["malformed"]) as server:
        world = World()
        run = run_once(pai.DurableAgent(openai_agent(server)).workflow, world)
    # arguments cut short are not JSON: Pydantic AI sends a retry prompt, one more request
    assert run.status == "completed" and server.counts() == {"malformed": 1, "ok": 4}
    assert names(run).count("lookup_order") == 1 and len(world.payments.effects) == 1


def test_a_hang_is_cut_by_the_client_time_out_and_retried():
    with FakeChatServer(script=["hang"], hang=3.0) as server:
        started = time.monotonic()
        run = run_once(pai.DurableAgent(openai_agent(server, timeout=0.2)).workflow, World())
        elapsed = time.monotonic() - started
    assert model_attempts(run).outcome.iloc[0] == "timeout"
    assert run.status == "completed" and elapsed < 2.5          # the client gave up
    # a Hang fault needs no server at all: the model's time-out ends it in virtual time
    with FakeChatServer() as server:
        plan = dl.FaultPlan([dl.faults.Hang("model", attempts=[1])])
        run = run_once(pai.DurableAgent(openai_agent(server)).workflow, World(), faults=plan)
    first = model_attempts(run).iloc[0]
    assert first.outcome == "timeout" and first.ended_at - first.started_at == 60.0


def test_a_crash_after_the_charge_does_not_send_the_model_another_request():
    with FakeChatServer() as server:
        plan = dl.FaultPlan([Crash("charge_card", point="after_effect"),
                             Crash("model", point="after_record", position=[6])])
        world = World()
        run = run_once(pai.DurableAgent(openai_agent(server)).workflow, world, faults=plan)
    assert run.status == "completed" and (run.attempts.outcome == "crashed").sum() == 2
    assert server.counts() == {"ok": 5}                       # as without the crashes
    assert len(world.payments.effects) == 1


def test_a_client_that_retries_on_its_own_is_warned_about_and_hides_the_429():
    with FakeChatServer(script=["429"], retry_after=0.05) as server:
        with pytest.warns(RetryAmplificationWarning, match="max_retries=2"):
            run = run_once(pai.DurableAgent(openai_agent(server, max_retries=2)).workflow,
                           World())
    assert server.counts() == {"429": 1, "ok": 5}             # the server saw the 429...
    assert (run.attempts.outcome == "ok").all()               # ...the engine did not
    with FakeChatServer() as server, warnings.catch_warnings():
        warnings.simplefilter("error", RetryAmplificationWarning)
        run_once(pai.DurableAgent(openai_agent(server, max_retries=0)).workflow, World())
