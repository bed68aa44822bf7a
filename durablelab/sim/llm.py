"""A simulated chat model: seeded, metered, rate-limited, and sometimes wrong.

Model calls are the activities that fail in the most interesting ways: the provider says
429 when many runs ask at once, an answer comes back as truncated JSON or with a renamed
field, and every call costs tokens and money, including the ones you throw away. `SimLLM`
does all of that deterministically, so a lesson or an experiment can show it and a test
can assert it:

- answers come from a *scenario* (a dict, or a JSON file in ``datasets/models/``): the
  first entry whose ``match`` (a regular expression, case-insensitive) is found in the
  prompt gives the answer;
- tokens are counted by one plain rule (`count_tokens`) and priced per million tokens;
- a `TokenBucket` in the engine's *virtual* time rations requests across every run that
  uses the same `SimLLM`, so 200 runs started together really contend for it;
- with ``malformed_rate=p`` an answer comes back broken with probability p, drawn from
  (seed, model name, prompt digest, how often that prompt was answered before): the same
  seed and the same sequence of calls break the same answers the same way;
- a call that carries ``feedback=`` (the previous validation error) is a repair, and the
  model gets it right, unless the scenario marks it hopeless for that prompt;
- called as ``llm(messages, tools, feedback=None)``, it is an agent model for
  `dl.agents.react`: the scenario's ``agents`` script its tool calls and final answer.

Like the services, a `SimLLM` lives outside the worker: `engine.crash()` does not reset
its ledger (`calls`, `usage`) or its rate limiter.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

from ..curriculum import datasets_dir
from ..errors import BadType, BadValue, RateLimited

#: dollars per million tokens, roughly a small hosted model.
DEFAULT_PRICES = {"input": 0.15, "output": 0.60}
#: the ways an answer can come back broken (the same words as `faults.Malformed`).
DEFECTS = ("truncated", "schema", "refusal")
REFUSAL = "I'm sorry, but I can't help with that request."
DEFAULT_ANSWER = "I don't have an answer for that."
#: where named scenarios live: ``SimLLM(scenario="vendor_extraction")``.
SCENARIO_DIR = datasets_dir() / "models"


def count_tokens(text: str) -> int:
    """Tokens in `text` by the rule every durablelab model uses: words * 4 / 3, rounded.

    English runs about three words to four tokens; the exact tokenizer does not matter
    for a lesson, only that the count is deterministic and grows with the text.
    ``count_tokens("a b c") == 4``, ``count_tokens("") == 0``.
    """
    return round(len(text.split()) * 4 / 3)


def digest(text: str) -> str:
    """A short, stable fingerprint of a prompt, for the ledger and the malformed draw."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class TokenBucket:
    """A rate limiter in the engine's time: `burst` requests at once, then `rate` a second.

    The bucket holds up to `burst` tokens and gains `rate` tokens per second of
    ``clock.now()`` (virtual time under a `VirtualClock`). Each request takes one token.
    With ``rate=2, burst=3``: three requests at t=0 are granted, a fourth at t=0 must wait
    0.5 s; at t=0.25 it must wait 0.25 s; at t=0.5 it is granted.

    One bucket can be shared by several `SimLLM` objects (one provider account, several
    models). `clock` may be left out when the bucket is given to a `SimLLM`, which lends it
    its own.
    """

    #: a token short by less than this still counts: float refills must not turn a wait
    #: of exactly ``retry_after`` into a second, tiny wait.
    EPSILON = 1e-9

    def __init__(self, rate: float, burst: int = 1, clock=None):
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate <= 0:
            raise BadValue(f"TokenBucket(rate={rate!r}): rate must be requests per second > 0")
        if isinstance(burst, bool) or not isinstance(burst, int) or burst < 1:
            raise BadValue(f"TokenBucket(burst={burst!r}): burst must be an int >= 1")
        self.rate, self.burst, self.clock = float(rate), burst, clock
        self.tokens = float(burst)
        self.updated_at = clock.now() if clock is not None else None

    def take(self) -> float:
        """Take a token: 0.0 when granted, else the seconds until one is available."""
        if self.clock is None:
            raise BadValue("TokenBucket has no clock: pass clock=engine.clock, or give the "
                             "bucket to a SimLLM, which lends it its own")
        now = self.clock.now()
        if self.updated_at is None:
            self.updated_at = now
        # max(0, ...): a new engine's clock may start behind this bucket's last look.
        elapsed = max(0.0, now - self.updated_at)
        self.tokens = min(float(self.burst), self.tokens + elapsed * self.rate)
        self.updated_at = now
        if self.tokens >= 1.0 - self.EPSILON:
            self.tokens = max(0.0, self.tokens - 1.0)
            return 0.0
        return (1.0 - self.tokens) / self.rate

    def reset(self) -> None:
        """Fill the bucket again, as of now."""
        self.tokens = float(self.burst)
        self.updated_at = self.clock.now() if self.clock is not None else None

    def __repr__(self) -> str:
        return f"TokenBucket(rate={self.rate:g}/s, burst={self.burst}, tokens={self.tokens:.2f})"


# --- scenarios ---------------------------------------------------------------------------

_KEYS = {"version", "description", "answers", "default", "agents"}
_ANSWER_KEYS = {"match", "answer", "hopeless", "note"}
_AGENT_KEYS = {"match", "steps", "note"}
_STEP_KEYS = {"call", "calls", "mistake", "final", "note"}


def load_scenario(scenario) -> dict:
    """A scenario as a checked dict, from a dict, a file path, or a name in
    ``datasets/models/`` (``"vendor_extraction"``). An unknown key is an error that names
    the key, where it is and, for a file, the file: a typo must not silently do nothing."""
    if scenario is None:
        return {"version": 1, "answers": [], "agents": []}
    source = "the scenario"
    if isinstance(scenario, (str, Path)):
        path = Path(scenario)
        if not path.suffix and not path.exists():
            path = SCENARIO_DIR / f"{scenario}.json"
        source = str(path)
        try:
            scenario = json.loads(path.read_text())
        except OSError as exc:
            raise BadValue(f"cannot read scenario file {source}: {exc}") from None
        except json.JSONDecodeError as exc:
            raise BadValue(f"scenario file {source} is not valid JSON: {exc}") from None
    if not isinstance(scenario, dict):
        raise BadValue(f"{source}: a scenario is a JSON object, got {type(scenario).__name__}")
    scenario = copy.deepcopy(scenario)  # the defaults filled in below stay ours

    def check(obj, allowed, where):
        if not isinstance(obj, dict):
            raise BadValue(f"{source}: {where} must be an object")
        for key in obj:
            if key not in allowed:
                raise BadValue(f"{source}: {where}: unknown key {key!r} "
                                 f"(expected one of {', '.join(sorted(allowed))})")

    check(scenario, _KEYS, "top level")
    if scenario.get("version") != 1:
        raise BadValue(f"{source}: version {scenario.get('version')!r} is not supported "
                         f"(write \"version\": 1)")
    for i, entry in enumerate(scenario.setdefault("answers", [])):
        check(entry, _ANSWER_KEYS, f"answers[{i}]")
        _pattern(entry, source, f"answers[{i}]")
        if "answer" not in entry:
            raise BadValue(f"{source}: answers[{i}] has no 'answer'")
    for i, agent in enumerate(scenario.setdefault("agents", [])):
        check(agent, _AGENT_KEYS, f"agents[{i}]")
        _pattern(agent, source, f"agents[{i}]")
        if not isinstance(agent.get("steps"), list):
            raise BadValue(f"{source}: agents[{i}] needs 'steps', a list")
        for j, step in enumerate(agent["steps"]):
            where = f"agents[{i}].steps[{j}]"
            check(step, _STEP_KEYS, where)
            if sum(key in step for key in ("call", "calls", "final")) != 1:
                raise BadValue(f"{source}: {where} needs one of 'call', 'calls' (several tool "
                               f"calls in one answer) or 'final'")
            if "calls" in step:
                calls = step["calls"]
                if (not isinstance(calls, list) or not calls
                        or not all(isinstance(c, dict) and "name" in c for c in calls)):
                    raise BadValue(f"{source}: {where}: 'calls' is a non-empty list of "
                                   f"{{\"name\", \"arguments\"}} objects")
                if "mistake" in step:
                    raise BadValue(f"{source}: {where}: a 'mistake' goes with one 'call', "
                                   f"not with 'calls'")
    return scenario


def _pattern(entry: dict, source: str = "the scenario", where: str = "") -> re.Pattern:
    try:
        return re.compile(entry["match"], re.IGNORECASE)
    except (KeyError, TypeError, re.error) as exc:
        raise BadValue(f"{source}: {where}: 'match' must be a regular expression "
                         f"({exc})") from None


def _first_match(entries: list[tuple[re.Pattern, dict]], text: str) -> dict | None:
    return next((entry for pattern, entry in entries if pattern.search(text)), None)


# --- the model ---------------------------------------------------------------------------


class SimLLM:
    """A simulated chat model with a ledger, for activities to call.

    Args:
        name: the model's name, in answers and ledger rows ("sim-small").
        clock: anything with ``now()``; pass ``engine.clock`` so the rate limit and the
            ledger run in the engine's (virtual) time.
        scenario: None, a dict, a path, or a name in ``datasets/models/``; see the files
            there for the format (``answers``, ``default``, ``agents``).
        seed: seeds the malformed-output draws.
        prices: dollars per million tokens, ``{"input": ..., "output": ...}``.
        rate_limit: a `TokenBucket` shared by every run that calls this object; when it is
            empty the call raises ``RateLimited(retry_after=seconds until a token)``.
        malformed_rate: probability in [0, 1] that a first-try answer comes back broken.

    Ledger: `calls` (one dict per request: at, model, kind, digest, key, feedback,
    outcome "ok" | "malformed" | "rate_limited", defect, retry_after, input_tokens,
    output_tokens, cost), `usage` (totals over answered calls: calls, input_tokens,
    output_tokens, cost; and rate_limited, the refused requests, which cost nothing).
    """

    def __init__(self, name: str = "sim-small", *, clock, scenario=None, seed: int = 0,
                 prices: dict | None = None, rate_limit: TokenBucket | None = None,
                 malformed_rate: float = 0.0):
        if not hasattr(clock, "now"):
            raise BadType(f"SimLLM({name!r}): clock={clock!r} has no now(); pass engine.clock")
        prices = dict(DEFAULT_PRICES if prices is None else prices)
        if set(prices) != {"input", "output"} or not all(
                isinstance(v, (int, float)) and v >= 0 for v in prices.values()):
            raise BadValue(f"SimLLM({name!r}): prices={prices!r} must be "
                             f"{{'input': $/1M tokens, 'output': $/1M tokens}}, both >= 0")
        if not isinstance(malformed_rate, (int, float)) or not 0.0 <= malformed_rate <= 1.0:
            raise BadValue(f"SimLLM({name!r}): malformed_rate={malformed_rate!r} must be a "
                             f"probability in [0, 1]")
        if rate_limit is not None and rate_limit.clock is None:
            rate_limit.clock = clock
            rate_limit.updated_at = clock.now()
        self.name, self.clock, self.seed = name, clock, seed
        self.scenario = load_scenario(scenario)
        self._answers = [(_pattern(e), e) for e in self.scenario["answers"]]
        self._agents = [(_pattern(a), a) for a in self.scenario["agents"]]
        self.prices, self.rate_limit, self.malformed_rate = prices, rate_limit, malformed_rate
        self.calls: list[dict] = []
        self.usage: dict = {}
        self._answered: Counter = Counter()   # prompt digest -> answers given so far
        self.reset()

    # --- chat completion -------------------------------------------------------------------
    def complete(self, prompt: str, *, feedback: str | None = None,
                 idempotency_key: str | None = None) -> dict:
        """Answer `prompt`: ``{"model", "text", "usage": {input_tokens, output_tokens, cost}}``.

        Usable directly as an activity (``ctx.activity("ask", llm.complete, prompt)``).
        `feedback` is the previous attempt's validation error: the call is then a repair and
        the scripted answer comes back intact (unless the scenario marks the prompt
        hopeless for this model). The model reads the feedback, so it counts as input
        tokens, once, whether or not the prompt already quotes it. `idempotency_key` is only
        recorded: like most model APIs, this one does not deduplicate.

        Raises `RateLimited` (with ``retry_after`` seconds) when the rate limit is empty.
        """
        prompt_digest = digest(prompt)
        row = self._admit("complete", prompt_digest, idempotency_key, feedback)
        entry = _first_match(self._answers, prompt)
        answer = entry["answer"] if entry else self.scenario.get("default", DEFAULT_ANSWER)
        text = answer if isinstance(answer, str) else json.dumps(answer)
        asked_before = self._answered[prompt_digest]
        rng = random.Random(f"llm:{self.seed}:{self.name}:{prompt_digest}:{asked_before}")
        self._answered[prompt_digest] += 1
        hopeless = entry is not None and _hopeless(entry.get("hopeless"), self.name)
        if hopeless or (feedback is None and rng.random() < self.malformed_rate):
            row["defect"] = rng.choice(_defects(answer))
            text = _break(text, answer, row["defect"], rng)
        seen = prompt if not feedback or feedback in prompt else f"{prompt}\n{feedback}"
        return self._answer(row, {"model": self.name, "text": text}, seen, text)

    # --- agent -----------------------------------------------------------------------------
    def agent_step(self, messages: list[dict], tools: list[str], *,
                   idempotency_key: str | None = None) -> dict:
        """Choose the agent's next move from the scenario's scripted policy.

        `messages` is the conversation so far: ``{"role": "user", "content": ...}`` first,
        then for each tool call made ``{"role": "tool", "name": ..., "content": result}``
        or, when the tool failed, ``{"role": "tool", "name": ..., "error": message}``.
        Returns ``{"model", "tool_calls": [{"name", "arguments"}], "usage"}`` or
        ``{"model", "final": text, "usage"}``.

        The policy is the ``steps`` list of the first agent whose ``match`` is found in the
        first user message. The step to play is the number of tool calls that succeeded so
        far. A step with a ``mistake`` plays that (wrong) call first; once the tool has
        answered it with an error, the step's correct ``call`` follows, which is the
        recovery a lesson wants to show. Raises `RateLimited` like `complete`.
        """
        first = next((m.get("content", "") for m in messages if m.get("role") == "user"), "")
        seen = " ".join([*(str(m.get("content", m.get("error", ""))) for m in messages), *tools])
        row = self._admit("agent_step", digest(json.dumps([messages, tools], sort_keys=True)),
                          idempotency_key, None)
        agent = _first_match(self._agents, first)
        results = [m for m in messages if m.get("role") == "tool"]
        move = (_next_move(agent["steps"], results, tools) if agent is not None
                else {"final": self.scenario.get("default", DEFAULT_ANSWER)})
        return self._answer(row, {"model": self.name, **move}, seen, json.dumps(move))

    def __call__(self, messages: list[dict], tools: list[dict], feedback: str | None = None,
                 idempotency_key: str | None = None) -> dict:
        """The agent model interface of `dl.agents.react`: the scripted agent's next move.

        `messages` are chat messages (user first; ``{"role": "tool", "tool_call_id",
        "name", "content": JSON text}`` for each tool result, an ``{"error": ...}`` object
        when the tool failed or was not approved); `tools` are ``{"name", "description",
        "parameters"}``. Returns ``{"model", "content", "tool_calls": [{"id", "name",
        "arguments"}], "usage"}``: either tool calls, or a final ``content``.

        The policy is the ``steps`` of the first scenario agent whose ``match`` is found in
        the first user message; the step to play is the number of tool calls that succeeded
        (a step with ``calls`` asks for several tools in one answer, and takes as many).
        A step's ``mistake`` (a misspelled argument, say) is played the first time a
        conversation is seen; when the agent loop rejects it, the call comes back with
        ``feedback=`` (the validation error) and the step's correct ``call`` is played (as
        it is when the same conversation is asked again, after a 429 say). A tool that was
        not approved ends the script with an answer that says so. With ``malformed_rate=p`` a first-try call comes back
        with broken arguments (a renamed field, or truncated JSON text) with probability p,
        drawn like `complete`'s defects. Raises `RateLimited` like `complete`.
        """
        names = [t["name"] for t in tools]
        first = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
        seen = " ".join([*(str(m.get("content") or "") for m in messages),
                         *(json.dumps(m["tool_calls"]) for m in messages if m.get("tool_calls")),
                         *(json.dumps(t, sort_keys=True) for t in tools),
                         *([feedback] if feedback else [])])
        conversation = json.dumps([messages, tools], sort_keys=True)
        row = self._admit("agent", digest(conversation), idempotency_key, feedback)
        agent = _first_match(self._agents, first)
        results = [{"name": m.get("name"), **_observation(m.get("content"))}
                   for m in messages if m.get("role") == "tool"]
        refused = next((r for r in reversed(results) if "not approved" in str(r.get("error"))),
                       None)
        if refused is not None:
            move = {"final": f"I could not finish: {refused['name']} was not approved, so I "
                             f"stopped there."}
        elif agent is None:
            move = {"final": self.scenario.get("default", DEFAULT_ANSWER)}
        else:
            # Asked the same conversation again (a retry after a 429, a lost answer), the
            # model does not repeat its mistake; told what was wrong, it fixes it.
            again = self._answered[digest(conversation)] > 0
            move = _next_move(agent["steps"], results, names, repaired=feedback is not None
                              or again)
        if "tool_calls" in move:
            key = digest(conversation)
            asked_before = self._answered[key]
            self._answered[key] += 1
            calls = [{"id": f"call_{asked_before}_{i + 1}", **c}
                     for i, c in enumerate(move["tool_calls"])]
            rng = random.Random(f"agent:{self.seed}:{self.name}:{key}:{asked_before}")
            if feedback is None and rng.random() < self.malformed_rate:
                row["defect"] = rng.choice(("schema", "truncated"))
                calls[0] = {**calls[0], "arguments": _break_arguments(
                    calls[0]["arguments"], row["defect"], rng)}
            reply = {"model": self.name, "content": None, "tool_calls": calls}
        else:
            reply = {"model": self.name, "content": move["final"], "tool_calls": []}
        said = json.dumps({k: reply[k] for k in ("content", "tool_calls")}, sort_keys=True)
        return self._answer(row, reply, seen, said)

    # --- ledger ----------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget every call and refill the rate limit: a fresh model with the same seed."""
        self.calls.clear()
        self.usage.clear()
        self.usage.update(calls=0, input_tokens=0, output_tokens=0, cost=0.0, rate_limited=0)
        self._answered.clear()
        if self.rate_limit is not None:
            self.rate_limit.reset()

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """Dollars for a call of that size, from the price table (per million tokens)."""
        return (input_tokens * self.prices["input"]
                + output_tokens * self.prices["output"]) / 1_000_000

    def _admit(self, kind: str, prompt_digest: str, idempotency_key, feedback) -> dict:
        """Start a ledger row; refuse the request if the rate limit is empty."""
        row = {"at": self.clock.now(), "model": self.name, "kind": kind, "digest": prompt_digest,
               "key": idempotency_key, "feedback": feedback, "outcome": "ok", "defect": None,
               "retry_after": None, "input_tokens": 0, "output_tokens": 0, "cost": 0.0}
        wait = self.rate_limit.take() if self.rate_limit is not None else 0.0
        if wait > 0:
            row.update(outcome="rate_limited", retry_after=wait)
            self.calls.append(row)
            self.usage["rate_limited"] += 1
            raise RateLimited(f"{self.name}: rate limit reached ({self.rate_limit.rate:g} "
                              f"requests/s, burst {self.rate_limit.burst}); retry after "
                              f"{wait:.3g}s", retry_after=wait)
        return row

    def _answer(self, row: dict, reply: dict, seen: str, said: str) -> dict:
        tokens_in, tokens_out = count_tokens(seen), count_tokens(said)
        usage = {"input_tokens": tokens_in, "output_tokens": tokens_out,
                 "cost": self.cost(tokens_in, tokens_out)}
        row.update(usage, outcome="malformed" if row["defect"] else "ok")
        self.calls.append(row)
        for field, value in usage.items():
            self.usage[field] += value
        self.usage["calls"] += 1
        return {**reply, "usage": usage}

    def __repr__(self) -> str:
        broken = sum(1 for c in self.calls if c["outcome"] == "malformed")
        return (f"SimLLM({self.name!r}, seed={self.seed}: {self.usage['calls']} calls, "
                f"{broken} malformed, {self.usage['rate_limited']} rate limited, "
                f"{self.usage['input_tokens'] + self.usage['output_tokens']} tokens, "
                f"${self.usage['cost']:.6f})")


def _hopeless(flag, model: str) -> bool:
    """A scenario's ``hopeless``: true (every model) or a list of model names."""
    return flag is True or (isinstance(flag, list) and model in flag)


def _defects(answer: Any) -> tuple[str, ...]:
    # Only an object has a field to rename; any other answer can still be cut or refused.
    return DEFECTS if isinstance(answer, dict) and answer else ("truncated", "refusal")


def _break(text: str, answer: Any, defect: str, rng: random.Random) -> str:
    if defect == "refusal":
        return REFUSAL
    if defect == "truncated":
        # A strict prefix of a JSON object is never valid JSON: the parser must notice.
        return text[:rng.randint(1, max(1, len(text) - 1))]
    field = rng.choice(sorted(answer))
    head, *rest = field.split("_")
    renamed = head + "".join(p.title() for p in rest) if rest else field.title()
    return json.dumps({renamed if k == field else k: v for k, v in answer.items()})


def _observation(content) -> dict:
    """A tool message's content as a dict: ``{"error": ...}`` marks a failed call."""
    try:
        value = json.loads(content) if isinstance(content, str) else content
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) and "error" in value else {}


def _break_arguments(arguments: dict, defect: str, rng: random.Random):
    text = json.dumps(arguments)
    if defect == "truncated" or not arguments:
        return text[:rng.randint(1, max(1, len(text) - 1))]
    field = rng.choice(sorted(arguments))
    return {(field.replace("_", "") if "_" in field else field.title()) if k == field else k: v
            for k, v in arguments.items()}


def _next_move(steps: list[dict], results: list[dict], tools: list[str],
               repaired: bool = False) -> dict:
    """The scripted move after `results` (one dict per tool result, ``"error"`` in a failed
    one). A step's ``mistake`` comes first; it is corrected after a tool error, or at once
    when the call is a repair (`repaired`: the agent loop sent the validation error back)."""
    done = sum(1 for m in results if "error" not in m)
    # A step of several calls ('calls') takes as many successes as it has calls; one that
    # only partly succeeded asks again for the calls still missing.
    for step in steps:
        size = len(step["calls"]) if "calls" in step else 1
        if "final" in step or done < size:
            break
        done -= size
    else:
        return {"final": "I have done everything I was asked to do."}
    if "final" in step:
        return {"final": step["final"]}
    if "calls" in step:
        missing = [c["name"] for c in step["calls"][done:] if c["name"] not in tools]
        if missing:
            return {"final": f"I cannot finish: I need the tool {missing[0]!r}, which I was "
                             f"not given."}
        return {"tool_calls": [{"name": c["name"], "arguments": c.get("arguments", {})}
                               for c in step["calls"][done:]]}
    # Errors since the last success belong to this step: one means the mistake was made.
    since = 0
    for m in reversed(results):
        if "error" not in m:
            break
        since += 1
    wrong = "mistake" in step and since == 0 and not repaired
    call = step["mistake"] if wrong else step["call"]
    if call["name"] not in tools:
        return {"final": f"I cannot finish: I need the tool {call['name']!r}, which I was "
                         f"not given."}
    return {"tool_calls": [{"name": call["name"], "arguments": call.get("arguments", {})}]}


__all__ = ["SimLLM", "TokenBucket", "count_tokens", "load_scenario", "DEFAULT_PRICES",
           "DEFECTS"]
