"""Workflows and worlds for tests/test_sweep.py, in an importable module so they pickle for
``processes=`` and so a killed sweep process and the test that resumes it both know the
workflow as 'sweep_worker:order_flow'.

Run as ``python tests/sweep_worker.py RESULTS LEDGER``: runs `SWEEP` with its results at
RESULTS. Every run's world appends one line (its run's first call) to the plain-text
LEDGER and sleeps a little in real time, so the test can see how far the sweep got, kill
it with SIGKILL, resume it, and count which runs were made again.
"""

from __future__ import annotations

import os
import sys
import time

import durablelab as dl
from durablelab.sim import Payments
from durablelab.sim.services import ServiceUnavailable
from durablelab.sim.llm import TokenBucket

#: where each world records that a run started (set by main() or a test); None: nowhere.
LEDGER = {"path": None, "sleep": 0.0}


class Throttled(Exception):
    """HTTP 429 without a Retry-After: the policy's delay alone decides the wait."""

    status_code = 429


class Shop:
    """A world: a payments service that honours idempotency keys, and a rate-limited API
    that stamps its calls on the engine's clock."""

    def __init__(self, clock, rate: float = 10.0, burst: int = 10):
        self.clock = clock
        self.payments = Payments(honor_keys=True)
        self.bucket = TokenBucket(rate=rate, burst=burst, clock=clock)
        self.api_calls: list[dict] = []

    def quote(self, item: str) -> dict:
        self.api_calls.append({"at": self.clock.now()})
        if self.bucket.take() > 0:
            raise Throttled("429 Too Many Requests")
        return {"item": item, "price": 10.0 + len(item)}


class OutageShop(Shop):
    """A `Shop` whose quote API is down (HTTP 503) for the first virtual second: every run
    that asks in that second fails at the same instant, and retries when its policy says.
    After that it has room for everyone."""

    def __init__(self, clock):
        super().__init__(clock, rate=1000.0, burst=1000)

    def quote(self, item: str) -> dict:
        if self.clock.now() < 1.0:
            self.api_calls.append({"at": self.clock.now()})
            raise ServiceUnavailable("503 quote API down")
        return super().quote(item)


class LoggedShop(Shop):
    """A `Shop` that writes a ledger line when it is made (one world per isolated run) and
    slows each run down, so a test can kill the sweep in the middle."""

    def __init__(self, clock):
        super().__init__(clock)
        if LEDGER["path"]:
            with open(LEDGER["path"], "a", encoding="utf-8") as f:
                f.write("world\n")
        time.sleep(LEDGER["sleep"])


def quote(world, item):
    return world.quote(item)


def order_flow(ctx: dl.Context, order: dict) -> dict:
    offer = ctx.activity("quote", ctx.world.quote, order["item"])
    charge = ctx.activity("charge", ctx.world.payments.charge, order["customer"],
                          offer["price"])
    ctx.sleep(60)
    ctx.activity("notify", lambda to: {"to": to}, order["customer"])
    return {"charge": charge["id"], "price": offer["price"]}


def plain_flow(ctx: dl.Context, order: dict) -> dict:
    """No world: pure activities, for sweeps without one."""
    a = ctx.activity("fetch", lambda n: {"n": n}, order["n"])
    b = ctx.activity("model", lambda n: {"text": "ok", "usage": {
        "input_tokens": 10 * n, "output_tokens": n, "cost": 0.001 * n}}, a["n"])
    return {"n": a["n"], "text": b["text"]}


INPUTS = [{"item": "book", "customer": "c-1"}, {"item": "lamp", "customer": "c-2"}]
POLICIES = {"steady": dl.RetryPolicy(max_attempts=6, initial=2.0, jitter="none"),
            "jittered": dl.RetryPolicy(max_attempts=6, initial=2.0)}
PLANS = {"calm": None,
         "flaky": dl.FaultPlan([dl.faults.ServerError("charge", p=0.3),
                                dl.faults.Crash("charge", point="after_effect", p=0.2)])}


def sweep_for_kill(path, seeds=range(6)):
    return dl.sweep(order_flow, INPUTS, policies=POLICIES, fault_plans=PLANS, seeds=seeds,
                    world=LoggedShop, path=path)


def main(results: str, ledger: str) -> None:
    LEDGER.update(path=ledger, sleep=0.05)
    sweep_for_kill(results)
    print("done", flush=True)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import sweep_worker   # the importable module, so the workflow is 'sweep_worker:...'
    sweep_worker.main(*sys.argv[1:])
