"""Fault plans: break a workflow on purpose, without touching its code.

A `FaultPlan` is a list of rules. Each rule names an activity (exactly, or with a glob
such as ``"charge_*"``) and says what goes wrong there: a 429, a 5xx, a reset connection,
a lost answer (`Timeout`), no answer at all (`Hang`), extra latency, a broken model answer
(`Malformed`), or a worker crash at a named point. Rules are checked in order: `Latency`
adds time and lets the call go on; the first other rule that fires decides the attempt. Whether a rule fires on an attempt is a
pure function of (run seed, rule index, position, attempt), so a plan plus a seed always
breaks a run the same way, and a crash-and-replay sees the same faults it saw before.

Crash points, in the order an attempt passes them:

- ``before_activity``: the worker dies before the attempt starts;
- ``after_effect``: the activity's side effect happened but its result was not recorded:
  the window that idempotency keys exist for;
- ``after_record``: the result was recorded (committed, in ``sync`` mode), then the worker died;
- ``during_wait``: the worker dies halfway through a durable timer, a signal wait or a
  retry backoff (a wait's rule matches ``"sleep"``, the signal's name, or the activity).

A crash rule fires at most once per (rule, position, attempt): the worker that recovers
passes the same point again, and dying there forever would teach nothing.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field, fields
from pathlib import Path

from .draws import Draws
from .errors import ModelOutputError, RateLimited, Transient

CRASH_POINTS = ("before_activity", "after_effect", "after_record", "during_wait")


@dataclass(frozen=True)
class Rule:
    """What every rule has: where it applies and how often it fires."""

    #: activity name or glob ("charge_*", "*").
    activity: str
    #: which attempt numbers (1-based) it applies to; None means all.
    attempts: tuple | None = None
    #: probability that it fires on an attempt it applies to.
    p: float = 1.0
    #: the most times it may fire in one run; None means no limit.
    times: int | None = None

    def __post_init__(self):
        where = f"{type(self).__name__}({self.activity!r})"
        if not isinstance(self.activity, str) or not self.activity:
            raise ValueError(f"{where}: activity must be a non-empty name or glob")
        if self.attempts is not None:
            attempts = (self.attempts,) if isinstance(self.attempts, int) else tuple(self.attempts)
            if not all(isinstance(a, int) and a >= 1 for a in attempts):
                raise ValueError(f"{where}: attempts={self.attempts!r} must be attempt "
                                 f"numbers >= 1 (attempts count from 1)")
            object.__setattr__(self, "attempts", attempts)
        if not isinstance(self.p, (int, float)) or not 0.0 <= self.p <= 1.0:
            raise ValueError(f"{where}: p={self.p!r} must be a probability in [0, 1]")
        if self.times is not None and (not isinstance(self.times, int) or self.times < 0):
            raise ValueError(f"{where}: times={self.times!r} must be an int >= 0 or None")

    def applies(self, name: str, attempt: int) -> bool:
        if self.attempts is not None and attempt not in self.attempts:
            return False
        return name == self.activity or fnmatch.fnmatchcase(name, self.activity)

    def to_dict(self) -> dict:
        data = {"type": type(self).__name__}
        for f in fields(self):
            value = getattr(self, f.name)
            if value != f.default:
                data[f.name] = list(value) if isinstance(value, tuple) else value
        data.setdefault("activity", self.activity)
        return data


@dataclass(frozen=True)
class RateLimit(Rule):
    """HTTP 429 instead of a call; the function does not run."""

    #: seconds the server asks to wait (Retry-After), or None.
    retry_after: float | None = None

    def error(self):
        hint = f" (Retry-After: {self.retry_after:g} s)" if self.retry_after is not None else ""
        return RateLimited(f"injected 429 Too Many Requests{hint}",
                           retry_after=self.retry_after, cause_class="RateLimit")


@dataclass(frozen=True)
class ServerError(Rule):
    """HTTP 5xx instead of a call; the function does not run."""

    status: int = 503

    def error(self):
        return Transient(f"injected HTTP {self.status} server error", cause_class="ServerError")


@dataclass(frozen=True)
class ConnectionReset(Rule):
    """The connection drops before the call reaches the service; the function does not run."""

    def error(self):
        return Transient("injected connection reset by peer", cause_class="ConnectionReset")


@dataclass(frozen=True)
class Timeout(Rule):
    """The call runs (its effect happens) but its answer is lost: the attempt ends as a
    time-out when its start-to-close (or schedule-to-close, or the run's time-out) expires."""


@dataclass(frozen=True)
class Hang(Rule):
    """Nothing answers and the function does not run: the attempt ends as a time-out when its
    start-to-close (or schedule-to-close, or the run's time-out) expires, and never without
    one. That is the lesson: an activity without a time-out can hang a run forever."""


MALFORMED_KINDS = ("truncated", "schema", "refusal")


@dataclass(frozen=True)
class Malformed(Rule):
    """The call runs (its cost is paid) and its answer comes back broken: truncated JSON, a
    schema violation, or a refusal. The attempt fails as a ModelOutputError."""

    kind: str = "truncated"

    def __post_init__(self):
        super().__post_init__()
        if self.kind not in MALFORMED_KINDS:
            raise ValueError(f"Malformed({self.activity!r}): kind={self.kind!r} is not one of "
                             f"{', '.join(MALFORMED_KINDS)}")

    def error(self, answer_json: str | None):
        answer = answer_json or ""
        broken = {"truncated": f"answer cut off mid-JSON: {answer[:max(1, len(answer) // 2)]!r}",
                  "schema": "answer does not match the schema: a required field is missing",
                  "refusal": "the model refused: 'I can't help with that request.'"}[self.kind]
        return ModelOutputError(f"injected malformed output ({self.kind}): {broken}",
                                cause_class="Malformed")


@dataclass(frozen=True)
class Latency(Rule):
    """The attempt takes `seconds` longer (uniform up to `max_seconds` when given) and
    then runs normally."""

    seconds: float = 1.0
    max_seconds: float | None = None

    def draw(self, rng: Draws) -> float:
        if self.max_seconds is None:
            return float(self.seconds)
        return rng.uniform(self.seconds, self.max_seconds)


@dataclass(frozen=True)
class Crash(Rule):
    """The whole worker dies at `point` (see the module docstring)."""

    point: str = "before_activity"

    def __post_init__(self):
        super().__post_init__()
        if self.point not in CRASH_POINTS:
            raise ValueError(f"Crash({self.activity!r}): point={self.point!r} is not one of "
                             f"{', '.join(CRASH_POINTS)}")


RULE_TYPES = {cls.__name__: cls for cls in (RateLimit, ServerError, ConnectionReset, Timeout,
                                            Hang, Latency, Malformed, Crash)}


def draw(seed: int, index: int, position: int, attempt: int) -> Draws:
    """The draws for one (run seed, rule index, position, attempt): the same every time.
    The first decides whether the rule fires; a `Latency` range takes the second."""
    return Draws(f"fault:{seed}:{index}:{position}:{attempt}")


@dataclass
class FaultPlan:
    """An ordered list of rules, applied to any activity whose name they match."""

    rules: list = field(default_factory=list)
    # (activity name, attempt, crash point) -> the (index, rule) pairs that apply there.
    _applicable: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _json: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        self.rules = list(self.rules)
        for i, rule in enumerate(self.rules):
            if not isinstance(rule, Rule):
                raise TypeError(f"FaultPlan rule {i} is {rule!r}, not a rule such as "
                                f"Crash('charge', point='after_effect')")

    def applicable(self, name: str, attempt: int, point: str | None = None) -> tuple:
        """The (index, rule) pairs that apply to this attempt of `name`: with no `point`,
        the rules drawn when the attempt starts (all but crashes); with one, the crash
        rules at that point. Cached, like `to_json`, since a sweep asks the same question
        thousands of times: edit a plan's rules before its first run, not after."""
        key = (name, attempt, point)
        found = self._applicable.get(key)
        if found is None:
            found = self._applicable[key] = tuple(
                (i, rule) for i, rule in enumerate(self.rules)
                if (rule.point == point if isinstance(rule, Crash) else point is None)
                and rule.applies(name, attempt))
        return found

    # --- JSON --------------------------------------------------------------------------
    def to_json(self) -> str:
        """The plan as compact JSON (computed once: every run started with it stores it)."""
        if self._json is None:
            self._json = json.dumps({"version": 1, "rules": [r.to_dict() for r in self.rules]},
                                    indent=None, separators=(",", ":"))
        return self._json

    @classmethod
    def from_json(cls, text_or_path: str | Path) -> "FaultPlan":
        """Load a plan from JSON text or a file. Unknown keys, types and values are errors
        that name the file, the rule and the field."""
        source = "fault plan JSON"
        text = str(text_or_path)
        if isinstance(text_or_path, Path) or not text.lstrip().startswith("{"):
            source = f"fault plan file {text}"
            try:
                text = Path(text_or_path).read_text()
            except OSError as exc:
                raise ValueError(f"cannot read {source}: {exc}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{source} is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ValueError(f"{source}: expected an object with 'version' and 'rules'")
        unknown = set(data) - {"version", "rules"}
        if unknown:
            raise ValueError(f"{source}: unknown key {sorted(unknown)[0]!r} at the top level "
                             f"(allowed: 'version', 'rules')")
        if data.get("version") != 1:
            raise ValueError(f"{source}: version {data.get('version')!r} is not supported "
                             f"(this durablelab reads version 1)")
        rules = []
        for i, raw in enumerate(data.get("rules", [])):
            where = f"{source}, rule {i}"
            if not isinstance(raw, dict) or "type" not in raw:
                raise ValueError(f"{where}: each rule is an object with a 'type'")
            kind = RULE_TYPES.get(raw["type"])
            if kind is None:
                raise ValueError(f"{where}: unknown type {raw['type']!r} (known: "
                                 f"{', '.join(RULE_TYPES)})")
            known = {f.name for f in fields(kind)}
            args = {k: v for k, v in raw.items() if k != "type"}
            for key in args:
                if key not in known:
                    raise ValueError(f"{where} ({raw['type']}): unknown field {key!r} "
                                     f"(known: {', '.join(sorted(known))})")
            try:
                rules.append(kind(**args))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{where}: {exc}") from None
        return cls(rules)

    def __iter__(self):
        return iter(self.rules)

    def __len__(self):
        return len(self.rules)


__all__ = ["FaultPlan", "Rule", "RateLimit", "ServerError", "ConnectionReset", "Timeout",
           "Hang", "Latency", "Malformed", "Crash", "CRASH_POINTS", "draw"]
