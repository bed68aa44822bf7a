"""A ReAct agent loop that is workflow code: every model call and tool call is recorded.

An agent is a loop: ask the model what to do, do what it asked (call a tool), show it the
result, ask again, until it answers. Written as plain Python, a crash in the middle loses
the conversation, and a retry of the whole loop pays for every model call again and can
charge a card twice. Written with `react`, the loop is *workflow code*:

- a **turn** is one model call and the tool calls it asks for;
- each model call is an activity named ``"model"`` and each tool call an activity named
  after the tool's ``__name__``, each with its own retry policy and idempotency key, so
  fault plans and crashes target them by those names;
- the conversation lives in history (the messages are the model activity's arguments, the
  answers its recorded results), so after a crash the loop replays up to where it was,
  without asking the model again or calling a tool twice.

Three kinds of failure get three answers. Arguments a model sends that do not parse or do
not fit the tool's schema are a `ModelOutputError` *inside the model activity*: the engine
asks again with the error as ``feedback=``, within the small model-output budget, and no
turn is spent. An error the tool raises as `NonRetryable` (not found, a value it rejects)
goes back to the model as an observation and costs a turn. A transient error is retried by
the engine and costs nothing but time. A tool result that is not JSON fails the run: its
effect happened, and feeding it back could make the model repeat it.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Callable

from ..activities import accepts
from ..budget import Budget
from ..errors import ActivityFailed, AgentConfigError, ModelOutputError
from ..retry import RetryPolicy
from .tools import call_args, check_call, tool_schema

#: model calls: retry blips (429, 5xx, time-outs) up to 8 attempts (waits capped at 1, 2,
#: 4, 8, 16, 30, 30 s, at least Retry-After), repair broken tool arguments up to 3 times
#: with the validation error fed back.
MODEL_POLICY = RetryPolicy(max_attempts=8, initial=1.0, backoff=2.0, max_interval=30.0,
                           model_output_budget=3)
#: tool calls: retry blips up to 8 attempts; a NonRetryable error goes back to the model.
TOOL_POLICY = RetryPolicy(max_attempts=8, initial=1.0, backoff=2.0, max_interval=30.0)
#: seconds one attempt of a model call / a tool call may take before it counts as a
#: time-out (a lost answer must end somewhere, or the run would wait for ever).
MODEL_TIMEOUT = 60.0
TOOL_TIMEOUT = 30.0
#: how long an approval may take by default: one day, in seconds.
APPROVAL_DEADLINE = 86400.0
#: what the model is told when a person refused a call, or did not answer in time.
NOT_APPROVED = "not approved: {tool} needs a person's approval, and {why}; do not retry it"
STOP_REASONS = ("answered", "max_turns", "budget:<limit>", "circuit_open")

# The usage of answers thrown away for broken arguments rides along in the error message
# (the one thing the engine hands to the next attempt), so the answer finally kept reports
# what the whole model call cost, for the loop's own budget; the model never sees this tag.
# The error also carries the broken answer's own usage, which the engine records for every
# run (the chain breaks when a 429 comes between), so `dl.compare` counts each answer once:
# the kept one without what it folded in (`budget.answer_usage`), the broken ones recorded.
_TAG = re.compile(r"\n\[durablelab discarded usage (\{.*\})\]$")


def react(ctx, task: str, *, model, tools, max_turns: int = 10, budget: Budget | None = None,
          approval=None, system: str | None = None, policies: dict | None = None,
          parallel_tools: bool = False) -> dict:
    """Run a ReAct agent loop on `task` as workflow code, and return how it ended.

    Call it from a workflow function: ``def agent(ctx, task): return dl.agents.react(ctx,
    task, model=llm, tools=[lookup_order, refund])``.

    Args:
        task: the user's request, the first message.
        model: a callable with the model interface ``model(messages, tools, feedback=None)
            -> {"content", "tool_calls": [{"id", "name", "arguments"}], "usage"}`` (a
            `dl.sim.SimLLM`, `OpenAICompatible`), or a list of them: the next is the
            fallback, asked from then on, when one fails for good.
        tools: plain functions with type hints and a docstring (see `tool_schema`).
        max_turns: model calls at most; then the loop stops with ``"max_turns"``.
        budget: a `dl.Budget`, checked before each model call against what the loop spent
            (model calls, input + output tokens, cost, turns); passing a limit stops the
            loop with ``"budget:<limit>"``. The run ends normally: the last turn's tools ran.
        approval: tool names (or ``{name: deadline seconds}``, default one day) that wait for
            the signal ``"approve:<name>"`` with value ``{"approved": bool}`` before they run.
            A refusal or a passed deadline goes back to the model as "not approved".
        system: an optional system message.
        policies: ``{"model" or a tool name: RetryPolicy}`` replacing `MODEL_POLICY` /
            `TOOL_POLICY`; a `CircuitBreaker` on the model's policy makes an open circuit
            stop the loop with ``"circuit_open"``.
        parallel_tools: run one turn's tool calls concurrently (`ctx.start_activity`), as
            models that ask for several tools at once expect; their results go back to
            the model in call order. A call waiting for approval holds only itself.

    Returns ``{"answer", "stop_reason", "turns", "usage"}``: the model's final text (None
    unless it answered), one of ``"answered"``, ``"max_turns"``, ``"budget:<limit>"``,
    ``"circuit_open"``, the turns taken, and ``{"model_calls", "input_tokens",
    "output_tokens", "tokens", "cost"}`` (tokens of rejected answers included). Raises
    `ActivityFailed` when a model fails for good with no fallback left, or when a tool
    fails for good other than with NonRetryable (a non-JSON result among them).
    """
    models = list(model) if isinstance(model, (list, tuple)) else [model]
    tools = list(tools)
    by_name = _tools_by_name(tools)
    approvals = _approvals(approval, by_name)
    policies = _policies(policies, by_name)
    if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
        raise AgentConfigError(f"react(max_turns={max_turns!r}): give an int >= 1",
                               what="max_turns")
    if budget is not None and not isinstance(budget, Budget):
        raise AgentConfigError(f"react(budget={budget!r}): give a dl.Budget(...) or None",
                               what="budget")
    if not models or not all(callable(m) for m in models):
        raise AgentConfigError(f"react(model={model!r}): give a model callable (a SimLLM, "
                               f"an OpenAICompatible) or a list of them", what="model")
    specs = [tool_schema(fn) for fn in tools]
    messages: list[dict] = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": task})
    usage = {"model_calls": 0, "input_tokens": 0, "output_tokens": 0, "tokens": 0, "cost": 0.0}
    turns, current = 0, 0

    def ended(stop_reason, answer=None):
        return {"answer": answer, "stop_reason": stop_reason, "turns": turns,
                "usage": dict(usage)}

    while turns < max_turns:
        over = _over(budget, usage, turns)
        if over is not None:
            return ended(f"budget:{over}")
        try:
            reply = ctx.activity("model", _model_step(models[current], tuple(tools)),
                                 messages, specs, policy=policies["model"],
                                 start_to_close=MODEL_TIMEOUT)
        except ActivityFailed as exc:
            if exc.cause_class == "CircuitOpen":
                return ended("circuit_open")
            if current + 1 < len(models):
                current += 1    # the fallback takes over, for this turn and the rest
                continue
            raise
        turns += 1
        _add(usage, reply["usage"])
        calls = reply["tool_calls"]
        messages.append({"role": "assistant", "content": reply["content"], "tool_calls": calls})
        if not calls:
            return ended("answered", reply["content"])
        if parallel_tools:
            observations = _use_tools_at_once(ctx, calls, by_name, approvals, policies)
        else:
            observations = (_use_tool(ctx, by_name[call["name"]], call, approvals, policies)
                            for call in calls)
        for call, observation in zip(calls, observations):
            messages.append({"role": "tool", "tool_call_id": call["id"], "name": call["name"],
                             "content": json.dumps(observation, sort_keys=True)})
    return ended("max_turns")


def _use_tool(ctx, fn: Callable, call: dict, approvals: dict, policies: dict) -> Any:
    """Run one checked tool call as an activity; its result, or an error observation."""
    refused = _refused(ctx, call["name"], approvals)
    if refused is not None:
        return refused
    args, kwargs = call_args(fn, call["arguments"])
    return _observed(lambda: ctx.activity(call["name"], _tool_step(fn), *args,
                                          policy=policies[call["name"]],
                                          start_to_close=TOOL_TIMEOUT, **kwargs))


def _use_tools_at_once(ctx, calls: list, by_name: dict, approvals: dict,
                       policies: dict) -> list:
    """Run a turn's tool calls concurrently: the ones that need no approval start at once,
    then each gated one starts when its approval comes (the others run meanwhile); the
    observations come back in call order."""
    def start(call):
        fn = by_name[call["name"]]
        args, kwargs = call_args(fn, call["arguments"])
        return ctx.start_activity(call["name"], _tool_step(fn), *args,
                                  policy=policies[call["name"]], start_to_close=TOOL_TIMEOUT,
                                  **kwargs)

    started = {i: start(call) for i, call in enumerate(calls) if call["name"] not in approvals}
    observations = {}
    for i, call in enumerate(calls):
        if i not in started:
            observations[i] = _refused(ctx, call["name"], approvals)
            if observations[i] is None:
                started[i] = start(call)
    for i, handle in started.items():
        observations[i] = _observed(handle.result)
    return [observations[i] for i in range(len(calls))]


def _refused(ctx, name: str, approvals: dict) -> dict | None:
    """Wait for a gated tool's approval: None when approved, else the observation that
    tells the model it was not."""
    if name not in approvals:
        return None
    decision = ctx.wait_signal(f"approve:{name}", timeout=approvals[name])
    if decision is None:
        return {"error": NOT_APPROVED.format(
            tool=name, why=f"no answer came within {approvals[name]:g}s")}
    if not (isinstance(decision, dict) and decision.get("approved") is True):
        return {"error": NOT_APPROVED.format(tool=name, why="the person refused")}
    return None


def _observed(run_tool: Callable[[], dict]) -> Any:
    """The tool's result, or the error observation of a NonRetryable failure."""
    try:
        done = run_tool()
    except ActivityFailed as exc:
        if exc.error_class == "NonRetryable" and exc.cause_class != "SerializationError":
            return {"error": exc.cause_message}
        raise
    return done["result"]


@functools.lru_cache(maxsize=512)
def _tool_step(fn: Callable) -> Callable:
    """The activity function of tool `fn`: it passes the idempotency key on when the tool
    takes one, and records ``{"result", "idempotency_key"}`` so `dl.compare` can tell which
    re-executed effects carried a key (duplicates a key-honouring service prevents)."""
    takes_key = accepts(fn)[0]

    def step(*args, idempotency_key: str | None = None, **kwargs):
        if takes_key:
            kwargs["idempotency_key"] = idempotency_key
        return {"result": fn(*args, **kwargs),
                "idempotency_key": idempotency_key if takes_key else None}

    step.__name__ = step.__qualname__ = getattr(fn, "__name__", "tool")
    step.__doc__ = fn.__doc__
    return step


@functools.lru_cache(maxsize=256)
def _model_step(model: Callable, tools: tuple) -> Callable:
    """The activity function of a model call: ask `model`, then check every tool call it
    makes against the tools' schemas (a broken one raises `ModelOutputError`)."""
    takes_key, takes_feedback = accepts(model)
    by_name = {fn.__name__: fn for fn in tools}
    label = getattr(model, "name", None) or getattr(model, "__name__", type(model).__name__)

    def step(messages: list, tools: list, feedback: str | None = None,
             idempotency_key: str | None = None) -> dict:
        spent = {"input_tokens": 0, "output_tokens": 0, "cost": 0.0}
        if feedback:
            found = _TAG.search(feedback)
            if found:
                spent = json.loads(found.group(1))
                feedback = feedback[:found.start()]
        kwargs = {}
        if takes_feedback:
            kwargs["feedback"] = feedback
        if takes_key:
            kwargs["idempotency_key"] = idempotency_key
        reply = model(messages, tools, **kwargs)
        usage = _reply_usage(reply, label)
        own = dict(usage)
        for key in spent:
            usage[key] = usage[key] + spent[key]
        try:
            calls = [_checked(call, i, by_name) for i, call in enumerate(reply.get("tool_calls")
                                                                         or [])]
        except ModelOutputError as exc:
            raise ModelOutputError(f"{exc.message}\n[durablelab discarded usage "
                                   f"{json.dumps(usage, sort_keys=True)}]",
                                   cause_class=exc.cause_class, usage=own) from None
        if spent["input_tokens"] or spent["output_tokens"] or spent["cost"]:
            usage["discarded"] = spent
        return {"model": label, "content": reply.get("content"), "tool_calls": calls,
                "usage": usage}

    step.__name__ = step.__qualname__ = "model"
    return step


def _checked(call: Any, index: int, by_name: dict) -> dict:
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        raise ModelOutputError(f"tool call {index} is not {{'id', 'name', 'arguments'}}: "
                               f"{str(call)[:80]}", cause_class="ValidationError")
    name = call["name"]
    if name not in by_name:
        raise ModelOutputError(f"there is no tool named {name!r}; the tools are: "
                               f"{', '.join(sorted(by_name)) or 'none'}",
                               cause_class="ValidationError")
    arguments = check_call(by_name[name], call.get("arguments", {}), name)
    call_id = call.get("id") or f"call_{index + 1}"
    return {"id": str(call_id), "name": name, "arguments": arguments}


def _reply_usage(reply: Any, label: str) -> dict:
    if not isinstance(reply, dict) or not isinstance(reply.get("usage"), dict):
        raise AgentConfigError(
            f"model {label!r} returned {str(reply)[:80]!r}; the model interface returns "
            f"{{'content', 'tool_calls', 'usage': {{'input_tokens', 'output_tokens', "
            f"'cost'}}}}", what="model")
    usage = reply["usage"]
    return {"input_tokens": int(usage.get("input_tokens", 0)),
            "output_tokens": int(usage.get("output_tokens", 0)),
            "cost": float(usage.get("cost", 0.0))}


def _add(total: dict, usage: dict) -> None:
    total["model_calls"] += 1
    total["input_tokens"] += usage["input_tokens"]
    total["output_tokens"] += usage["output_tokens"]
    total["tokens"] = total["input_tokens"] + total["output_tokens"]
    total["cost"] += usage["cost"]


def _over(budget: Budget | None, usage: dict, turns: int) -> str | None:
    """The first limit already reached, or None: checked before a model call, so a limit of
    3 model calls allows exactly 3."""
    if budget is None:
        return None
    spent = {"model_calls": usage["model_calls"], "tokens": usage["tokens"],
             "cost": usage["cost"], "turns": turns}
    for name in ("model_calls", "tokens", "cost", "turns"):
        limit = getattr(budget, name)
        if limit is not None and spent[name] >= limit:
            return name
    return None


def _tools_by_name(tools: list) -> dict:
    by_name: dict[str, Callable] = {}
    for fn in tools:
        if not callable(fn):
            raise AgentConfigError(f"react(tools=...): {fn!r} is not a function",
                                   what="tools")
        name = tool_schema(fn)["name"]
        if name == "model" or name in by_name:
            raise AgentConfigError(
                f"react(tools=...): two activities would be named {name!r} (a tool's "
                f"__name__ is its activity name, and 'model' is the model's); rename one",
                what="tools")
        by_name[name] = fn
    return by_name


def _approvals(approval, by_name: dict) -> dict[str, float]:
    if approval is None:
        return {}
    if isinstance(approval, str) or not isinstance(approval, (list, tuple, set, dict)):
        raise AgentConfigError(f"react(approval={approval!r}): give a list of tool names, "
                               f"or {{name: deadline seconds}}", what="approval")
    items = approval.items() if isinstance(approval, dict) else (
        (name, APPROVAL_DEADLINE) for name in approval)
    found = {}
    for name, seconds in items:
        if name not in by_name:
            raise AgentConfigError(f"react(approval=...): no tool named {name!r} (the tools "
                                   f"are: {', '.join(sorted(by_name))})", what="approval")
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
            raise AgentConfigError(f"react(approval={{{name!r}: {seconds!r}}}): a deadline is "
                                   f"seconds > 0", what="approval")
        found[name] = float(seconds)
    return found


def _policies(policies, by_name: dict) -> dict[str, RetryPolicy]:
    chosen = {"model": MODEL_POLICY, **dict.fromkeys(by_name, TOOL_POLICY)}
    for name, policy in (policies or {}).items():
        if name not in chosen:
            raise AgentConfigError(f"react(policies=...): {name!r} is neither 'model' nor a "
                                   f"tool (the tools are: {', '.join(sorted(by_name))})",
                                   what="policies")
        if not isinstance(policy, RetryPolicy):
            raise AgentConfigError(f"react(policies={{{name!r}: {policy!r}}}): give a "
                                   f"dl.RetryPolicy", what="policies")
        chosen[name] = policy
    return chosen


__all__ = ["react", "MODEL_POLICY", "TOOL_POLICY", "MODEL_TIMEOUT", "TOOL_TIMEOUT", "APPROVAL_DEADLINE", "STOP_REASONS"]
