"""Durable agents: a ReAct loop whose model calls and tool calls are recorded activities.

- `react(ctx, task, *, model, tools, ...)`: the agent loop, as workflow code (`loop.py`).
- `tool_schema(fn)`: what a model is told about a tool, derived from its signature
  (`tools.py`).
- `OpenAICompatible(base_url, model, ...)`: a real chat-completions model through the
  official ``openai`` client, its errors mapped to the engine's retry classes
  (`openai_compat.py`).
- `FakeChatServer`: a local chat-completions server on 127.0.0.1 that answers, calls tools,
  rate-limits, fails, hangs and sends broken arguments, from a script or a seed
  (`fake_server.py`).
- `shop`: the lesson's small world (a flaky model and flaky tools) and the naive loop it is
  compared with.
"""

from .fake_server import FakeChatServer
from .loop import APPROVAL_DEADLINE, MODEL_POLICY, TOOL_POLICY, react
from .openai_compat import OpenAICompatible
from .tools import check_call, tool_schema

__all__ = ["react", "tool_schema", "check_call", "OpenAICompatible", "FakeChatServer", "MODEL_POLICY", "TOOL_POLICY",
           "APPROVAL_DEADLINE"]
