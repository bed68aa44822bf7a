"""A real chat-completions model, through the official ``openai`` client, as an activity.

`OpenAICompatible` speaks the chat-completions HTTP API that OpenAI and most local servers
(vLLM, llama.cpp, Ollama, LM Studio) offer. Three choices make it fit a durable engine:

- **the client is built inside the call**, that is inside the model activity, never in
  workflow code: building it reads the environment (``OPENAI_API_KEY``) and opens
  connections, which replay must never do. A replayed model call hands back the recorded
  answer and touches no network at all;
- **the client's own retries are off** (``max_retries=0``): the openai client would
  otherwise retry 429s and 5xx twice with its own in-memory backoff, invisible to history
  and restarted by a crash. The engine's `RetryPolicy` decides instead, with durable
  timers;
- **errors are mapped to the engine's retry classes**: 429 is `RateLimited` carrying the
  server's ``Retry-After`` seconds (so the wait honours it), 5xx, time-outs and connection
  errors are `Transient`, any other 4xx is `NonRetryable` (a bad key will not fix itself).

Usage comes back in the model interface's keys (``input_tokens``, ``output_tokens``, and
``cost`` from `prices`, in dollars per million tokens, else 0).
"""

from __future__ import annotations

import json
import math
import os

from ..errors import AgentConfigError, ModelOutputError, NonRetryable, RateLimited, Transient

#: the key sent when none is given and OPENAI_API_KEY is unset: local servers need none.
PLACEHOLDER_KEY = "durablelab-no-key"
#: how a repair request starts: the previous answer's validation error follows.
REPAIR_PREFIX = "Your previous answer was rejected: "


class OpenAICompatible:
    """A chat-completions model at `base_url`, callable with the agent model interface.

    Args:
        base_url: the API root, e.g. ``"http://127.0.0.1:8000/v1"`` (a `FakeChatServer`'s
            ``url``) or ``"https://api.openai.com/v1"``.
        model: the model name the server expects.
        api_key: None reads ``OPENAI_API_KEY`` inside the activity, else a placeholder.
        timeout: seconds one request may take (real seconds: this is the network) before it
            is a `Transient` time-out.
        prices: ``{"input": $/1M tokens, "output": $/1M tokens}``; None costs 0.

    ``llm(messages, tools, feedback=None)`` returns ``{"model", "content", "tool_calls":
    [{"id", "name", "arguments"}], "usage"}``; an argument string that is not JSON is handed
    on as the string, for the agent loop to reject as a `ModelOutputError`. Equal settings
    make equal objects, so a workflow that builds one on every wake-up stays cheap.
    """

    def __init__(self, base_url: str, model: str, api_key: str | None = None,
                 timeout: float = 30.0, prices: dict | None = None):
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise AgentConfigError(f"OpenAICompatible(base_url={base_url!r}): give an http(s) "
                                   f"URL such as 'http://127.0.0.1:8000/v1'", what="base_url")
        if not isinstance(model, str) or not model:
            raise AgentConfigError(f"OpenAICompatible(model={model!r}): give the model's name",
                                   what="model")
        if (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                or not math.isfinite(timeout) or timeout <= 0):
            raise AgentConfigError(f"OpenAICompatible(timeout={timeout!r}): seconds > 0",
                                   what="timeout")
        if prices is not None and (not isinstance(prices, dict) or set(prices) != {"input", "output"}
                                   or not all(isinstance(v, (int, float)) and v >= 0
                                              for v in prices.values())):
            raise AgentConfigError(f"OpenAICompatible(prices={prices!r}): give {{'input': $/1M "
                                   f"tokens, 'output': $/1M tokens}}, both >= 0", what="prices")
        self.base_url, self.model, self.api_key = base_url, model, api_key
        self.timeout = float(timeout)
        self.prices = dict(prices) if prices else None
        #: the name answers are recorded under.
        self.name = model

    def _key(self) -> tuple:
        prices = tuple(sorted(self.prices.items())) if self.prices else None
        return (self.base_url, self.model, self.api_key, self.timeout, prices)

    def __eq__(self, other) -> bool:
        return isinstance(other, OpenAICompatible) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"OpenAICompatible({self.base_url!r}, {self.model!r}, timeout={self.timeout:g})"

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """Dollars for a call of that size (0 without prices)."""
        if not self.prices:
            return 0.0
        return (input_tokens * self.prices["input"]
                + output_tokens * self.prices["output"]) / 1_000_000

    def __call__(self, messages: list[dict], tools: list[dict], feedback: str | None = None,
                 idempotency_key: str | None = None) -> dict:
        """One chat completion; see the class docstring. Raises `RateLimited`, `Transient`
        or `NonRetryable` as the module docstring says."""
        import openai

        key = self.api_key or os.environ.get("OPENAI_API_KEY") or PLACEHOLDER_KEY
        # Plain http (a local server) has no certificates to check: skipping the trust
        # store keeps building a client per call at well under a millisecond.
        http = (openai.DefaultHttpxClient(verify=False)
                if self.base_url.startswith("http://") else None)
        client = openai.OpenAI(base_url=self.base_url, api_key=key, timeout=self.timeout,
                               max_retries=0, http_client=http)
        request = {"model": self.model, "messages": to_openai(messages, feedback)}
        if tools:
            request["tools"] = [{"type": "function", "function": t} for t in tools]
        try:
            response = client.chat.completions.create(**request)
        except openai.APITimeoutError as exc:
            raise Transient(f"{self.model} at {self.base_url} did not answer within "
                            f"{self.timeout:g}s ({exc})", cause_class="TimeoutError") from None
        except openai.APIConnectionError as exc:
            raise Transient(f"cannot reach {self.base_url}: {exc}",
                            cause_class="ConnectionError") from None
        except openai.APIStatusError as exc:
            raise _status_error(exc, self) from None
        finally:
            client.close()
        return self._reply(response)

    def _reply(self, response) -> dict:
        if not response.choices:
            raise ModelOutputError(f"{self.model}'s answer has no choices",
                                   cause_class="ValidationError")
        message = response.choices[0].message
        calls = []
        for call in message.tool_calls or []:
            arguments = call.function.arguments
            try:
                arguments = json.loads(arguments) if arguments else {}
            except json.JSONDecodeError:
                pass     # handed on as text: the agent loop rejects it with feedback
            calls.append({"id": call.id, "name": call.function.name, "arguments": arguments})
        usage = response.usage
        tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
        tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
        return {"model": self.model, "content": message.content, "tool_calls": calls,
                "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out,
                          "cost": self.cost(tokens_in, tokens_out)}}


def _status_error(exc, llm: OpenAICompatible):
    status = exc.status_code
    where = f"{llm.model} at {llm.base_url} answered HTTP {status}"
    cause = type(exc).__name__
    if status == 429:
        header = exc.response.headers.get("retry-after")
        try:
            retry_after = float(header) if header is not None else None
        except ValueError:
            retry_after = None   # an HTTP date: the policy's delay alone applies
        return RateLimited(f"{where} (rate limited; Retry-After: {header})",
                           retry_after=retry_after, cause_class=cause)
    if status >= 500:
        return Transient(f"{where}: {exc.message}", cause_class=cause)
    return NonRetryable(f"{where}: {exc.message}", cause_class=cause)


def to_openai(messages: list[dict], feedback: str | None = None) -> list[dict]:
    """The interface's messages in the chat-completions wire format (assistant tool calls
    with JSON-text arguments), plus a repair request quoting `feedback`."""
    wire = []
    for m in messages:
        role = m.get("role")
        if role == "assistant":
            out = {"role": "assistant", "content": m.get("content")}
            if m.get("tool_calls"):
                out["tool_calls"] = [{"id": c["id"], "type": "function", "function": {
                    "name": c["name"], "arguments": json.dumps(c["arguments"], sort_keys=True)}}
                    for c in m["tool_calls"]]
            wire.append(out)
        elif role == "tool":
            wire.append({"role": "tool", "tool_call_id": m["tool_call_id"],
                         "content": m["content"]})
        else:
            wire.append({"role": role, "content": m.get("content")})
    if feedback:
        wire.append({"role": "user", "content": REPAIR_PREFIX + feedback
                     + "\nCall the tool again with corrected arguments."})
    return wire


__all__ = ["OpenAICompatible", "to_openai", "REPAIR_PREFIX", "PLACEHOLDER_KEY"]
