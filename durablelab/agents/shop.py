"""The durable-agent lesson's world: a small shop, its flaky tools, and a naive agent loop.

An order agent (the ``order_agent`` scenario in ``datasets/models/``) looks an order up,
charges the customer's card, emails the receipt and answers. `Shop` is the world it acts
on: a `dl.sim.SimLLM` and two services with ledgers (`Payments`, `Email`), plus faults that
live *in the world*, so that a plain Python loop meets them as well as a durable one:

- ``flaky``: a tool or the model refuses a request before doing anything (503 / 429);
- ``lose``: a tool's effect happens but its answer is lost on the way back (a time-out
  after the card was charged: the window idempotency keys exist for);
- ``crash``: the process dies right after a tool's effect (the naive loop starts over;
  the durable one gets the same deaths as `Crash` rules in its fault plan, `crash_plan`).

Each fault is drawn from (seed, what is called, how often it was called), so a seed always
breaks the same calls. `naive_agent` is the loop people write first; `durable_agent` is the
same agent through `react`; `naive_vs_durable` runs both over many seeds, and `plot` puts
them side by side.
"""

from __future__ import annotations

import json
import random
from typing import Any

from ..errors import BadType, BadValue, ModelOutputError, NonRetryable, RateLimited, Transient
from ..faults import Crash, FaultPlan
from ..sim import Email, Payments, SimLLM
from .loop import react
from .tools import tool_schema

TASK = "Please charge order A-1001 to my card and email me the receipt."
TOOL_NAMES = ("lookup_order", "charge_card", "send_receipt")
ORDERS = {"A-1001": {"order_id": "A-1001", "customer": "c-7", "amount": 42.5,
                     "email": "ada@example.com"}}


class WorkerDied(Exception):
    """The naive agent's process died (a world-level crash): everything in memory is gone."""


class Shop:
    """A world for one agent run: model, payments, email, and world-level faults.

    Args:
        seed: seeds the model and every fault draw.
        flaky: probability that a model or tool request is refused before it does anything.
        lose: probability that a tool's answer is lost after its effect happened.
        crash: probability that the naive agent's process dies right after a tool's effect.
        malformed_rate: the model's chance to send broken tool arguments on a first try.
        honor_keys: whether the services honour idempotency keys.

    ``shop.tools`` are the agent's tools (typed, documented, taking ``idempotency_key``);
    ``shop.model`` is the model interface (the SimLLM behind world-level 429s).
    """

    def __init__(self, seed: int = 0, *, flaky: float = 0.0, lose: float = 0.0,
                 crash: float = 0.0, malformed_rate: float = 0.0, honor_keys: bool = True,
                 clock=None):
        from ..clock import VirtualClock

        for name, p in (("flaky", flaky), ("lose", lose), ("crash", crash)):
            if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
                raise BadValue(f"Shop({name}={p!r}): a probability in [0, 1]")
        self.seed, self.flaky, self.lose, self.crash = seed, flaky, lose, crash
        self.llm = SimLLM("sim-small", clock=clock or VirtualClock(), scenario="order_agent",
                          seed=seed, malformed_rate=malformed_rate)
        self.payments = Payments(honor_keys=honor_keys)
        self.email = Email(honor_keys=honor_keys)
        self.crashes = 0       # process deaths the run met
        #: False once `crash_plan` has moved the deaths into the engine's fault plan.
        self.crash_in_world = True
        self._calls: dict[str, int] = {}
        self.model = self._model()
        self.tools = self._tools()

    def _draw(self, what: str) -> random.Random:
        n = self._calls[what] = self._calls.get(what, 0) + 1
        return random.Random(f"shop:{self.seed}:{what}:{n}")

    def _model(self):
        def model(messages: list, tools: list, feedback: str | None = None,
                  idempotency_key: str | None = None) -> dict:
            if self._draw("model").random() < self.flaky:
                raise RateLimited("sim-small: 429 Too Many Requests", retry_after=2.0)
            return self.llm(messages, tools, feedback=feedback, idempotency_key=idempotency_key)
        model.name = self.llm.name
        return model

    def _effect(self, what: str, do) -> Any:
        """Run a tool's effect under the world's faults."""
        rng = self._draw(what)
        if rng.random() < self.flaky:
            raise Transient(f"{what}: 503 Service Unavailable", cause_class="ServiceUnavailable")
        result = do()
        if rng.random() < self.crash and self.crash_in_world:
            self.crashes += 1
            raise WorkerDied(f"the process died right after {what} took effect")
        if rng.random() < self.lose:
            raise Transient(f"{what}: the answer was lost (timed out after the effect)",
                            cause_class="TimeoutError")
        return result

    def _tools(self) -> list:
        shop = self

        def lookup_order(order_id: str) -> dict:
            """Look up an order by its id: customer, amount (EUR) and email address."""
            if order_id not in ORDERS:
                raise NonRetryable(f"there is no order {order_id!r}")
            return shop._effect("lookup_order", lambda: dict(ORDERS[order_id]))

        def charge_card(customer: str, amount: float, idempotency_key: str | None = None) -> dict:
            """Charge `amount` EUR to the customer's card on file."""
            return shop._effect("charge_card", lambda: shop.payments.charge(
                customer, amount, idempotency_key=idempotency_key))

        def send_receipt(to: str, subject: str, idempotency_key: str | None = None) -> dict:
            """Email the receipt for an order to the customer."""
            return shop._effect("send_receipt", lambda: shop.email.send(
                to, subject, idempotency_key=idempotency_key))

        return [lookup_order, charge_card, send_receipt]

    def crash_plan(self) -> FaultPlan:
        """The world's process deaths as engine faults: a `Crash` after each tool's effect
        with probability `crash`, for the durable agent to meet the same odds. From then on
        the world itself no longer kills anything (the engine does)."""
        self.crash_in_world = False
        return FaultPlan([Crash(name, point="after_effect", p=self.crash)
                          for name in TOOL_NAMES[1:]] if self.crash else [])

    def outcome(self, answered: bool) -> dict:
        """What the run did to the world: success (it answered, the card was charged once
        and one receipt sent), duplicates, model calls, tokens, cost."""
        charges, emails = len(self.payments.effects), len(self.email.effects)
        usage = self.llm.usage
        return {"success": bool(answered and charges == 1 and emails == 1),
                "charges": charges, "emails": emails,
                "duplicates": max(0, charges - 1) + max(0, emails - 1),
                "model_calls": usage["calls"],
                "tokens": usage["input_tokens"] + usage["output_tokens"],
                "cost": usage["cost"], "crashes": self.crashes}


def naive_agent(shop: Shop, task: str = TASK, max_turns: int = 10, restarts: int = 3) -> dict:
    """The agent loop people write first: plain Python, state in memory, no keys.

    A tool's error goes back to the model as an observation (so the model calls it again);
    anything else (a 429 from the model, a dead process) starts the whole task over, up to
    `restarts` times, from an empty conversation: the work done is lost and paid again.
    Returns ``shop.outcome(...)`` plus ``restarts`` (how often it started over).
    """
    specs = [tool_schema(fn) for fn in shop.tools]
    by_name = {fn.__name__: fn for fn in shop.tools}
    for restart in range(restarts + 1):
        messages = [{"role": "user", "content": task}]
        try:
            for _ in range(max_turns):
                reply = shop.model(messages, specs)
                messages.append({"role": "assistant", "content": reply["content"],
                                 "tool_calls": reply["tool_calls"]})
                if not reply["tool_calls"]:
                    return {**shop.outcome(True), "restarts": restart}
                for call in reply["tool_calls"]:
                    try:
                        arguments = call["arguments"]
                        if isinstance(arguments, str):
                            arguments = json.loads(arguments)
                        content = by_name[call["name"]](**arguments)
                    except (TypeError, ValueError, KeyError, NonRetryable, Transient,
                            ModelOutputError) as exc:
                        content = {"error": str(exc)}
                    messages.append({"role": "tool", "tool_call_id": call["id"],
                                     "name": call["name"], "content": json.dumps(content)})
            break   # out of turns: give up
        except (RateLimited, WorkerDied):
            continue
    return {**shop.outcome(False), "restarts": restarts}


def durable_agent(ctx, task: str = TASK) -> dict:
    """The same agent as workflow code: `react` over the model and tools of the run's
    world, a `Shop` (``dl.Engine(world=shop)``; outside the worker: a crash resets none of
    it)."""
    shop = ctx.world
    if not isinstance(shop, Shop):
        raise BadType(f"durable_agent runs in a Shop: open the engine with "
                        f"dl.Engine(world=Shop(...)), not world={shop!r}")
    return react(ctx, task, model=shop.model, tools=shop.tools)


def naive_vs_durable(seeds=range(40), **faults):
    """Run the naive loop and the durable agent once per seed, each in a fresh `Shop(seed,
    **faults)`, and return a DataFrame with a row per (approach, seed): success,
    duplicates, model_calls, tokens, cost, crashes."""
    import pandas as pd

    from ..engine import Engine

    rows = []
    for seed in seeds:
        rows.append({"approach": "naive", "seed": seed, **naive_agent(Shop(seed, **faults))})
    with Engine(durability="exit") as engine:
        for seed in seeds:     # one after the other: a crash kills every run in flight
            shop = engine.world = Shop(seed, **faults)
            run_id = engine.start(durable_agent, TASK, run_id=f"durable-{seed}",
                                  faults=shop.crash_plan(), seed=seed)
            engine.run_until_idle()
            run = engine.run(run_id)
            answered = run.status == "completed" and run.result["stop_reason"] == "answered"
            shop.crashes = len(run.crashes)
            rows.append({"approach": "durable", "seed": seed, **shop.outcome(answered),
                         "restarts": 0})
    return pd.DataFrame(rows)


def summary(frame):
    """Per approach: runs, success rate, duplicate effects, mean model calls, tokens, cost."""
    return frame.groupby("approach", sort=False).agg(
        runs=("seed", "size"), success_rate=("success", "mean"),
        duplicates=("duplicates", "sum"), model_calls=("model_calls", "mean"),
        tokens=("tokens", "mean"), cost=("cost", "mean"))


def plot(frame):
    """Naive versus durable side by side: success rate, duplicate effects per 100 runs,
    and mean cost per run in dollars, the unit `summary` prints. Orange against blue
    (Okabe-Ito), which readers with a colour-vision deficiency tell apart, unlike red and
    green. A Figure that shows itself in a notebook."""
    from matplotlib.ticker import FuncFormatter

    from ..viz.plots import Figure

    table = summary(frame)
    fig = Figure(figsize=(10, 3.4), layout="constrained")
    axes = fig.subplots(1, 3)
    colors = {"naive": "#E69F00", "durable": "#0072B2"}
    panels = [("success_rate", "success rate (%)", 100.0, "%.1f"),
              ("duplicates", "duplicate effects per 100 runs", None, "%.1f"),
              ("cost", "mean cost per run ($)", 1.0, "$%.6f")]
    for ax, (column, label, scale, fmt) in zip(axes, panels):
        values = [table.loc[a, column] * (scale if scale else 100.0 / table.loc[a, "runs"])
                  for a in table.index]
        bars = ax.bar(list(table.index), values, color=[colors.get(a, "grey") for a in table.index],
                      label=list(table.index))
        ax.bar_label(bars, fmt=fmt, padding=2)
        ax.set_ylabel(label)
        ax.set_ylim(0, max(values) * 1.25 if max(values) > 0 else 1)
        ax.set_title(label.split(" (")[0], fontsize=10)
        if column == "cost":
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"${v:.5f}"))
    axes[0].legend(title=f"{int(table['runs'].iloc[0])} seeds each", loc="upper left")
    fig.suptitle("The same agent under the same faults: naive loop vs durable (react)")
    return fig


__all__ = ["Shop", "naive_agent", "durable_agent", "naive_vs_durable", "summary", "plot",
           "TASK", "WorkerDied"]
