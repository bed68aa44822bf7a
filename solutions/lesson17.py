"""Lesson 17 (your framework under faults): solutions."""

import json

#: 17.1: with the payments honouring their keys, a repeated charge is answered from the
#: ledger; only a receipt sent again makes a second email. The tools node re-runs whole,
#: but the receipt is its last call: a crash before it means it has not gone out yet, so
#: the graph breaks only in the receipt's own window between its effect and the save.
RECEIPT_WINDOWS = {("send_receipt", "after_effect")}


def one_call_per_step(checkpointer, world):
    """17.2: the lesson's graph, but the tools node makes one tool call per super-step and
    routes back to itself while calls of the answer remain, so LangGraph saves each call's
    result before the next one starts: a crash repeats only the call in flight."""
    from langgraph.config import get_config
    from langgraph.graph import END, START, StateGraph

    from durablelab.agents.tools import tool_schema
    from durablelab.backends import langgraph as lgb
    from durablelab.examples.three_ways import State, react_tools

    inject = lgb.faults()
    tools = {fn.__name__: fn for fn in react_tools(world)}
    schemas = [tool_schema(fn) for fn in tools.values()]

    def pending(messages):
        """The tool calls of the last answer that have no result yet."""
        asked = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
        answered = {m["tool_call_id"] for m in messages[asked + 1:]}
        return [c for c in messages[asked]["tool_calls"] if c["id"] not in answered]

    def agent(state):
        reply = inject.call("model", world.llm, state["messages"], schemas)
        return {"messages": [{"role": "assistant", "content": reply["content"],
                              "tool_calls": reply["tool_calls"]}]}

    def act(state):
        call = pending(state["messages"])[0]
        thread = get_config()["configurable"]["thread_id"]
        keyed = {} if call["name"] == "lookup_order" else {
            "idempotency_key": f"{thread}:{call['id']}"}
        value = inject.call(call["name"], tools[call["name"]], **call["arguments"], **keyed)
        return {"messages": [{"role": "tool", "tool_call_id": call["id"],
                              "name": call["name"], "content": json.dumps(value)}]}

    graph = StateGraph(State)
    graph.add_node("agent", agent)
    graph.add_node("tools", act)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges(
        "agent", lambda s: "tools" if s["messages"][-1]["tool_calls"] else END,
        ["tools", END])
    graph.add_conditional_edges(
        "tools", lambda s: "tools" if pending(s["messages"]) else "agent", ["tools", "agent"])
    return graph.compile(checkpointer=checkpointer)


#: What `dl.exercises.check` takes for each exercise (tests/test_exercises.py checks them all).
ANSWERS = {"17.1": lambda: RECEIPT_WINDOWS, "17.2": lambda: one_call_per_step}
