"""One order agent written four ways: durablelab's `react`, Pydantic AI, and LangGraph as a
graph and as a functional workflow.

Lesson 17 puts an agent you already have under durablelab's fault plans. The agent is the
seed's: look the order up, then charge the card and email the receipt (both asked for in
one model answer, as a model that makes parallel tool calls does), then answer. The four
versions share everything but the framework: the same scripted model (a `dl.sim.SimLLM`
playing `SCENARIO`), the same tools and the same `World`, so that whatever differs between
their runs under one fault plan is the framework's doing.

- `react_agent`: a workflow calling `dl.agents.react`: each model call and each tool call
  is an activity.
- `pydantic_agent`: a Pydantic AI `Agent` (its model a `FunctionModel` that asks the same
  SimLLM) run through `durablelab.agents.pydantic_ai`: the same activities.
- `build_graph`: a LangGraph `StateGraph`, an ``agent`` node that asks the model and a
  ``tools`` node that runs every tool call of its answer, with the calls wrapped by
  `durablelab.backends.langgraph.faults` so a plan's rules reach them by name. LangGraph's
  unit of durability is the node: a crash inside ``tools`` runs the whole node again.
- `build_functional`: the same on LangGraph's functional API, an ``@entrypoint`` calling one
  ``@task`` per model request and tool call: a crash runs only the unfinished task again.

Pydantic AI and LangGraph are imported when first needed (extras ``pydantic-ai`` and
``langgraph``), so this module, and `World`, load without them.
"""

import json
import operator
from typing import Annotated, TypedDict

from ..clock import VirtualClock
from ..errors import NonRetryable
from ..sim import Email, Payments, SimLLM

TASK = "Please charge order A-1001 to my card and email me the receipt."
ORDERS = {"A-1001": {"order_id": "A-1001", "customer": "c-7", "amount": 42.5,
                     "email": "ada@example.com"}}

#: The scripted model: a lookup, then the charge and the receipt in one answer, then done.
SCENARIO = {
    "version": 1,
    "description": "Lesson 17's order agent: two tool calls in one answer.",
    "agents": [{"match": "order", "steps": [
        {"call": {"name": "lookup_order", "arguments": {"order_id": "A-1001"}}},
        {"calls": [{"name": "charge_card", "arguments": {"customer": "c-7", "amount": 42.5}},
                   {"name": "send_receipt", "arguments": {
                       "to": "ada@example.com", "subject": "Your receipt for order A-1001"}}]},
        {"final": "Order A-1001 is paid: 42.50 EUR charged and the receipt sent."}]}],
}


class World:
    """Everything outside the agent's process: the model and the two services, with their
    ledgers. A fresh one per run (``World(clock)`` is the factory sweeps and
    `explore_crashes` call); a crash of the worker does not reset it.

    Args:
        clock: the clock the model's ledger stamps (the engine's; a `VirtualClock` if None).
        charge_keys, receipt_keys: whether the payment and the email service honour
            idempotency keys (False: a repeated call is a second effect).
        card_invalid: the payment API answers every charge with HTTP 400, raised as the
            client's own class (`BadRequest`); ``rejected`` counts the requests it refused.
    """

    def __init__(self, clock=None, *, charge_keys: bool = True, receipt_keys: bool = True,
                 card_invalid: bool = False):
        self.llm = SimLLM("sim-small", clock=clock or VirtualClock(), scenario=SCENARIO)
        self.payments = Payments(honor_keys=charge_keys)
        self.email = Email(honor_keys=receipt_keys)
        self.card_invalid, self.rejected = card_invalid, 0

    # The tools' work, whatever framework calls it.
    def lookup_order(self, order_id: str) -> dict:
        if order_id not in ORDERS:
            raise NonRetryable(f"there is no order {order_id!r}")
        return dict(ORDERS[order_id])

    def charge_card(self, customer: str, amount: float, key: str | None) -> dict:
        if self.card_invalid:
            self.rejected += 1
            raise BadRequest("400: the card number is invalid")
        return self.payments.charge(customer, amount, idempotency_key=key)

    def send_receipt(self, to: str, subject: str, key: str | None) -> dict:
        return self.email.send(to, subject, idempotency_key=key)

    def __repr__(self) -> str:
        return (f"World(model calls paid {self.llm.usage['calls']}, charges "
                f"{len(self.payments.effects)}, receipts {len(self.email.effects)})")


def keyless_charges(clock=None) -> World:
    """A world whose payment service ignores idempotency keys (its email honours them)."""
    return World(clock, charge_keys=False)


def keyless_receipts(clock=None) -> World:
    """A world whose email service ignores idempotency keys (its payments honour them)."""
    return World(clock, receipt_keys=False)


def keyless(clock=None) -> World:
    """A world where neither service honours idempotency keys: every repeat shows."""
    return World(clock, charge_keys=False, receipt_keys=False)


def invalid_card(clock=None) -> World:
    """A world whose payment API refuses every charge with a 400 (`BadRequest`)."""
    return World(clock, card_invalid=True)


def one_charge_one_receipt(run, world) -> None:
    """The lesson's invariant: the run answered, the card was charged once and one receipt
    was sent, whatever crashed on the way."""
    assert run.status == "completed", f"run {run.status}"
    charges, receipts = len(world.payments.effects), len(world.email.effects)
    assert charges == 1, f"{charges} charges"
    assert receipts == 1, f"{receipts} receipts"


# --- (a) durablelab's own loop ----------------------------------------------------------------

def react_tools(world: World) -> list:
    """The three tools for `dl.agents.react`: typed, documented, taking the engine's key."""

    def lookup_order(order_id: str) -> dict:
        """Look up an order by its id: customer, amount (EUR) and email address."""
        return world.lookup_order(order_id)

    def charge_card(customer: str, amount: float, idempotency_key: str | None = None) -> dict:
        """Charge `amount` EUR to the customer's card on file."""
        return world.charge_card(customer, amount, idempotency_key)

    def send_receipt(to: str, subject: str, idempotency_key: str | None = None) -> dict:
        """Email the receipt for an order to the customer."""
        return world.send_receipt(to, subject, idempotency_key)

    return [lookup_order, charge_card, send_receipt]


def react_agent(ctx, task: str) -> dict:
    """The order agent on durablelab's `react` loop, acting on the run's world."""
    from ..agents import react
    return react(ctx, task, model=ctx.world.llm, tools=react_tools(ctx.world))


# --- (b) Pydantic AI --------------------------------------------------------------------------

def scripted_model(world: World):
    """A Pydantic AI `FunctionModel` that asks `world.llm`: Pydantic AI's messages turned
    into chat messages, the SimLLM's answer turned back into a `ModelResponse`."""
    from pydantic_ai.messages import (ModelResponse, TextPart, ToolCallPart, ToolReturnPart,
                                      UserPromptPart)
    from pydantic_ai.models.function import FunctionModel

    def answer(messages, info):
        chat = []
        for message in messages:
            for part in message.parts:
                if isinstance(part, UserPromptPart):
                    chat.append({"role": "user", "content": part.content})
                elif isinstance(part, ToolReturnPart):
                    chat.append({"role": "tool", "tool_call_id": part.tool_call_id,
                                 "name": part.tool_name,
                                 "content": json.dumps(part.model_response_object())})
        tools = [{"name": t.name, "description": t.description,
                  "parameters": t.parameters_json_schema} for t in info.function_tools]
        reply = world.llm(chat, tools)
        if reply["tool_calls"]:
            return ModelResponse(parts=[ToolCallPart(c["name"], c["arguments"], c["id"])
                                        for c in reply["tool_calls"]])
        return ModelResponse(parts=[TextPart(reply["content"])])

    return FunctionModel(answer, model_name="sim-small")


def order_agent(world: World):
    """The Pydantic AI agent, with the `Durability` capability: its model a `FunctionModel`
    asking `world.llm` (Pydantic AI wants the model when the agent is built), its three
    tools acting on ``RunContext[World]``, the run's world passed as ``deps``."""
    import durablelab as dl
    from pydantic_ai import Agent, RunContext

    from ..agents.pydantic_ai import Durability

    agent = Agent(scripted_model(world), name="orders", deps_type=World,
                  capabilities=[Durability()])

    @agent.tool_plain
    def lookup_order(order_id: str) -> dict:
        """Look up an order by its id: customer, amount (EUR) and email address."""
        return dict(ORDERS[order_id])

    @agent.tool
    def charge_card(rc: RunContext[World], customer: str, amount: float) -> dict:
        """Charge `amount` EUR to the customer's card on file."""
        # a Pydantic AI tool's signature is its schema: the key comes from the activity
        return rc.deps.charge_card(customer, amount, dl.idempotency_key())

    @agent.tool
    def send_receipt(rc: RunContext[World], to: str, subject: str) -> dict:
        """Email the receipt for an order to the customer."""
        return rc.deps.send_receipt(to, subject, dl.idempotency_key())

    return agent


def pydantic_agent(ctx, task: str) -> dict:
    """The order agent on Pydantic AI, through `durablelab.agents.pydantic_ai.run`."""
    from ..agents import pydantic_ai as pai
    return pai.run(ctx, order_agent(ctx.world), task, deps=ctx.world)


# --- (c) LangGraph ----------------------------------------------------------------------------

class State(TypedDict):
    """The graph's state: the chat so far (each node's messages are appended)."""
    messages: Annotated[list, operator.add]


def build_graph(checkpointer, world: World, plan=None, seed: int = 0, retry=None):
    """The order agent as a LangGraph graph over `checkpointer`, acting on `world`.

    An ``agent`` node asks the model; a ``tools`` node runs every tool call of the answer,
    one after another; the graph loops until the model answers without tools. The model
    and each tool are calls wrapped by an injector applying `plan` (a `dl.FaultPlan`, seeded
    by `seed`). A tool's idempotency key is the thread id and the model's tool-call id,
    which LangGraph saved with the agent node's answer, so a re-run node sends the same one.

    `retry` is each node's LangGraph ``RetryPolicy``. None is ``add_node``'s own default:
    no policy, so LangGraph retries nothing and the first error fails the run. The state
    holds the chat messages as plain dicts, so the checkpoint stays JSON.
    """
    from langgraph.config import get_config
    from langgraph.graph import END, START, StateGraph

    from ..agents.tools import tool_schema
    from ..backends import langgraph as lgb

    inject = lgb.faults(plan, seed=seed)
    tools = {fn.__name__: fn for fn in react_tools(world)}
    schemas = [tool_schema(fn) for fn in tools.values()]

    def agent(state):
        reply = inject.call("model", world.llm, state["messages"], schemas)
        return {"messages": [{"role": "assistant", "content": reply["content"],
                              "tool_calls": reply["tool_calls"], "usage": reply["usage"]}]}

    def act(state):
        thread = get_config()["configurable"]["thread_id"]
        results = []
        for call in state["messages"][-1]["tool_calls"]:
            keyed = {} if call["name"] == "lookup_order" else {
                "idempotency_key": f"{thread}:{call['id']}"}
            value = inject.call(call["name"], tools[call["name"]], **call["arguments"],
                                **keyed)
            results.append({"role": "tool", "tool_call_id": call["id"],
                            "name": call["name"], "content": json.dumps(value)})
        return {"messages": results}

    def route(state):
        return "tools" if state["messages"][-1]["tool_calls"] else END

    graph = StateGraph(State)
    graph.add_node("agent", agent, retry_policy=retry)
    graph.add_node("tools", act, retry_policy=retry)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["tools", END])
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


def build_functional(checkpointer, world: World, plan=None, seed: int = 0, retry=None):
    """The order agent as a LangGraph functional workflow: an ``@entrypoint`` looping over
    the chat, the model and each tool call an ``@task``.

    LangGraph saves each task's result as the task ends, so after a crash the recovered
    entrypoint runs again from its first line, gets every finished task's result back from
    the checkpoint, and runs only the unfinished task: the unit of durability is the task,
    as durablelab's is the activity. The calls run one after another (a task's
    ``.result()`` before the next starts), as the graph's ``tools`` node runs them.
    `plan`, `seed`, `retry` and the keys are as in `build_graph`.
    """
    from langgraph.config import get_config
    from langgraph.func import entrypoint, task

    from ..agents.tools import tool_schema
    from ..backends import langgraph as lgb

    inject = lgb.faults(plan, seed=seed)
    tools = {fn.__name__: fn for fn in react_tools(world)}
    schemas = [tool_schema(fn) for fn in tools.values()]

    def model(messages):
        reply = world.llm(messages, schemas)
        return {"role": "assistant", "content": reply["content"],
                "tool_calls": reply["tool_calls"], "usage": reply["usage"]}

    ask = task(inject.wrap(model, "model"), retry_policy=retry)
    run_tool = {name: task(inject.wrap(fn, name), retry_policy=retry)
                for name, fn in tools.items()}

    @entrypoint(checkpointer=checkpointer)
    def order_agent(request: dict) -> dict:
        thread = get_config()["configurable"]["thread_id"]
        messages = list(request["messages"])
        while True:
            reply = ask(messages).result()
            messages.append(reply)
            if not reply["tool_calls"]:
                return {"messages": messages}
            for call in reply["tool_calls"]:
                keyed = {} if call["name"] == "lookup_order" else {
                    "idempotency_key": f"{thread}:{call['id']}"}
                value = run_tool[call["name"]](**call["arguments"], **keyed).result()
                messages.append({"role": "tool", "tool_call_id": call["id"],
                                 "name": call["name"], "content": json.dumps(value)})

    return order_agent


def graph_input(task: str = TASK) -> dict:
    """The graph's input for `task`: the first chat message."""
    return {"messages": [{"role": "user", "content": task}]}


# --- LangGraph's retry decision ---------------------------------------------------------------

class BadRequest(Exception):
    """An HTTP 400 raised as a client library's own exception class, as many SDKs do."""

    status_code = 400


def http_error(status: int):
    """The error httpx raises for an HTTP `status` (``raise_for_status``), with a
    ``Retry-After: 2`` header."""
    import httpx
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = httpx.Response(status, request=request, headers={"Retry-After": "2"})
    return httpx.HTTPStatusError(f"{status} from the model's API", request=request,
                                 response=response)


def node_calls(error: Exception, retry_on=None, max_attempts: int | None = 3) -> int:
    """How often LangGraph calls a node that raises `error` every time, under a
    ``RetryPolicy(max_attempts=3)`` with `retry_on` (None: ``RetryPolicy()``'s default
    ``retry_on``), before the graph gives up. ``max_attempts=None``: the node gets no
    ``retry_policy`` at all, as ``add_node`` does unless told. Backoff 0 s, so the count
    takes no time."""
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import RetryPolicy

    calls = []

    def ask_model(state):
        calls.append(1)
        raise error

    options = {} if retry_on is None else {"retry_on": retry_on}
    policy = None if max_attempts is None else RetryPolicy(
        max_attempts=max_attempts, initial_interval=0.0, jitter=False, **options)
    graph = StateGraph(State)
    graph.add_node("ask_model", ask_model, retry_policy=policy)
    graph.add_edge(START, "ask_model")
    graph.add_edge("ask_model", END)
    try:
        graph.compile().invoke(graph_input())
    except type(error):
        pass
    return len(calls)


__all__ = ["TASK", "ORDERS", "SCENARIO", "World", "keyless_charges", "keyless_receipts",
           "keyless", "invalid_card", "one_charge_one_receipt", "react_tools", "react_agent", "order_agent", "State", "scripted_model",
           "pydantic_agent", "build_graph", "build_functional", "graph_input", "BadRequest", "http_error",
           "node_calls"]
