"""Bring your own Pydantic AI agent: its model requests and tool calls become activities.

An agent written with Pydantic AI already knows how to call a model and its tools; what it
lacks is durability. Pydantic AI's own Temporal, DBOS and Prefect integrations add it with a
*capability* built on the public extension API of ``pydantic_ai.durable_exec``: the agent
hands each durable unit (a model request, a tool call) to an engine's backend, which runs it
once and records its result. `Durability` is that capability for durablelab:

- each model request is one activity named ``"model"`` and each function-tool call one
  activity named after the tool, the names `dl.agents.react` uses, so fault plans, policies,
  presets, budgets, `dl.explore_crashes`, sweeps, timelines and `dl.compare` apply as they
  are;
- a tool reaches its idempotency key with `dl.idempotency_key()` (a Pydantic AI tool cannot
  take the ``idempotency_key=`` keyword: its signature is the model's schema);
- a model request's argument digest covers the conversation's content, not the timestamps
  or generated ids Pydantic AI stamps on each message, so replay matches while a changed
  prompt, instruction or tool schema stops with a `NonDeterminismError` (`dl.replay_check`
  reports it);
- a provider client that retries on its own (the openai client's ``max_retries``, 2 by
  default) gets a `RetryAmplificationWarning`: it hides 429s and 5xx inside one attempt,
  sleeping in memory, where the engine neither sees nor records them.

Outside a durablelab workflow the capability changes nothing: the agent runs as before.

Workflow code stays synchronous: `run` drives the agent's event loop inside the workflow
function (on a helper thread when a loop already runs, as in a notebook), and each unit's
body runs inside its activity on a private loop (`durablelab.aio`). A client bound to one
event loop may therefore see several loops; the openai client Pydantic AI builds copes.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import dataclasses
import math
import types
import warnings
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from ..errors import (AgentConfigError, DurableLabError, NonRetryable,
                      RetryAmplificationWarning, framework_missing, framework_version)
from ..retry import RetryPolicy
from .loop import MODEL_POLICY, MODEL_TIMEOUT, TOOL_POLICY

#: the Pydantic AI versions this bridge is tested with: the durable_exec extension API it
#: builds on is public, but the operation identity it projects is documented as opaque.
SUPPORTED = ((2, 68), (3, 0))
EXTRA = "pydantic-ai"

try:
    import pydantic_ai
    from pydantic_ai.durable_exec import (JSON_CODEC, BaseDurabilityCapability,
                                          CallableOperationBackend, DurabilityEngineSpec,
                                          ModelRequestId, ToolsetCallToolId,
                                          ToolsetValidateToolArgumentsId,
                                          conversation_id_from_run_id)
    from pydantic_ai.durable_exec import JournalOperationNamer
except ImportError as exc:   # the extra is not installed: say which one
    raise framework_missing("durablelab.agents.pydantic_ai", "Pydantic AI", EXTRA,
                            str(exc)) from None


def _check_version(version: str) -> None:
    """Refuse a Pydantic AI outside `SUPPORTED`, naming the version found."""
    try:
        found = tuple(int(part) for part in version.split(".")[:2])
    except ValueError:
        found = None
    low, high = SUPPORTED
    if found is None or not low <= found < high:
        raise framework_version("Pydantic AI", "pydantic-ai-slim", version,
                                f">={low[0]}.{low[1]},<{high[0]}", EXTRA)


_check_version(pydantic_ai.__version__)

from pydantic import TypeAdapter                                     # noqa: E402
from pydantic_ai import ModelMessagesTypeAdapter                     # noqa: E402
from pydantic_ai.agent import AbstractAgent                          # noqa: E402
from pydantic_ai.models import ModelRequestParameters                # noqa: E402
from pydantic_ai.models.wrapper import WrapperModel                  # noqa: E402
from pydantic_core import to_jsonable_python                         # noqa: E402

from .. import aio                                                   # noqa: E402
from ..context import Context                                        # noqa: E402
from ..registry import register                                      # noqa: E402

#: keys of Pydantic AI's messages and parts that differ between two executions of the same
#: conversation (stamped when a message is built, or drawn at random), left out of a model
#: request's digest so that replay matches. Only at those two levels: a tool argument
#: called "id" is content.
VOLATILE = frozenset({"timestamp", "run_id", "conversation_id", "tool_call_id", "id",
                      "provider_response_id"})


@dataclass
class _Running:
    """What one `run` call shares with the capability's hooks (through `_RUNNING`)."""

    ctx: Context
    durability: "Durability"
    agent_runs: int = 0       # agent runs started in this execution of the workflow code
    warned: bool = False      # the retry-amplification warning, once per run() call


#: the `run` in progress in this task, or None (then the capability changes nothing).
_RUNNING: contextvars.ContextVar[_Running | None] = contextvars.ContextVar(
    "durablelab_pydantic_ai_run", default=None)

_REQUEST_PARAMETERS = TypeAdapter(ModelRequestParameters)


@dataclass(frozen=True)
class _UnitConfig:
    """How one kind of unit runs as an activity: its retry policy and time-out."""

    policy: RetryPolicy
    timeout: float


class Durability(BaseDurabilityCapability):
    """A Pydantic AI capability that makes the agent's model requests and tool calls
    durablelab activities, inside a durablelab workflow (and changes nothing outside one).

    Attach it when you build the agent (``Agent(model, name="shop",
    capabilities=[Durability()])``), or let `run` / `DurableAgent` attach a default one for
    the run.

    Args:
        model_policy: the `RetryPolicy` of the ``"model"`` activity (None:
            ``dl.agents.MODEL_POLICY``, as `react` uses).
        tool_policy: the `RetryPolicy` of each tool's activity (None:
            ``dl.agents.TOOL_POLICY``).
        model_timeout: virtual seconds one model attempt may take (its ``start_to_close``).
        tool_timeout: virtual seconds one tool attempt may take.
        parallel_tools: run the tool calls of one model answer concurrently
            (`ctx.start_activity`), as Pydantic AI does by default; False runs them one
            after another, each waiting for the one before.

    A run started with ``policies=`` (or a sweep's policies) overrides these policies by
    activity name, as for any activity.
    """

    engine_spec = DurabilityEngineSpec(
        engine_name="durablelab",
        durable_unit_noun="activity",
        durable_unit_plural="activities",
        durable_container_noun="workflow",
        # history holds JSON only: the base reduces every result to JSON inside the unit
        codec=JSON_CODEC,
        serialization_failure=lambda exc: NonRetryable(
            f"a Pydantic AI result is not JSON ({exc}); its effect already happened, but "
            f"history can only hold JSON: return plain data from the tool",
            cause_class="SerializationError"),
        wrapped_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        toolset_lifecycles={"function": "enter-always", "mcp": "enter-in-durable-unit",
                            "dynamic": "enter-never"},
        tool_call_result_upgrade_lenient=False,
        journal_discovery=True,
        # positions follow the order the code asks, and tools asked concurrently take
        # theirs in the order Pydantic AI starts them, so both modes replay
        sequential_tools_in_durable_context=False,
        unsupported_runtime_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        tool_config_key="durablelab",
    )

    def __init__(self, model_policy: RetryPolicy | None = None,
                 tool_policy: RetryPolicy | None = None, model_timeout: float = MODEL_TIMEOUT,
                 tool_timeout: float = 30.0, parallel_tools: bool = False):
        for what, policy in (("model_policy", model_policy), ("tool_policy", tool_policy)):
            if policy is not None and not isinstance(policy, RetryPolicy):
                raise AgentConfigError(f"Durability({what}={policy!r}): give a "
                                       f"dl.RetryPolicy(...) or None", what=what)
        for what, seconds in (("model_timeout", model_timeout), ("tool_timeout", tool_timeout)):
            if (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                    or not math.isfinite(seconds) or seconds <= 0):
                raise AgentConfigError(f"Durability({what}={seconds!r}): virtual seconds "
                                       f"> 0, finite", what=what)
        if not isinstance(parallel_tools, bool):
            raise AgentConfigError(f"Durability(parallel_tools={parallel_tools!r}): True or "
                                   f"False", what="parallel_tools")
        super().__init__()
        self.model_policy = model_policy or MODEL_POLICY
        self.tool_policy = tool_policy or TOOL_POLICY
        self.model_timeout, self.tool_timeout = float(model_timeout), float(tool_timeout)
        self.parallel_tools = parallel_tools
        self._backend: _Backend | None = None

    def __repr__(self) -> str:
        return (f"Durability(model_timeout={self.model_timeout:g}, tool_timeout="
                f"{self.tool_timeout:g}, parallel_tools={self.parallel_tools})")

    # --- binding: a name for the agent's units, and a backend of this bound copy ----------
    def for_agent(self, agent):
        # The base asks for an agent name to name its units; durablelab names them after
        # what they do ("model", the tool), so an unnamed agent is fine here.
        unit = self
        if not (self.name or agent.name):
            unit = copy.copy(self)
            unit.name = "agent"
        unit._backend = None
        return BaseDurabilityCapability.for_agent(unit, agent)

    def get_durable_operation_backend(self) -> "_Backend":
        if self._backend is None:
            self._backend = _Backend(self)
        return self._backend

    # --- the hooks the base asks engines for -----------------------------------------------
    @property
    def in_durable_context(self) -> bool:
        return _RUNNING.get() is not None

    def get_default_run_id(self) -> str | None:
        # The same on every execution of the workflow code, so Pydantic AI's run id (and
        # the conversation id derived from it) replay as recorded.
        running = _RUNNING.get()
        if running is None:
            return None
        running.agent_runs += 1
        return f"{running.ctx.run_id}:agent-{running.agent_runs}"

    def get_default_conversation_id(self, run_id: str) -> str | None:
        return conversation_id_from_run_id(run_id) if self.in_durable_context else None

    async def wrap_run(self, ctx, *, handler):
        agent = self.agent
        if self.in_durable_context and not self.parallel_tools and agent is not None:
            with agent.parallel_tool_call_execution_mode("sequential"):
                return await super().wrap_run(ctx, handler=handler)
        return await super().wrap_run(ctx, handler=handler)


class _Namer(JournalOperationNamer):
    """Activity names: ``"model"`` for a model request, the tool's name for a tool call;
    Pydantic AI's journal names for the rarer units (discovery, MCP, events)."""

    def invocation_name(self, operation_id, *, label):
        named = super().invocation_name(operation_id, label=label)
        if isinstance(operation_id, ModelRequestId):
            return dataclasses.replace(named, operation_name="model", display_name="model")
        if isinstance(operation_id, ToolsetCallToolId) and label:
            return dataclasses.replace(named, operation_name=label, display_name=label)
        return named


class _Config:
    """The `DurableOperationConfig` of the backend: model units get the model policy and
    time-out, every other unit the tool's."""

    def __init__(self, durability: Durability):
        self.model = _UnitConfig(durability.model_policy, durability.model_timeout)
        self.tool = _UnitConfig(durability.tool_policy, durability.tool_timeout)

    def base(self, role, *, operation_id) -> _UnitConfig:
        return self.model if role == "model" else self.tool

    def for_tool(self, role, *, operation_id, tool, tool_name) -> _UnitConfig:
        return self.tool


class _Backend(CallableOperationBackend):
    """Runs each durable unit of a Pydantic AI run as one activity of the workflow."""

    def __init__(self, durability: Durability):
        super().__init__(namer=_Namer(durability.name or "agent"), config=_Config(durability))
        self.durability = durability

    async def execute(self, *, operation_id, name: str, body: Callable[[], Awaitable[object]],
                      cache_key: tuple, config) -> object:
        running = _RUNNING.get()
        if running is None or isinstance(operation_id, ToolsetValidateToolArgumentsId):
            # Checking a tool's arguments is pure and depends only on what history
            # already holds (the model's answer): it runs in the workflow code, as
            # react's schema check does, and costs no activity.
            return await body()
        config = config if isinstance(config, _UnitConfig) else self._config.tool
        ctx = running.ctx
        unit = _Unit(body)
        if isinstance(operation_id, ModelRequestId):
            _warn_amplification(running, cache_key)
            args = model_request_args(cache_key)
        elif isinstance(operation_id, ToolsetCallToolId):
            args = {"args": _jsonable(cache_key[1])}
        else:
            # the rarer units (tool discovery, MCP, event handlers) are checked by name and
            # position only: what Pydantic AI hands them holds live objects and timestamps
            args = {}
        if isinstance(operation_id, ToolsetCallToolId) and self.durability.parallel_tools:
            handle = ctx.start_activity(name, unit, args, policy=config.policy,
                                        start_to_close=config.timeout)
            await _let_siblings_start()
            return handle.result()
        return ctx.activity(name, unit, args, policy=config.policy,
                            start_to_close=config.timeout)


class _Unit:
    """The activity function of one unit: it awaits Pydantic AI's body (the engine runs a
    coroutine on a private loop), with the capability switched off inside it, so what the
    unit calls runs directly instead of asking for activities of its own."""

    __slots__ = ("body",)

    def __init__(self, body: Callable[[], Awaitable[object]]):
        self.body = body

    def __call__(self, _args: Any) -> Awaitable[object]:
        return self._run()

    async def _run(self) -> object:
        token = _RUNNING.set(None)
        try:
            return await self.body()
        finally:
            _RUNNING.reset(token)


async def _let_siblings_start() -> None:
    """Yield to the other tool calls of the same model answer until each has started its
    activity, so that all of them are in flight before any of them waits (a wait that
    cannot be met suspends the whole run)."""
    for _ in range(3):
        await asyncio.sleep(0)


def model_request_args(cache_key: tuple) -> dict:
    """The arguments a ``"model"`` activity is digested by: the conversation's content (each
    message and part without the timestamps and generated ids Pydantic AI stamps on it; a
    tool call's arguments and a tool's answer are kept whole), the model settings, the tools
    and output schema offered, and which model (None: the agent's own)."""
    model_id, messages, settings, parameters = cache_key[:4]
    dumped = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
    return {"model": model_id,
            "messages": [{**_without(message, VOLATILE),
                          "parts": [_without(part, VOLATILE) for part in message["parts"]]}
                         for message in dumped],
            "settings": _jsonable(settings),
            "parameters": _REQUEST_PARAMETERS.dump_python(parameters, mode="json")}


def _without(data: dict, keys: frozenset) -> dict:
    return {k: v for k, v in data.items() if k not in keys}


def _jsonable(value: Any) -> Any:
    # An object JSON cannot hold is digested by its type's name: a repr could carry a
    # memory address, which differs on every run and would make replay diverge.
    return to_jsonable_python(value, fallback=lambda v: type(v).__name__)


def _warn_amplification(running: _Running, cache_key: tuple) -> None:
    """Warn once per `run` when the model's own client retries (see the module docstring)."""
    if running.warned:
        return
    settings, run_context = cache_key[2], cache_key[-1]
    model = getattr(run_context, "model", None)
    while isinstance(model, WrapperModel):
        model = model.wrapped
    retries = (settings or {}).get("max_retries") if isinstance(settings, dict) else None
    if retries is None:
        retries = getattr(getattr(model, "client", None), "max_retries", None)
    if isinstance(retries, int) and not isinstance(retries, bool) and retries > 0:
        running.warned = True
        warnings.warn(RetryAmplificationWarning(
            f"The Pydantic AI model {getattr(model, 'model_name', model)!r} retries on its "
            f"own (its client's max_retries={retries}). Inside a durable workflow those "
            f"retries happen within one attempt of the 'model' activity, sleeping in memory: "
            f"the engine neither sees nor records the 429s and 5xx they hide, a crash "
            f"restarts their count, and the engine's own retries multiply them (retry "
            f"amplification). Turn them off so the engine's policy decides: build the "
            f"client with max_retries=0 (OpenAIProvider(openai_client=AsyncOpenAI(..., "
            f"max_retries=0))) or run with model_settings={{'max_retries': 0}}."),
            stacklevel=2)


# --- running an agent in workflow code -----------------------------------------------------
def run(ctx: Context, agent, prompt, **run_kwargs) -> dict:
    """Run a Pydantic AI `agent` on `prompt` as part of workflow code, durably.

    Each model request becomes the activity ``"model"`` and each tool call an activity
    named after the tool; on every later wake-up their recorded results come back and
    neither the model nor the tool is asked again. The agent needs a `Durability`
    capability; one with the default settings is attached for the run when it has none.

    Args:
        ctx: the workflow's `dl.Context`.
        agent: a ``pydantic_ai.Agent``.
        prompt: the user prompt (JSON: it is the workflow's input).
        **run_kwargs: passed on to ``agent.run`` (``deps=ctx.world`` gives the tools the
            simulated world of a sweep or `explore_crashes`).

    Returns ``{"output", "messages", "usage"}``, JSON only: the agent's output, the
    conversation in Pydantic AI's own JSON form (``ModelMessagesTypeAdapter``) and
    ``{"model_calls", "tool_calls", "input_tokens", "output_tokens", "tokens"}``. An
    activity that fails for good raises its `ActivityFailed` here, as `ctx.activity`
    would.
    """
    if not isinstance(ctx, Context):
        raise AgentConfigError(f"pydantic_ai.run(ctx={ctx!r}): give the workflow's ctx "
                               f"(call run inside a workflow function fn(ctx, input))",
                               what="ctx")
    if not isinstance(agent, AbstractAgent):
        raise AgentConfigError(f"pydantic_ai.run(agent={agent!r}): give a pydantic_ai.Agent",
                               what="agent")
    durability = Durability.from_agent(agent)
    if durability is None:
        durability = Durability()
        run_kwargs["capabilities"] = [*(run_kwargs.get("capabilities") or ()), durability]
    running = _Running(ctx, durability)
    token = _RUNNING.set(running)
    try:
        result = aio.run(_run_agent(agent, prompt, run_kwargs))
    finally:
        _RUNNING.reset(token)
    return {"output": to_jsonable_python(result.output),
            "messages": ModelMessagesTypeAdapter.dump_python(result.all_messages(), mode="json"),
            "usage": _usage(result.usage)}


async def _run_agent(agent, prompt, run_kwargs):
    try:
        return await agent.run(prompt, **run_kwargs)
    except BaseExceptionGroup as group:   # tools run in task groups: find the engine's own
        raise _first_of_ours(group) from None


def _first_of_ours(group: BaseExceptionGroup) -> BaseException:
    """The exception the engine must see out of a task group: its own control flow (a
    suspension, a simulated crash, a cancel) or a durablelab error, before anything else."""
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        else:
            leaves.append(exc)
    walk(group)
    for wanted in (lambda e: not isinstance(e, Exception),           # Suspend, WorkerCrash...
                   lambda e: isinstance(e, DurableLabError),
                   lambda e: True):
        for exc in leaves:
            if wanted(exc):
                return exc
    return group


def _usage(usage) -> dict:
    tokens_in, tokens_out = int(usage.input_tokens or 0), int(usage.output_tokens or 0)
    return {"model_calls": int(usage.requests or 0), "tool_calls": int(usage.tool_calls or 0),
            "input_tokens": tokens_in, "output_tokens": tokens_out,
            "tokens": tokens_in + tokens_out}


class DurableAgent:
    """A Pydantic AI agent as a registered durablelab workflow, ``fn(ctx, prompt)``.

    ``DurableAgent(agent).workflow`` is what you give `engine.start`, `dl.sweep` or
    `dl.explore_crashes`: it runs `run(ctx, agent, prompt)`, with ``deps=ctx.world`` when
    the agent declares a ``deps_type`` (so its tools act on the run's simulated world).
    Its name in history is ``"durablelab.agents.pydantic_ai:DurableAgent[<agent name>]"``.

    Args:
        agent: a ``pydantic_ai.Agent`` with a ``name`` (the workflow is named after it).
        durability: the `Durability` to run it with when the agent has none attached
            (None: the agent's own, or the defaults).
    """

    def __init__(self, agent, durability: Durability | None = None):
        if not isinstance(agent, AbstractAgent):
            raise AgentConfigError(f"DurableAgent(agent={agent!r}): give a pydantic_ai.Agent",
                                   what="agent")
        if durability is not None and not isinstance(durability, Durability):
            raise AgentConfigError(f"DurableAgent(durability={durability!r}): give a "
                                   f"Durability(...) or None", what="durability")
        attached = Durability.from_agent(agent)
        if attached is not None and durability is not None:
            raise AgentConfigError(
                f"DurableAgent(agent {agent.name!r}, durability=...): the agent already has a "
                f"Durability capability; pass durability=None, or build the agent without "
                f"one", what="durability")
        if not agent.name or not isinstance(agent.name, str):
            raise AgentConfigError(
                "DurableAgent(agent): the agent has no name, and its workflow is named after "
                "it; build it with Agent(..., name='shop')", what="agent")
        self.agent, self.durability = agent, attached or durability
        extra = {} if attached is not None or durability is None else {
            "capabilities": [durability]}
        takes_world = agent.deps_type is not type(None)

        def workflow(ctx, prompt):
            kwargs = dict(extra)
            if takes_world:
                kwargs["deps"] = ctx.world
            return run(ctx, agent, prompt, **kwargs)

        workflow.__name__ = f"DurableAgent[{agent.name}]"
        workflow.__qualname__ = workflow.__name__
        workflow.__doc__ = f"The Pydantic AI agent {agent.name!r} as a durablelab workflow."
        register(workflow, stacklevel=2)
        #: the registered workflow function ``fn(ctx, prompt)``.
        self.workflow: types.FunctionType = workflow

    def __repr__(self) -> str:
        return f"DurableAgent({self.agent.name!r}, {self.durability!r})"


__all__ = ["Durability", "DurableAgent", "run", "model_request_args", "SUPPORTED", "VOLATILE"]
