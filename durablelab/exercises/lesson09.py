"""Checkers for the exercises of lesson 09 (non-determinism)."""

from __future__ import annotations

import random
import tempfile
import types
import warnings
from pathlib import Path

from . import Stop, exercise


def _step(*args, **kwargs):
    return {"args": list(args), "kwargs": kwargs}


def _onboard_v1(ctx, vendor):
    """The catalogue's `onboard` of lesson 09 as deployed when the run started."""
    for name in ("fetch", "screen", "notify"):
        ctx.activity(name, _step, vendor["id"], tier="gold")
    if vendor["amount"] > 100:
        ctx.activity("manual_review", _step, vendor["amount"])
    else:
        ctx.activity("auto_approve", _step, vendor["amount"])
    ctx.sleep(3600)
    ctx.wait_signal("approval")
    ctx.activity("activate", _step, vendor["id"])
    return "active"


def _workflow(fn):
    if not callable(fn):
        raise Stop("give the workflow function itself, not its result")


def _sleeps(run) -> list[float]:
    history = run.history
    return [value["seconds"] for kind, value in zip(history["kind"], history["value"])
            if kind == "sleep"]


@exercise("09.1", "Patch the longer sleep",
          "your onboard workflow function, with the two-hour sleep behind ctx.patched")
def patch_the_sleep(fn):
    import durablelab as dl
    _workflow(fn)
    # A run recorded by the catalogue's code, under the name of the learner's function.
    original = types.FunctionType(_onboard_v1.__code__, _onboard_v1.__globals__, fn.__name__)
    original.__module__, original.__qualname__ = fn.__module__, fn.__qualname__
    vendor = {"id": "v-42", "amount": 80}
    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = Path(folder) / "sleep.duckdb"
        with dl.Engine(path, workflows=[original]) as engine:
            old = engine.start(original, vendor, run_id="recorded-before")
            engine.run_until_idle()                      # slept an hour, waits for approval
        with dl.Engine(path, workflows=[fn]) as engine:  # the release: new code, old run
            engine.signal(old, "approval", True)
            engine.run_until_idle()
            replayed = engine.run(old)
            new = engine.start(fn, vendor, run_id="started-after")
            engine.run_until_idle()
            engine.signal(new, "approval", True)
            engine.run_until_idle()
            fresh = engine.run(new)
    if replayed.status == "diverged":
        yield False, (f"the run that waited when you deployed diverged at position "
                      f"{replayed.error.position} ({replayed.error.reason}): it must replay "
                      f"the sleep it recorded; put the new sleep behind ctx.patched(...)")
    else:
        yield replayed.status == "completed", (
            "the run that waited when you deployed replays and completes"
            if replayed.status == "completed" else
            f"the run that waited when you deployed is {replayed.status}")
    slept = _sleeps(fresh)
    yield slept == [7200.0], ("a run started after the deploy sleeps two hours"
                              if slept == [7200.0] else
                              f"a run started after the deploy sleeps {slept} seconds, "
                              f"not two hours")
    yield fresh.status == "completed", ("and completes" if fresh.status == "completed" else
                                        f"but it is {fresh.status}")


def _welcome_tiers(fn, engine_seed: int, module_seeds: tuple[int, int]) -> object:
    """The result of a run of `fn(ctx, "c-7")` with the guard off, the random module seeded
    with module_seeds[0] for its first execution and [1] for the replay after its sleep."""
    import durablelab as dl
    with dl.Engine(guard=False) as engine:
        run_id = engine.start(fn, "c-7", seed=engine_seed, run_id="welcome")
        random.seed(module_seeds[0])
        engine.advance(1)
        random.seed(module_seeds[1])
        engine.run_until_idle()
        run = engine.run(run_id)
    if run.status != "completed":
        raise Stop(f"the run is {run.status}"
                   + (f": {run.error}" if run.error is not None else ""))
    if not isinstance(run.result, dict) or "tier" not in run.result:
        raise Stop("the result should still be {'customer': ..., 'tier': ...}")
    return run.result["tier"]


@exercise("09.2", "A recorded coin",
          "your welcome workflow function, deciding the tier with ctx.random()")
def recorded_coin(fn):
    import durablelab as dl
    _workflow(fn)
    with dl.Engine() as engine:                          # the guard on
        run_id = engine.start(fn, "c-7", run_id="welcome")
        engine.run_until_idle()
        run = engine.run(run_id)
    if isinstance(run.error, dl.DeterminismGuardError):
        raise Stop(f"the guard still stops it at {run.error.call}: the tier must come from "
                   f"ctx, not from the random module")
    state = random.getstate()
    try:
        by_replay_seed = {_welcome_tiers(fn, 0, (3, later)) for later in (4, 5)}
        by_engine_seed = {_welcome_tiers(fn, seed, (3, 5)) for seed in range(8)}
    finally:
        random.setstate(state)
    yield len(by_replay_seed) == 1, (
        "the tier no longer depends on what the random module says on replay"
        if len(by_replay_seed) == 1 else
        "the tier still changes when the replay's random module changes")
    yield len(by_engine_seed) > 1, (
        "and it is still a coin: runs with other seeds get the other tier"
        if len(by_engine_seed) > 1 else
        "but every run gets the same tier: it is no longer drawn at random")


class _ProcessOrder(frozenset):
    """A set of strings iterated in another order in each execution (`turn`), as a set of
    strings is iterated in another order in a process with another PYTHONHASHSEED."""

    turn = 0

    def __iter__(self):
        items = sorted(frozenset.__iter__(self))
        k = _ProcessOrder.turn % len(items)
        return iter(items[k:] + items[:k])


@exercise("09.3", "Fix dict_flow",
          "your fixed dict_flow workflow function")
def fix_dict_flow(fn):
    import durablelab as dl
    from ..examples import hash_order
    _workflow(fn)
    regions = _ProcessOrder(hash_order.REGIONS)
    # Every name the function may read the regions through: the module, and its own globals.
    homes = [(vars(hash_order), "REGIONS")] + [
        (fn.__globals__, name) for name, value in list(fn.__globals__.items())
        if isinstance(value, (set, frozenset)) and value == hash_order.REGIONS]
    saved = [(home, name, home[name]) for home, name in homes]
    try:
        for home, name in homes:
            home[name] = regions
        _ProcessOrder.turn = 0
        with dl.Engine() as engine:
            run_id = engine.start(fn, None, run_id="dict-flow")
            engine.run_until_idle()                      # recorded by "process 1"
            recorded = engine.run(run_id)
            _ProcessOrder.turn = 1
            engine.crash()                               # replayed by "process 2"
            engine.run_until_idle()
            replayed = engine.run(run_id)
    finally:
        _ProcessOrder.turn = 0
        for home, name, value in saved:
            home[name] = value
    opened = [value for kind, name, value in zip(recorded.history["kind"],
                                                 recorded.history["name"],
                                                 recorded.history["value"])
              if kind == "activity" and name == "open_region"]
    if not opened or opened[0] not in hash_order.REGIONS:
        yield False, "it should still open one region of REGIONS with ctx.activity('open_region', ...)"
        return
    yield True, "it opens one region"
    if replayed.status == "diverged":
        yield False, (f"a process with another hash order opens another region "
                      f"({replayed.error.reason} at position {replayed.error.position}): "
                      f"the region must not depend on the order of the set")
    else:
        yield True, "a process with another hash order opens the same one and replays"


@exercise("09.4", "A long argument",
          "the name of the field of the error that still tells the two calls apart "
          "(a string, as in err.recorded)")
def long_argument(field):
    import durablelab as dl
    if not isinstance(field, str):
        raise Stop(f"give the field's name, a string, not {type(field).__name__}")
    last = {"char": "a"}

    def send(text):
        return len(text)

    def flow(ctx, _):
        ctx.activity("send", send, "x" * 4999 + last["char"])
        return ctx.wait_signal("go")

    with dl.Engine() as engine:
        run_id = engine.start(flow, None, run_id="long")
        engine.run_until_idle()
        last["char"] = "b"
        engine.crash()
        engine.run_until_idle()
        err = engine.run(run_id).error
    apart = {key for key in err.recorded if err.recorded[key] != err.requested.get(key)}
    if err.recorded_args != err.requested_args:
        apart.add("arguments")
    said = field.strip().lower().replace("input ", "")
    if said in apart:
        yield True, f"{field!r}: it differs between the recorded and the requested call"
    elif said in ("arguments", "args", "recorded_args", "requested_args"):
        yield False, ("the arguments are cut before the end: both columns show the same "
                      "text, so they cannot tell the calls apart")
    elif said in ("name", "kind"):
        yield False, f"both calls have the same {said}: it is the same step"
    else:
        yield False, f"{field!r} is not a field that differs between the two calls"
