"""Support triage against one rate-limited model: the worked example of lesson 12.

Each run triages one ticket: it asks a simulated model (`SimLLM`) for a summary, then, for
a refund request, charges a refund through a payments service that honours idempotency
keys. The model sits behind one token bucket (``RATE`` requests a virtual second, ``BURST``
at once), which is the point: with ``contention=True`` every run of a sweep cell shares
that bucket, so runs that retry in lockstep really do storm it. `world(clock)` makes the
world a sweep gives each cell (or each run), and workflow code reaches it as `ctx.world`.
"""

from __future__ import annotations

import durablelab as dl
from durablelab.sim import Payments, SimLLM
from durablelab.sim.llm import TokenBucket

#: the model's rate limit: requests per virtual second, and how many at once.
RATE, BURST = 20.0, 20

#: the policy the code passes; a sweep's policies replace it.
MODEL = dl.RetryPolicy(max_attempts=4, initial=1.0, backoff=2.0, max_interval=30)


class StormWorld:
    """The systems outside the worker: one rate-limited model and a payments service."""

    def __init__(self, clock, rate: float = RATE, burst: int = BURST):
        self.llm = SimLLM("sim-small", clock=clock, rate_limit=TokenBucket(rate, burst))
        self.payments = Payments(honor_keys=True)


def world(clock) -> StormWorld:
    """The sweep's world factory: a fresh `StormWorld` on the engine's clock."""
    return StormWorld(clock)


def tickets(n: int) -> list[dict]:
    """`n` tickets; every third one asks for a refund."""
    return [{"id": f"t-{i}", "customer": f"c-{i % 7}", "refund": 12.5 if i % 3 == 0 else 0.0}
            for i in range(n)]


def triage(ctx: dl.Context, ticket: dict) -> dict:
    summary = ctx.activity("model", ctx.world.llm.complete,
                           f"Summarise support ticket {ticket['id']}", policy=MODEL)
    refund = None
    if ticket["refund"]:
        refund = ctx.activity("refund", ctx.world.payments.charge, ticket["customer"],
                              -ticket["refund"])["id"]
    return {"ticket": ticket["id"], "summary": summary["text"][:40], "refund": refund}


# Registered, so a sweep config (datasets/experiments/storm.toml) may name it: a config runs
# only a workflow its module registers. A call rather than @dl.workflow keeps the function's
# source, which lesson 12 prints, exactly the workflow.
dl.workflow(triage)
