"""Lesson 11's exercises refuse the wrong answers learners most often give."""

import json

import pytest
from exercise_cases import refuses

import durablelab as dl
from durablelab import agents
from durablelab.agents.shop import TASK, Shop


def careful_agent(ctx, task):
    shop = ctx.world
    return agents.react(ctx, task, model=shop.model, tools=shop.tools,
                        approval=["charge_card"])


def careful_run(answer=None) -> dl.Run:
    with dl.Engine(world=Shop()) as engine:
        run_id = engine.start(careful_agent, TASK, run_id="careful")
        engine.advance(3600)
        if answer is not None:
            engine.signal(run_id, "approve:charge_card", answer)
        engine.run_until_idle()
        return engine.run(run_id)


def model_in_workflow(ctx, task):
    """The lesson's broken loop, unchanged: the model is called outside any activity."""
    shop = ctx.world
    specs = [agents.tool_schema(fn) for fn in shop.tools]
    tools = {fn.__name__: fn for fn in shop.tools}
    messages = [{"role": "user", "content": task}]
    for _ in range(10):
        reply = shop.model(messages, specs)
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


WRONG = [
    ("11.1", lambda: careful_run({"approved": True}), "was not a refusal", None),
    ("11.1", lambda: careful_run(), "no answer reached the approval wait", None),
    ("11.1", lambda: careful_run({"approved": False}).result, "give the run itself", None),
    ("11.2", lambda: 24, "another unit", "86400"),
    ("11.2", lambda: 0.01, "real time", "86400"),
    ("11.2", lambda: 3 * 86400, "is not how long", "86400"),
    ("11.3", lambda: ["charge_card"], "is missing", "send_receipt"),
    ("11.3", lambda: ["lookup_order", "charge_card", "send_receipt"],
     "lookup_order: its effect is never doubled", None),
    ("11.4", lambda: model_in_workflow, "still diverges", None),
]


@pytest.mark.parametrize("exercise_id, answer, words, secret", WRONG,
                         ids=[f"{w[0]}-{i}" for i, w in enumerate(WRONG)])
def test_checker_refuses_a_common_wrong_answer(exercise_id, answer, words, secret):
    refuses(exercise_id, answer(), words, secret)


def test_11_2_a_wrong_number_says_where_to_read_the_wait():
    verdict = dl.exercises.check("11.2", 5)
    assert not verdict
    assert any("subtract the recorded_at of the 'approve:charge_card' wait_signal event"
               in message for message in verdict.wrong), str(verdict)
    assert "86400" not in str(verdict)
