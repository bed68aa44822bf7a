"""Lesson 11 (the durable agent): solutions."""

import json

import durablelab as dl
from durablelab import agents
from durablelab.agents.shop import TASK, Shop


def careful_agent(ctx: dl.Context, task: str) -> dict:
    shop = ctx.world
    return agents.react(ctx, task, model=shop.model, tools=shop.tools,
                        approval=["charge_card"])


def refused() -> dl.Run:
    """11.1: the approval refused: the model hears "not approved" and answers; no charge."""
    with dl.Engine(world=Shop()) as engine:
        careful = engine.start(careful_agent, TASK, run_id="careful")
        engine.advance(3600)
        engine.signal(careful, "approve:charge_card", {"approved": False})
        engine.run_until_idle()
        return engine.run(careful)


#: 11.2: an approval waits a day by default, in virtual time.
WAITED = 86400

#: 11.3: a lost answer makes the naive loop (or its model) ask again, without a key: both
#: effects that change the world are doubled; looking an order up changes nothing.
DOUBLED = ["charge_card", "send_receipt"]


def model_in_activity(ctx: dl.Context, task: str):
    """11.4: the model call is an activity: recorded once, replayed after the crash."""
    shop = ctx.world
    specs = [agents.tool_schema(fn) for fn in shop.tools]
    tools = {fn.__name__: fn for fn in shop.tools}
    messages = [{"role": "user", "content": task}]
    for _ in range(10):
        reply = ctx.activity("model", shop.model, messages, specs)
        messages.append({"role": "assistant", "content": reply["content"],
                         "tool_calls": reply["tool_calls"]})
        if not reply["tool_calls"]:
            return reply["content"]
        for call in reply["tool_calls"]:
            try:
                result = ctx.activity(call["name"], tools[call["name"]], **call["arguments"])
            except dl.ActivityFailed as exc:
                result = {"error": exc.cause_message}
            messages.append({"role": "tool", "tool_call_id": call["id"],
                             "name": call["name"], "content": json.dumps(result)})


#: What `dl.exercises.check` takes for each exercise (tests/test_exercises.py checks them all).
ANSWERS = {"11.1": refused, "11.2": lambda: WAITED, "11.3": lambda: DOUBLED,
           "11.4": lambda: model_in_activity}
