"""Budgets: a run that calls a model in a loop must stop somewhere.

A `Budget` caps what one run may spend: model calls, tokens, money, and turns (activities
executed). Spending is read from history, from activity results that carry a ``"usage"``
dict (``input_tokens``, ``output_tokens``, ``cost``), as `dl.sim.SimLLM` and the structured
output helper return. Broken answers count too: a model that answered with half a JSON
object was paid for, and the `ModelOutputError` it raised carries that answer's usage. The
engine adds it to the run's spend when the attempt ends and records the sum at once (a
fact about the world, like a fault firing), so a recovered run still counts it. When a run
goes over, it stops with `BudgetExceeded`, which names the limit, the amount spent and the
activity that crossed it. Computed from history plus that recorded sum, the spend is the
same on every replay.

Every run keeps that sum, budget or not (`discarded_usage` reads it), so `dl.compare`,
`dl.ops` and sweeps report what the model billed, not only the answers history kept.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields

from .errors import limit_error


@dataclass(frozen=True)
class Budget:
    """Limits for one run; None means no limit."""

    #: activities whose result reported usage (model calls).
    model_calls: int | None = None
    #: input plus output tokens over all model calls.
    tokens: int | None = None
    #: money, in the price table's currency.
    cost: float | None = None
    #: activities executed in all (recorded activity events): a cap on runaway loops.
    turns: int | None = None

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not 0 <= value < float("inf")):
                raise limit_error("Budget", f.name, value, "a finite number >= 0, or None "
                                                           "for no limit")

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class Spend:
    """What a run has spent so far, summed from its recorded activity results."""

    model_calls: int = 0
    tokens: int = 0
    cost: float = 0.0
    turns: int = 0

    def add(self, result) -> None:
        self.turns += 1
        usage = answer_usage(result.get("usage") if isinstance(result, dict) else None)
        if usage is not None:   # broken answers folded into it are counted by `burn`
            self.model_calls += 1
            self.tokens += usage[0] + usage[1]
            self.cost += usage[2]

    def burn(self, usage) -> None:
        """Count a broken answer's usage: a model call that was paid for, not a turn."""
        if isinstance(usage, dict):
            self.model_calls += int(usage.get("calls", 1))
            self.tokens += int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
            self.cost += float(usage.get("cost", 0.0))

    def over(self, budget: Budget) -> tuple[str, float, float] | None:
        """(limit name, spent, limit) of the first limit passed, or None."""
        for name in ("model_calls", "tokens", "cost", "turns"):
            limit = getattr(budget, name)
            if limit is not None and getattr(self, name) > limit:
                return name, getattr(self, name), limit
        return None


#: the keys of a run's discarded usage: broken answers (model calls), their tokens, their cost.
DISCARDED_KEYS = ("calls", "input_tokens", "output_tokens", "cost")


def discarded_usage(value) -> dict | None:
    """The usage of a run's broken model answers, ``{"calls", "input_tokens",
    "output_tokens", "cost"}``, from the dict or JSON text the store keeps (`Store.burnt`),
    or None when there is none or it does not read as one (a hand-edited value counts
    nothing rather than breaking every view of the run). A key that is missing or not a
    finite number >= 0 counts 0."""
    if isinstance(value, (str, bytes)):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, dict):
        return None
    found = {}
    for key in DISCARDED_KEYS:
        v = value.get(key, 0)
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
        found[key] = (float(v) if key == "cost" else int(v)) if ok else (0.0 if key == "cost" else 0)
    return found


def answer_usage(usage) -> tuple[int, int, float] | None:
    """(input_tokens, output_tokens, cost) of one model answer's recorded ``"usage"`` dict,
    or None when it is not one. A missing or non-numeric key counts 0. Broken answers that
    `dl.agents.react` folded into the answer finally kept (``usage["discarded"]``) are
    taken out: the engine records each of those itself (`discarded_usage`), so every
    answer the model billed counts once."""
    if not isinstance(usage, dict):
        return None
    folded = usage.get("discarded") if isinstance(usage.get("discarded"), dict) else {}

    def number(within, key):
        v = within.get(key, 0)
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        return v if ok else 0
    return (number(usage, "input_tokens") - number(folded, "input_tokens"),
            number(usage, "output_tokens") - number(folded, "output_tokens"),
            number(usage, "cost") - number(folded, "cost"))
