"""A local chat-completions server that misbehaves on purpose: standard library only.

To test a real model client you need a server that fails the way providers do, on demand
and offline. `FakeChatServer` listens on 127.0.0.1 (an ephemeral port) and answers
``POST /v1/chat/completions`` in the OpenAI wire format. Its brain is a scripted
`dl.sim.SimLLM` agent (a scenario from ``datasets/models/``), so it calls tools and answers
like the simulated model. What each request gets is an *action*:

- ``"ok"``: the brain's answer (content, or tool calls with JSON-text arguments), with usage;
- ``"429"``: HTTP 429 with a ``Retry-After: <retry_after>`` header;
- ``"503"``: HTTP 503 Service Unavailable;
- ``"hang"``: no answer for `hang` seconds (longer than the client's time-out), then the
  connection is closed;
- ``"malformed"``: the brain's answer, with the first tool call's arguments cut short, so
  they are not JSON.

Actions come from `script` (a list, one per request, then ``"ok"``) or, with `seed`, are
drawn per request from `rates` (``{"429": p, "503": p, "hang": p, "malformed": p}``) by a
generator seeded with (seed, request number). The ledger `requests` says what each request
got, so a test can count the model calls that really reached the server.

A request whose last message starts with the repair prefix (`REPAIR_PREFIX`, which
`OpenAICompatible` sends with ``feedback=``) is passed to the brain as a repair.
"""

from __future__ import annotations

import json
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ..clock import VirtualClock
from ..errors import AgentConfigError
from ..sim.llm import SimLLM
from .openai_compat import REPAIR_PREFIX

ACTIONS = ("ok", "429", "503", "hang", "malformed")


class FakeChatServer:
    """A flaky chat-completions server on 127.0.0.1; use it as a context manager.

    Args:
        scenario: the brain's scenario (a name in ``datasets/models/``, a path or a dict).
        script: actions for requests 1, 2, 3, ... (then ``"ok"``).
        seed: draw each request's action from `rates` instead (after the script, if both).
        rates: probabilities per action for seeded draws; the rest is ``"ok"``.
        retry_after: seconds the 429 answers ask the client to wait.
        hang: real seconds a hanging request waits before closing (keep it short in tests:
            just past the client's time-out).
        model: the model name in answers.

    ``server.url`` is the base URL for `OpenAICompatible`; ``server.requests`` lists
    ``{"number", "action", "repair", "tool_calls", "authorization"}`` per request; ``server.answered`` counts
    requests that got a model answer (``ok`` and ``malformed``).
    """

    def __init__(self, scenario="order_agent", *, script=None, seed: int | None = None,
                 rates: dict | None = None, retry_after: float = 2.0, hang: float = 1.0,
                 model: str = "fake-model"):
        script = list(script or [])
        for action in [*script, *(rates or {})]:
            if action not in ACTIONS:
                raise AgentConfigError(f"FakeChatServer: unknown action {action!r} (the "
                                       f"actions are: {', '.join(ACTIONS)})", what="script")
        if rates and not all(isinstance(p, (int, float)) and 0 <= p <= 1 for p in rates.values()):
            raise AgentConfigError(f"FakeChatServer(rates={rates!r}): probabilities in [0, 1]",
                                   what="rates")
        self.script, self.seed, self.rates = script, seed, dict(rates or {})
        self.retry_after, self.hang, self.model = float(retry_after), float(hang), model
        self.brain = SimLLM(model, clock=VirtualClock(), scenario=scenario)
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- life cycle --------------------------------------------------------------------
    def start(self) -> "FakeChatServer":
        """Listen on 127.0.0.1 on a free port, serving from a daemon thread."""
        if self._httpd is None:
            server = self

            class Handler(_Handler):
                owner = server

            self._stop.clear()
            self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
            self._httpd.daemon_threads = True
            self._thread = threading.Thread(target=self._httpd.serve_forever,
                                            name="FakeChatServer", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving (hanging requests are released) and free the port."""
        if self._httpd is not None:
            self._stop.set()
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "FakeChatServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def url(self) -> str:
        """The base URL, ``http://127.0.0.1:<port>/v1``."""
        if self._httpd is None:
            raise AgentConfigError("FakeChatServer is not running: use `with "
                                   "FakeChatServer(...) as server:` or call start()",
                                   what="server")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def answered(self) -> int:
        return sum(1 for r in self.requests if r["action"] in ("ok", "malformed"))

    def counts(self) -> dict:
        """Requests per action, e.g. ``{"ok": 4, "429": 1}``."""
        found: dict[str, int] = {}
        for r in self.requests:
            found[r["action"]] = found.get(r["action"], 0) + 1
        return found

    # --- one request -------------------------------------------------------------------
    def _next_action(self) -> tuple[int, str]:
        with self._lock:
            number = len(self.requests) + 1
            if number <= len(self.script):
                action = self.script[number - 1]
            elif self.seed is not None and self.rates:
                u, action = random.Random(f"fake-chat:{self.seed}:{number}").random(), "ok"
                for name, p in self.rates.items():
                    if u < p:
                        action = name
                        break
                    u -= p
            else:
                action = "ok"
            self.requests.append({"number": number, "action": action, "repair": False,
                                  "tool_calls": 0})
            return number, action

    def _answer(self, body: dict, number: int, malformed: bool) -> dict:
        messages, feedback = from_openai(body.get("messages") or [])
        tools = [t.get("function", t) for t in body.get("tools") or []]
        with self._lock:
            reply = self.brain(messages, tools, feedback=feedback)
            self.requests[number - 1].update(repair=feedback is not None,
                                             tool_calls=len(reply["tool_calls"]))
        calls = [{"id": c["id"], "type": "function", "function": {
            "name": c["name"], "arguments": c["arguments"] if isinstance(c["arguments"], str)
            else json.dumps(c["arguments"], sort_keys=True)}} for c in reply["tool_calls"]]
        if malformed and calls:
            text = calls[0]["function"]["arguments"]
            calls[0]["function"]["arguments"] = text[:max(1, len(text) // 2)]
        message = {"role": "assistant", "content": reply["content"]}
        if calls:
            message["tool_calls"] = calls
        usage = reply["usage"]
        return {"id": f"chatcmpl-{number}", "object": "chat.completion", "created": 0,
                "model": body.get("model", self.model),
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "tool_calls" if calls else "stop"}],
                "usage": {"prompt_tokens": usage["input_tokens"],
                          "completion_tokens": usage["output_tokens"],
                          "total_tokens": usage["input_tokens"] + usage["output_tokens"]}}


class _Handler(BaseHTTPRequestHandler):
    owner: FakeChatServer

    def log_message(self, *args) -> None:   # quiet: a lesson prints its own story
        pass

    def _send(self, status: int, body: dict, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send(400, {"error": {"message": "the request body is not JSON"}})
            return
        server = self.owner
        number, action = server._next_action()
        server.requests[number - 1]["authorization"] = self.headers.get("Authorization")
        if action == "429":
            self._send(429, {"error": {"message": "rate limit reached", "type": "rate_limit"}},
                       {"Retry-After": f"{server.retry_after:g}"})
        elif action == "503":
            self._send(503, {"error": {"message": "service unavailable", "type": "server"}})
        elif action == "hang":
            server._stop.wait(server.hang)
            self.close_connection = True
        else:
            self._send(200, server._answer(body, number, malformed=action == "malformed"))


def from_openai(wire: list[dict]) -> tuple[list[dict], str | None]:
    """Wire-format messages back in the model interface (tool results named after the call
    they answer), and the feedback of a repair request, if the last message is one."""
    feedback = None
    if wire and wire[-1].get("role") == "user" and str(wire[-1].get("content") or "").startswith(
            REPAIR_PREFIX):
        feedback = wire[-1]["content"][len(REPAIR_PREFIX):]
        wire = wire[:-1]
    names, messages = {}, []
    for m in wire:
        if m.get("role") == "assistant":
            calls = []
            for c in m.get("tool_calls") or []:
                names[c["id"]] = c["function"]["name"]
                try:
                    arguments = json.loads(c["function"]["arguments"] or "{}")
                except json.JSONDecodeError:
                    arguments = c["function"]["arguments"]
                calls.append({"id": c["id"], "name": c["function"]["name"],
                              "arguments": arguments})
            messages.append({"role": "assistant", "content": m.get("content"),
                             "tool_calls": calls})
        elif m.get("role") == "tool":
            messages.append({"role": "tool", "tool_call_id": m.get("tool_call_id"),
                             "name": names.get(m.get("tool_call_id")),
                             "content": m.get("content")})
        else:
            messages.append({"role": m.get("role"), "content": m.get("content")})
    return messages, feedback


__all__ = ["FakeChatServer", "from_openai", "ACTIONS"]
