"""Checkers for the exercises of lesson 01 (replay)."""

from __future__ import annotations

import tempfile
import types
import warnings
from pathlib import Path

from . import Stop, exercise

DAY = 86400.0


@exercise("01.2", "Let the approval time out",
          "the Run of an onboard_vendor run that never got its approval (engine.run(run_id))")
def approval_times_out(run):
    from ..run import Run
    if not isinstance(run, Run):
        raise Stop(f"give the run itself, engine.run(run_id), not {type(run).__name__}")
    yield run.workflow.endswith(":onboard_vendor"), (
        f"it is a run of onboard_vendor" if run.workflow.endswith(":onboard_vendor") else
        f"this is a run of {run.workflow}; the exercise starts onboard_vendor")
    kinds = list(run.history["kind"])
    if "signal_received" in kinds:
        yield False, "this run received a signal; the exercise sends none"
        return
    if run.status != "completed":
        yield False, (f"the run is {run.status}: nothing has answered its wait yet; call "
                      f"engine.run_until_idle() and take engine.run(run_id) again")
        return
    yield "signal_timeout" in kinds, ("the approval wait ended by its deadline, with no signal"
                                      if "signal_timeout" in kinds else
                                      "its approval wait did not end by its deadline")
    took = run.ended_at - run.started_at
    yield took >= 3 * DAY, (f"the run took {took / DAY:g} virtual days, and no real ones"
                            if took >= 3 * DAY else
                            f"it took {took:g} virtual seconds: less than its deadline")
    timed_out = isinstance(run.result, dict) and run.result.get("timed_out") is True
    yield timed_out, ("its result says the approval timed out" if timed_out else
                      "its result does not say the approval timed out")


def _replay_reason(change) -> str:
    """The `reason` of the NonDeterminismError a waiting run of a three-step workflow meets
    when its code is changed by `change` ("remove" the middle step or give it another
    "argument")."""
    import durablelab as dl
    calls = {"changed": False}

    def flow(ctx, _):
        ctx.activity("fetch", lambda: 1)
        if not (calls["changed"] and change == "remove"):
            ctx.activity("screen", lambda x: x, 2 if calls["changed"] else 1)
        ctx.activity("ask", lambda: 3)
        return ctx.wait_signal("approval")

    with dl.Engine() as engine:
        run_id = engine.start(flow, None, run_id="exercise-01.3")
        engine.run_until_idle()
        calls["changed"] = True
        engine.signal(run_id, "approval", True)
        engine.run_until_idle()
        return engine.run(run_id).error.reason


@exercise("01.3", "Break replay another way",
          "the err.reason you got: a string, or {'remove': ..., 'argument': ...} for both")
def break_replay(answer):
    given = answer if isinstance(answer, dict) else {"remove": answer}
    if not all(isinstance(v, str) for v in given.values()) or not set(given) <= {"remove",
                                                                                "argument"}:
        raise Stop("give err.reason, a string such as 'history_not_consumed' (or a dict "
                   "with the keys 'remove' and 'argument')")
    for change, said in given.items():
        truth = _replay_reason(change)
        what = "removing the sanctions_screen step" if change == "remove" else \
            "a different argument to sanctions_screen"
        if said == truth:
            yield True, f"{what}: that is the reason replay stops with"
        elif said == "history_not_consumed":
            yield False, (f"{what}: replay stops before the end of history; the first "
                          f"recorded step that no longer matches is what it names")
        else:
            yield False, f"{what}: {said!r} is not the reason replay gives"


@exercise("01.4", "Patch the removal",
          "your patched onboard_vendor workflow function")
def patch_the_removal(fn):
    import durablelab as dl
    from ..examples import onboarding
    if not callable(fn):
        raise Stop("give the workflow function itself (onboard_vendor), not its result")
    # A run recorded by the original code, under the name of the learner's function.
    original = types.FunctionType(onboarding.onboard_vendor.__code__,
                                  onboarding.onboard_vendor.__globals__, fn.__name__)
    original.__module__, original.__qualname__ = fn.__module__, fn.__qualname__
    onboarding.world.reset()
    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = Path(folder) / "patch.duckdb"
        with dl.Engine(path, workflows=[original]) as engine:
            old = engine.start(original, {"vendor_id": "v-42"}, run_id="recorded-before")
            engine.advance(3600)                          # now it waits for its approval
        with dl.Engine(path, workflows=[fn]) as engine:   # the deploy: new code, old run
            engine.signal(old, "approval", {"approved": True})
            engine.run_until_idle()
            replayed = engine.run(old)
            new = engine.start(fn, {"vendor_id": "v-42"}, run_id="started-after")
            engine.advance(3600)
            engine.signal(new, "approval", {"approved": True})
            engine.run_until_idle()
            fresh = engine.run(new)
    if replayed.status == "diverged":
        yield False, (f"the run that was waiting when you deployed diverged "
                      f"({replayed.error.reason}): it must keep the path it recorded; "
                      f"guard the removal with ctx.patched(...)")
    else:
        yield replayed.status == "completed", (
            "the run that was waiting when you deployed replays and completes"
            if replayed.status == "completed" else
            f"the run that was waiting when you deployed is {replayed.status}")
    names = list(fresh.history["name"])
    yield "sanctions_screen" not in names, (
        "a run started after the deploy skips the sanctions screen"
        if "sanctions_screen" not in names else
        "a run started after the deploy still calls sanctions_screen")
    yield fresh.status == "completed", ("that new run completes" if fresh.status == "completed"
                                        else f"that new run is {fresh.status}")


def _erp_calls(point: str) -> int:
    """Calls the ERP gets when the worker dies at `point` of create_vendor, keys ignored."""
    import durablelab as dl
    from ..examples import onboarding
    onboarding.world.reset(honor_keys=False)
    try:
        with dl.Engine() as engine:
            run_id = engine.start(onboarding.onboard_vendor, {"vendor_id": "v-42"},
                                  run_id="exercise-01.1", seed=7,
                                  faults=[dl.faults.Crash("create_vendor", point=point)])
            engine.signal(run_id, "approval", {"approved": True}, signal_id="click")
            engine.run_until_idle()
        return len(onboarding.world.erp.calls)
    finally:
        onboarding.world.reset(honor_keys=True)


@exercise("01.1", "Move the crash",
          "a dict {'after_record': calls, 'before_activity': calls}: the ERP's calls, keys "
          "ignored")
def move_the_crash(answer):
    import numbers
    if not isinstance(answer, dict) or not {"after_record", "before_activity"} <= set(answer):
        raise Stop("give a dict {'after_record': calls, 'before_activity': calls}")
    for point in ("after_record", "before_activity"):
        given = answer[point]
        if isinstance(given, bool) or not isinstance(given, numbers.Real):
            yield False, f"{point}: give the number of calls in world.erp.calls"
            continue
        truth = _erp_calls(point)
        if given == truth:
            why = ("the record survived the crash, so replay hands it back"
                   if point == "after_record" else
                   "the worker died before calling; the one call is the recovered worker's")
            yield True, f"{point}: {given:g} call; {why}"
        elif given > truth:
            yield False, (f"{point}: {given:g} calls is what the crash window costs; where "
                          f"is this point, before or after the effect and its record?")
        else:
            yield False, f"{point}: {given:g} is not the number of calls in world.erp.calls"
