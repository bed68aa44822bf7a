"""Fault plans: break a workflow on purpose, without touching its code.

A `FaultPlan` is a list of rules. Each rule names an activity (exactly, or with a glob
such as ``"charge_*"``) and says what goes wrong there: a 429, a 5xx, a reset connection,
a lost answer (`Timeout`), no answer at all (`Hang`), extra latency, a broken model answer
(`Malformed`), a given error class or HTTP status (`Fail`: a 400, a 401, a 404, a 500),
or a worker crash at a named point. Rules are checked in order: `Latency` adds time and
lets the call go on; the first other rule that fires decides the attempt. Whether a rule
fires on an attempt is a pure function of (run seed, rule index, position, attempt), so a
plan plus a seed always breaks a run the same way, and a crash-and-replay sees the same
faults it saw before. Two runs with the same seed therefore meet the same faults, which is
what a fair comparison of two policies wants; ``FaultPlan(rules, per_run=True)`` adds the
run id to the draws, so runs sharing a seed (many clients of one experiment) draw apart.

A rule narrows where it applies with ``attempts=`` (attempt numbers, from 1),
``position=`` (history positions, from 1: the position an activity's event takes, which is
also the number in its idempotency key) and ``between=(start, end)`` (virtual seconds: the
rule fires only on attempts, or at crash points, reached at ``start <= now < end``, so a
spike of failures can begin and end). Together they pin one attempt of one call:
``Fail("charge", status=500, position=3, attempts=[1, 2])`` fails the first two attempts of
the charge at position 3 and nothing else, which is how `dl.counterfactual` meets a recorded
run's failures again and how `dl.explore_crashes` crashes one point at a time.

Crash points, in the order an attempt passes them:

- ``before_activity``: the worker dies before the attempt starts;
- ``after_effect``: the activity's side effect happened but its result was not recorded:
  the window that idempotency keys exist for;
- ``after_record``: the result was recorded (committed, in ``sync`` mode), then the worker died;
- ``during_wait``: the worker dies halfway through a durable timer, a signal wait or a
  retry backoff (a wait's rule matches ``"sleep"``, the signal's name, or the activity).

A child run's start (``ctx.start_child``, ``ctx.child``) has two of them: a rule naming the
child's workflow crashes ``before_activity`` (the parent recorded the start, the child run
does not exist yet) or ``after_effect`` (the child run exists).

A crash rule fires at most once per (rule, position, attempt): the worker that recovers
passes the same point again, and dying there forever would teach nothing.
"""

from __future__ import annotations

import fnmatch
import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path

from .draws import Draws
from .errors import (ModelOutputError, NonRetryable, RateLimited, Transient, bad_type,
                     bad_value, check_int, check_probability, check_seconds, plan_error)

CRASH_POINTS = ("before_activity", "after_effect", "after_record", "during_wait")


@dataclass(frozen=True)
class Rule:
    """What every rule has: where it applies and how often it fires."""

    #: activity name or glob ("charge_*", "*").
    activity: str
    # Keywords only: the activity comes first, then each rule's own fields in order
    # (``Latency("fetch", 2.0)``, ``Crash("charge", "after_effect")``).
    #: which attempt numbers (1-based) it applies to; None means all.
    attempts: tuple | None = field(default=None, kw_only=True)
    #: probability that it fires on an attempt it applies to.
    p: float = field(default=1.0, kw_only=True)
    #: the most times it may fire in one run; None means no limit.
    times: int | None = field(default=None, kw_only=True)
    #: which history positions (1-based) it applies to; None means all.
    position: tuple | None = field(default=None, kw_only=True)
    #: (start, end) in virtual seconds: it fires only at ``start <= now < end``; None: always.
    between: tuple | None = field(default=None, kw_only=True)

    def __post_init__(self):
        where = f"{type(self).__name__}({self.activity!r})"
        if not isinstance(self.activity, str) or not self.activity:
            raise bad_type(where, "activity", "the activity must be a non-empty name or glob "
                                              "(\"charge\", \"charge_*\", \"*\")")
        for name, what in (("attempts", "attempt numbers >= 1 (attempts count from 1), for "
                                        "example attempts=[1, 2]"),
                           ("position", "history positions >= 1 (positions count from 1)")):
            value = getattr(self, name)
            if value is None:
                continue
            numbers = (value,) if isinstance(value, int) and not isinstance(value, bool) \
                else tuple(value) if isinstance(value, (list, tuple, range)) else None
            if numbers is None or not all(isinstance(n, int) and not isinstance(n, bool)
                                          and n >= 1 for n in numbers):
                raise bad_value(where, name, f"{name}={value!r} must be {what}")
            object.__setattr__(self, name, numbers)
        object.__setattr__(self, "p", check_probability(self.p, where))
        check_int(self.times, where, "times", 0, none_ok=True,
                  what=" (how often the rule may fire in one run)")
        if self.between is not None:
            object.__setattr__(self, "between", _window(self.between, where))

    def applies(self, name: str, attempt: int, position: int | None = None) -> bool:
        """Whether the rule applies to this attempt of `name` (at `position`, when given)."""
        if self.attempts is not None and attempt not in self.attempts:
            return False
        if position is not None and self.position is not None and position not in self.position:
            return False
        return name == self.activity or fnmatch.fnmatchcase(name, self.activity)

    def active_at(self, now: float) -> bool:
        """Whether `now` (virtual seconds) is inside the rule's ``between`` window."""
        return self.between is None or self.between[0] <= now < self.between[1]

    def failure(self):
        """The error an attempt meets when this rule decides it without running the
        function (429, 5xx, reset, `Fail`)."""
        return self.error()

    def to_dict(self) -> dict:
        data = {"type": type(self).__name__}
        for f in fields(self):
            value = getattr(self, f.name)
            if value != f.default:
                data[f.name] = list(value) if isinstance(value, tuple) else value
        data.setdefault("activity", self.activity)
        return data


def _window(value, where: str) -> tuple[float, float]:
    """`between` as (start, end) seconds, checked: two finite numbers, end after start."""
    if not isinstance(value, (list, tuple)) or len(value) != 2 or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        raise bad_type(where, "between", f"between={value!r} must be (start, end): two numbers "
                                         f"of virtual seconds, such as between=(20, 25)")
    start, end = (float(v) for v in value)
    if not (math.isfinite(start) and math.isfinite(end)):
        raise bad_value(where, "between", f"between={value!r} must hold finite seconds (an "
                                          f"infinite time cannot be stored in a plan's JSON)")
    if end <= start:
        raise bad_value(where, "between", f"between={value!r} ends before it starts (or as it "
                                          f"starts): give (start, end) with end after start, "
                                          f"such as between=({start:g}, {start + 5:g})")
    return start, end


@dataclass(frozen=True)
class RateLimit(Rule):
    """HTTP 429 instead of a call; the function does not run."""

    #: seconds the server asks to wait (Retry-After), or None.
    retry_after: float | None = None

    def __post_init__(self):
        super().__post_init__()
        check_seconds(self.retry_after, f"RateLimit({self.activity!r})", "retry_after",
                      none_ok=True)

    def error(self):
        hint = f" (Retry-After: {self.retry_after:g} s)" if self.retry_after is not None else ""
        return RateLimited(f"injected 429 Too Many Requests{hint}",
                           retry_after=self.retry_after, cause_class="RateLimit")


@dataclass(frozen=True)
class ServerError(Rule):
    """HTTP 5xx instead of a call; the function does not run."""

    status: int = 503

    def __post_init__(self):
        super().__post_init__()
        check_int(self.status, f"ServerError({self.activity!r})", "status", 500,
                  what=" (an HTTP 5xx status such as 503)")
        if self.status > 599:
            raise bad_value(f"ServerError({self.activity!r})", "status",
                            f"status={self.status!r} must be an HTTP 5xx status (500-599)")

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
            raise bad_value(f"Malformed({self.activity!r})", "kind",
                            f"kind={self.kind!r} is not one of {', '.join(MALFORMED_KINDS)}")

    def error(self, answer_json: str | None):
        answer = answer_json or ""
        broken = {"truncated": f"answer cut off mid-JSON: {answer[:max(1, len(answer) // 2)]!r}",
                  "schema": "answer does not match the schema: a required field is missing",
                  "refusal": "the model refused: 'I can't help with that request.'"}[self.kind]
        try:    # the call ran and was paid for: its usage, if it reported one, counts
            usage = json.loads(answer_json).get("usage") if answer_json else None
        except (ValueError, AttributeError):
            usage = None
        return ModelOutputError(f"injected malformed output ({self.kind}): {broken}",
                                cause_class="Malformed",
                                usage=usage if isinstance(usage, dict) else None)


#: the error classes `Fail` can inject, and the HTTP status each stands for by default.
FAIL_ERRORS = {"NonRetryable": NonRetryable, "Transient": Transient,
               "RateLimited": RateLimited, "ModelOutputError": ModelOutputError}
_REASONS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            409: "Conflict", 422: "Unprocessable Entity", 429: "Too Many Requests",
            500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
            504: "Gateway Timeout"}


def error_for_status(status: int) -> str:
    """The retry class `dl.classify` gives an HTTP status: 429 RateLimited, 5xx Transient,
    other 4xx NonRetryable."""
    if status == 429:
        return "RateLimited"
    return "Transient" if status >= 500 else "NonRetryable"


@dataclass(frozen=True)
class Fail(Rule):
    """A given failure instead of a call; the function does not run.

    `error` names the retry class (``"NonRetryable"``, ``"Transient"``, ``"RateLimited"``,
    ``"ModelOutputError"``); `status`, an HTTP status from 400 to 599, says it as a server
    would, and then decides the class the way `dl.classify` does (429 rate limited, 5xx
    transient, any other 4xx not retryable): ``Fail("erp", status=401)`` is a rejected
    credential that no retry can cure, ``Fail("erp", status=500)`` a blip worth retrying.
    Giving both is allowed only when they agree. `message` is the error's text, so a failure
    recorded last night (its class and message, from `run.attempts`) can be met again;
    `retry_after` (seconds, for a rate limit only) is the server's Retry-After.
    """

    error: str = "NonRetryable"
    status: int | None = None
    message: str | None = None
    retry_after: float | None = None

    def __post_init__(self):
        super().__post_init__()
        where = f"Fail({self.activity!r})"
        if self.error not in FAIL_ERRORS:
            raise bad_value(where, None, f"error={self.error!r} is not one of "
                            f"{', '.join(FAIL_ERRORS)}")
        if self.status is not None:
            if isinstance(self.status, bool) or not isinstance(self.status, int) \
                    or not 400 <= self.status <= 599:
                raise bad_value(where, None, f"status={self.status!r} must be an HTTP error "
                                f"status from 400 to 599 (e.g. 400, 401, 404, 429, 500, 503)")
            implied = error_for_status(self.status)
            if self.error not in (implied, "NonRetryable"):
                raise bad_value(where, None, f"error={self.error!r} contradicts status="
                                f"{self.status} (HTTP {self.status} is {implied}); give "
                                f"one of them, or both agreeing")
            object.__setattr__(self, "error", implied)
        if self.message is not None and not isinstance(self.message, str):
            raise bad_value(where, None, f"message={self.message!r} must be a string")
        if self.retry_after is not None:
            if isinstance(self.retry_after, bool) or not isinstance(
                    self.retry_after, (int, float)) or not 0 <= self.retry_after < float("inf"):
                raise bad_value(where, None, f"retry_after={self.retry_after!r} must be seconds "
                                f">= 0")
            if self.error != "RateLimited":
                raise bad_value(where, None, f"retry_after= goes with a rate limit (error="
                                f"'RateLimited' or status=429), not {self.error}")

    def failure(self):
        """The error this rule injects (a fresh instance each time)."""
        text = self.message
        if text is None:
            text = (f"injected HTTP {self.status} {_REASONS.get(self.status, '')}".rstrip()
                    if self.status is not None else f"injected {self.error}")
        if self.error == "RateLimited":
            return RateLimited(text, retry_after=self.retry_after, cause_class="Fail")
        return FAIL_ERRORS[self.error](text, cause_class="Fail")


LATENCY_DISTRIBUTIONS = ("uniform", "normal", "exponential")


@dataclass(frozen=True)
class Latency(Rule):
    """The attempt takes longer, then runs normally. How much longer, by `distribution`:

    - ``"uniform"`` (the default): exactly `seconds`, or uniform in [seconds, max_seconds]
      when `max_seconds` is given;
    - ``"normal"``: mean `seconds`, standard deviation `sd` (required); a draw below 0 is
      folded to its absolute value, as in Brooker's |N(10 ms, 2 ms)| network, since an
      attempt cannot end before it starts;
    - ``"exponential"``: mean `seconds` (a memoryless delay: many short, a few long).
    """

    seconds: float = 1.0
    max_seconds: float | None = None
    distribution: str = "uniform"
    sd: float | None = None

    def __post_init__(self):
        # A negative latency would end an attempt before it started: history runs backwards.
        super().__post_init__()
        where = f"Latency({self.activity!r})"
        check_seconds(self.seconds, where, "seconds")
        check_seconds(self.max_seconds, where, "max_seconds", none_ok=True)
        check_seconds(self.sd, where, "sd", none_ok=True)
        if self.max_seconds is not None and self.max_seconds < self.seconds:
            raise bad_value(where, "max_seconds", f"max_seconds={self.max_seconds!r} is below "
                                                  f"seconds={self.seconds!r}; the latency is "
                                                  f"drawn from [seconds, max_seconds]")
        if self.distribution not in LATENCY_DISTRIBUTIONS:
            raise bad_value(where, "distribution", f"distribution={self.distribution!r} is not "
                                                   f"one of {', '.join(LATENCY_DISTRIBUTIONS)}")
        if self.distribution == "normal" and self.sd is None:
            raise bad_value(where, "sd", "distribution='normal' needs sd= (its standard "
                                         "deviation in seconds, e.g. seconds=0.010, sd=0.002)")
        if self.distribution != "normal" and self.sd is not None:
            raise bad_value(where, "sd", f"sd= goes with distribution='normal', not "
                                         f"{self.distribution!r}")
        if self.distribution != "uniform" and self.max_seconds is not None:
            raise bad_value(where, "max_seconds", f"max_seconds= bounds a uniform latency; with "
                                                  f"distribution={self.distribution!r} "
                                                  f"`seconds` is the mean")

    def draw(self, rng: Draws) -> float:
        """Seconds to add, from the rule's draws for one attempt (the first decided that
        the rule fires; these are the next ones)."""
        if self.distribution == "normal":      # Box-Muller: two uniforms, one normal
            u1, u2 = rng.random(), rng.random()
            z = math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(2.0 * math.pi * u2)
            return abs(self.seconds + self.sd * z)
        if self.distribution == "exponential":
            return -self.seconds * math.log(1.0 - rng.random())
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
            raise bad_value(f"Crash({self.activity!r})", "point",
                            f"point={self.point!r} is not one of {', '.join(CRASH_POINTS)}")


RULE_TYPES = {cls.__name__: cls for cls in (RateLimit, ServerError, ConnectionReset, Timeout,
                                            Hang, Latency, Malformed, Fail, Crash)}


def draw(seed: int, index: int, position: int, attempt: int,
         run_id: str | None = None) -> Draws:
    """The draws for one (run seed, rule index, position, attempt), and the run id for a
    `per_run` plan: the same every time. The first decides whether the rule fires; a
    `Latency` takes the next ones."""
    return Draws(draw_key(seed, index, position, attempt, run_id))


def draw_key(seed: int, index: int, position: int, attempt: int,
             run_id: str | None = None) -> bytes:
    """The key of `draw`'s numbers. Without a run id it is the key every plan used before
    `per_run` existed, so their runs meet exactly the faults they always met."""
    key = b"fault:%d:%d:%d:%d" % (seed, index, position, attempt)
    return key if run_id is None else key + b":" + run_id.encode()


@dataclass
class FaultPlan:
    """An ordered list of rules, applied to any activity whose name they match.

    `per_run`: False (the default) draws each rule from (seed, rule, position, attempt), so
    runs sharing a seed meet the same faults (two policies compared on equal terms); True
    adds the run id, so they draw apart (many clients of one world, each its own network).
    """

    rules: list = field(default_factory=list)
    per_run: bool = False
    # (activity name, attempt, crash point) -> the (index, rule) pairs that apply there.
    _applicable: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    # the keys of `_applicable` whose rules include one with a `position=`
    _positional: set = field(default_factory=set, init=False, repr=False, compare=False)
    _json: str | None = field(default=None, init=False, repr=False, compare=False)
    _crashes: bool | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        self.rules = list(self.rules)
        if not isinstance(self.per_run, bool):
            raise bad_type("FaultPlan", "per_run", f"per_run={self.per_run!r} must be True or "
                                                   f"False")
        for i, rule in enumerate(self.rules):
            if not isinstance(rule, Rule):
                raise bad_type("FaultPlan", "rules", f"rule {i} is {rule!r}, not a rule such "
                                                     f"as dl.faults.Crash('charge', "
                                                     f"point='after_effect')")

    def applicable(self, name: str, attempt: int, point: str | None = None,
                   position: int | None = None) -> tuple:
        """The (index, rule) pairs that apply to this attempt of `name` at `position`: with
        no `point`, the rules drawn when the attempt starts (all but crashes); with one, the
        crash rules at that point. Cached by (name, attempt, point), like `to_json`, since a
        sweep asks the same question thousands of times; rules with a `position=` are then
        filtered (edit a plan's rules before its first run, not after)."""
        key = (name, attempt, point)
        found = self._applicable.get(key)
        if found is None:
            found = self._applicable[key] = tuple(
                (i, rule) for i, rule in enumerate(self.rules)
                if (rule.point == point if isinstance(rule, Crash) else point is None)
                and rule.applies(name, attempt))
            if any(rule.position is not None for _, rule in found):
                self._positional.add(key)
        if position is not None and self._positional and key in self._positional:
            found = tuple((i, r) for i, r in found if r.position is None or position in r.position)
        return found

    def unmatched(self, names) -> list[tuple[int, "Rule"]]:
        """The (index, rule) pairs whose activity name or glob matches none of `names` (the
        activities and waits a run or a sweep met): a typo such as "charge_crad" makes a
        plan that tests nothing, and every view that knows the plan says so."""
        names = set(names)
        return [(i, rule) for i, rule in enumerate(self.rules)
                if rule.activity not in names
                and not any(fnmatch.fnmatchcase(name, rule.activity) for name in names)]

    def crashes(self) -> bool:
        """Whether any rule is a `Crash` (cached like `applicable`): an attempt asks at each
        of its crash points, and most plans have none."""
        if self._crashes is None:
            self._crashes = any(isinstance(rule, Crash) for rule in self.rules)
        return self._crashes

    # --- JSON --------------------------------------------------------------------------
    def to_json(self) -> str:
        """The plan as compact JSON (computed once: every run started with it stores it)."""
        if self._json is None:
            data = {"version": 1, "rules": [r.to_dict() for r in self.rules]}
            if self.per_run:     # only when set: older plans keep their bytes
                data["per_run"] = True
            self._json = json.dumps(data, indent=None, separators=(",", ":"))
        return self._json

    @classmethod
    def from_json(cls, text_or_path: str | Path | dict) -> "FaultPlan":
        """Load a plan from JSON text, a file, or the dict that JSON holds
        (``json.loads(plan.to_json())``, which is also what ``faults=`` accepts). Unknown
        keys, types and values are errors that name the file, the rule and the field."""
        if isinstance(text_or_path, dict):
            return cls._from_data(text_or_path, "fault plan dict")
        if isinstance(text_or_path, Rule):
            raise bad_type("FaultPlan", "faults", f"{text_or_path!r} is one rule: pass a "
                           f"list of rules, faults=[{type(text_or_path).__name__}(...)], or "
                           f"dl.FaultPlan([...])")
        if not isinstance(text_or_path, (str, Path)):
            raise bad_type("FaultPlan", "faults", f"{text_or_path!r} is not a fault plan: pass "
                           f"a dl.FaultPlan, a list of rules, a plan's JSON text or file, or "
                           f"its dict form {{'version': 1, 'rules': [...]}}")
        source = "fault plan JSON"
        text = str(text_or_path)
        if isinstance(text_or_path, Path) or not text.lstrip().startswith("{"):
            source = f"fault plan file {text}"
            try:
                text = Path(text_or_path).read_text()
            except OSError as exc:
                raise plan_error(f"cannot read {source}: {exc}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise plan_error(f"{source} is not valid JSON: {exc}") from None
        return cls._from_data(data, source)

    @classmethod
    def _from_data(cls, data, source: str) -> "FaultPlan":
        if not isinstance(data, dict):
            raise plan_error(f"{source}: expected an object with 'version' and 'rules'")
        unknown = set(data) - {"version", "rules", "per_run"}
        if unknown:
            raise plan_error(f"{source}: unknown key {sorted(unknown)[0]!r} at the top level "
                             f"(allowed: 'version', 'rules', 'per_run')")
        per_run = data.get("per_run", False)
        if not isinstance(per_run, bool):
            raise plan_error(f"{source}: 'per_run' must be true or false, not {per_run!r}")
        if "version" not in data:
            raise plan_error(f"{source}: no 'version'; a plan's JSON starts with "
                             f"{{\"version\": 1, \"rules\": [...]}}, as plan.to_json() writes")
        if data.get("version") != 1:
            raise plan_error(f"{source}: version {data.get('version')!r} is not supported "
                             f"(this durablelab reads version 1)")
        rules = []
        for i, raw in enumerate(data.get("rules", [])):
            where = f"{source}, rule {i}"
            if not isinstance(raw, dict) or "type" not in raw:
                raise plan_error(f"{where}: each rule is an object with a 'type'")
            kind = RULE_TYPES.get(raw["type"])
            if kind is None:
                raise plan_error(f"{where}: unknown type {raw['type']!r} (known: "
                                 f"{', '.join(RULE_TYPES)})")
            known = {f.name for f in fields(kind)}
            args = {k: v for k, v in raw.items() if k != "type"}
            for key in args:
                if key not in known:
                    raise plan_error(f"{where} ({raw['type']}): unknown field {key!r} "
                                     f"(known: {', '.join(sorted(known))})")
            try:
                rules.append(kind(**args))
            except (TypeError, ValueError) as exc:
                raise plan_error(f"{where}: {exc}") from None
        return cls(rules, per_run=per_run)

    def __iter__(self):
        return iter(self.rules)

    def __len__(self):
        return len(self.rules)


__all__ = ["FaultPlan", "Rule", "RateLimit", "ServerError", "ConnectionReset", "Timeout",
           "Hang", "Latency", "Malformed", "Fail", "Crash", "CRASH_POINTS", "draw"]
