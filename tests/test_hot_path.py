"""The sweep's fast paths give exactly what the plain paths give.

The fresh-step path hands an activity's result back as a copy instead of parsing the JSON it
just wrote and answers "is this a coroutine to await?" at once for plain values, a sweep
reads its world's duplicate effects once per world, and the crash explorer reuses one engine
between rows. Each case here once came out differently (found by
review, fixed): the same answer on first execution as on replay, the same duplicate count
as a per-run prefix match, and the same clock for every row.
"""

from __future__ import annotations

import asyncio
import collections.abc
import inspect
import json
import types

import pytest

import durablelab as dl
from durablelab import aio
from durablelab import history as h
from durablelab.breaker import CircuitBreaker
from durablelab.faults import Crash, FaultPlan
from durablelab.sim import Payments


# --- first execution == replay, for results whose JSON round trip is another value ---------
def read_pair():
    return "\ud800\udc00"   # a surrogate pair held as two code points (bad decoding)


def read_lone():
    return ["\udc80", {"k": "\ud83d"}]   # lone surrogates: stored escaped, read back as is


def length(value):
    return len(value)


def surrogate_flow(ctx, which):
    value = ctx.activity("read", read_pair if which == "pair" else read_lone)
    n = ctx.activity("use", length, value)        # the first value reaches the next step
    ctx.sleep(10)
    return [ascii(value), n]


@pytest.mark.parametrize("which", ["pair", "lone"])
def test_a_result_with_surrogates_is_the_same_on_first_execution_and_on_replay(db_path, which):
    recorded = json.loads(h.compact(read_pair() if which == "pair" else read_lone()))
    with dl.Engine(db_path) as engine:
        run_id = engine.start(surrogate_flow, which, run_id="r")
        engine.advance(1)                  # both activities ran; the run waits on its timer
        first = engine.run(run_id).history.set_index("name").loc["use", "args"]
    with dl.Engine(db_path, workflows=[surrogate_flow]) as engine:   # a fresh worker replays
        engine.run_until_idle()
        run = engine.run(run_id)
        assert run.status == "completed", run.error
        assert run.history.set_index("name").loc["use", "args"] == first
        assert run.result == [ascii(recorded), len(recorded)]
    if which == "pair":                    # what JSON gives back: one character, U+10000
        assert recorded == "\U00010000"


class Ledger:
    """A service that keeps (and later changes) the dict it returned."""

    def __init__(self):
        self.answers = []

    def answer(self, k):
        out = {"k": k, "seen": 0}
        self.answers.append(out)
        return out


def mutating_flow(ctx, _):
    first = ctx.activity("a", ctx.world.answer, 1)
    first["k"] = "changed by the workflow"
    for answer in ctx.world.answers:
        answer["seen"] += 1                # the service changes what it handed out
    ctx.sleep(1)
    return ctx.activity("b", ctx.world.answer, 2)["k"], first


def test_a_result_handed_back_is_nobodys_object_but_the_callers():
    engine = dl.Engine(world=Ledger())
    run_id = engine.start(mutating_flow, None)
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "completed", run.error
    assert run.result == [2, {"k": "changed by the workflow", "seen": 0}]
    assert run.history.set_index("name").loc["a", "value"] == {"k": 1, "seen": 0}


# --- duplicate effects: every key that begins with the run's id and a colon -----------------
class World:
    def __init__(self, clock):
        self.payments = Payments(honor_keys=False)


class EmptyLookingWorld(World):
    def __len__(self):                     # a container of services, falsy when asked
        return 0


def charging_flow(ctx, x):
    ctx.activity("charge", ctx.world.payments.charge, "c", x,
                 idempotency_key=f"{ctx.run_id}:charge-{x}")   # a key the workflow chose
    ctx.activity("charge2", ctx.world.payments.charge, "c", x)  # the engine's key
    return x


@pytest.mark.parametrize("world", [World, EmptyLookingWorld])
@pytest.mark.parametrize("contention", [False, True])
def test_duplicate_effects_count_keys_the_workflow_chose_and_any_world(world, contention):
    plan = FaultPlan([Crash("charge*", point="after_effect")])
    experiment = dl.sweep(charging_flow, [1], fault_plans={"crash": plan}, seeds=range(2),
                          world=world, contention=contention)
    # each activity's effect happened twice (once before its crash, once after recovery)
    assert experiment.frame["duplicate_effects"].tolist() == [2, 2]


# --- the crash explorer: a row with breakers leaves the next row a new engine -------------
BREAKING = dl.RetryPolicy(max_attempts=3, initial=1.0, backoff=2.0, jitter="none",
                          breaker=CircuitBreaker(failures=5, reset_after=30))


def plus_one(x):
    return x + 1


def breaker_flow(ctx, x):
    a = ctx.activity("a", plus_one, x, policy=BREAKING)
    ctx.sleep(100)
    return ctx.activity("b", plus_one, a, policy=BREAKING)


def test_each_explored_row_with_a_breaker_starts_its_clock_at_zero():
    report = dl.explore_crashes(breaker_flow, 1, lambda run, world: False)   # keep every run
    starts = {float(row["run"].history.recorded_at.min()) for _, row in report.frame.iterrows()}
    assert starts == {0.0}



# --- is an activity's result awaitable: the same answer as inspect.isawaitable ----------------
class AwaitableDict(dict):
    def __await__(self):
        return iter(())


class Registered:
    pass


collections.abc.Awaitable.register(Registered)


async def coroutine_function():
    return 1


@types.coroutine
def generator_based():
    yield


def plain_generator():
    yield


def test_awaitable_answers_what_inspect_isawaitable_answers():
    loop = asyncio.new_event_loop()
    coroutine, legacy = coroutine_function(), generator_based()
    values = [{"i": 1}, [1], "text", 1, 1.5, True, None, (1, 2), b"bytes", object(),
              AwaitableDict(), Registered(), coroutine, legacy, plain_generator(),
              loop.create_future()]
    try:
        assert [aio.awaitable(v) for v in values] == [inspect.isawaitable(v) for v in values]
        assert [aio.awaitable(v) for v in values[-6:]] == [True, True, True, True, False,
                                                           True]
    finally:
        coroutine.close()
        loop.close()
