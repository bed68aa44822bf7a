"""Checkers for the exercises of lesson 10 (versioning)."""

from __future__ import annotations

import numbers

from . import Stop, exercise
from ..errors import BadValue

POINTS = ("approval wait", "retry backoff", "attempt in flight")


@exercise("10.1", "A hurried stop",
          "the parking point(s) where the patched version 2 still breaks when the old worker "
          "stops without drain=True: a name from the 'parked' column, or a list of them")
def hurried_stop(answer):
    from ..lab.deploy import simulate_deploy
    from ..examples import onboarding as ob
    given = [answer] if isinstance(answer, str) else answer
    if not isinstance(given, (list, tuple, set)) or not all(p in POINTS for p in given):
        raise Stop(f"give parking points as the 'parked' column names them: "
                   f"{', '.join(map(repr, POINTS))}")
    report = simulate_deploy(ob.onboard_vendor_v2, runs_per_point=1, label="exercise 10.1")
    frame = report.frame
    broken = {p for p, status, vendors in zip(frame["parked"], frame["status"],
                                              frame["vendors"])
              if status != "completed" or vendors != 1}
    for point in POINTS:
        said, truth = point in given, point in broken
        if said and truth:
            yield True, f"{point}: it still breaks"
        elif said:
            yield False, (f"{point}: with ctx.patched it replays and completes with one "
                          f"vendor: look at the 'status' and 'vendors' columns again")
        elif truth:
            yield False, "a parking point that still breaks is missing from your answer"


def _shipped():
    from ..curriculum import datasets_dir
    return datasets_dir() / "histories" / "onboarding_v1.jsonl"


@exercise("10.2", "Recheck before the approval",
          "your version 2 of onboard_vendor (marked @version_of(ob.onboard_vendor)) that "
          "screens again before asking the approver")
def recheck_before_approval(fn):
    import durablelab as dl
    from ..examples import onboarding as ob
    from ..versioning import deployed
    if not callable(fn):
        raise Stop("give the workflow function itself, not its result")
    if (fn.__module__, fn.__qualname__) != (ob.onboard_vendor.__module__,
                                            ob.onboard_vendor.__qualname__):
        raise Stop("it is not a version of onboard_vendor: mark it "
                   "@dl.versioning.version_of(ob.onboard_vendor), so recorded runs replay "
                   "against it")
    ob.world.reset()
    report = dl.replay_check(fn, _shipped())
    if report.ok:
        yield True, "every shipped run of version 1 replays against it"
    else:
        flagged = ", ".join(sorted(report.diverged["run_id"]))
        yield False, (f"the replay check flags shipped runs ({flagged}): they recorded "
                      f"another step where your code asks for something new; put the new "
                      f"step behind ctx.patched(...)")
    ob.world.reset()
    with deployed(fn), dl.Engine(workflows=[fn]) as engine:
        run_id = engine.start(fn, {"vendor_id": "v-42"}, run_id="started-after")
        engine.advance(3600)
        engine.signal(run_id, "approval", {"approved": True})
        engine.run_until_idle()
        run = engine.run(run_id)
    names = list(run.history["name"])
    kinds = list(run.history["kind"])
    asked = names.index("ask_approver") if "ask_approver" in names else len(names)
    rechecked = "sanctions_recheck" in names[:asked] and "activity" == kinds[
        names.index("sanctions_recheck")]
    yield rechecked, ("a new run screens again before it asks the approver" if rechecked else
                      "a new run does not call sanctions_recheck before ask_approver")
    active = run.status == "completed" and (run.result or {}).get("status") == "active"
    yield active, ("and, approved, it completes active" if active else
                   f"but, approved, it ends {run.status} with {run.result}")


def _publish(report):
    if "draft" in report:
        raise BadValue("the publisher rejects reports with a 'draft' field")
    return {"url": "https://reports.example.com/r/1"}


def _fork_at(at: int) -> tuple[str, int]:
    """(status, model calls made) of a fork at `at` of lesson 10's failed research run."""
    import durablelab as dl
    calls: list[int] = []

    def model(question, turn):
        calls.append(turn)
        return {"note": f"finding {turn} on {question}", "tokens": 1200, "cost": 0.018}

    def research(ctx, question):
        notes = [ctx.activity("model", model, question, turn)["note"]
                 for turn in range(8)]
        return ctx.activity("publish", _publish, {"notes": notes, "draft": True})

    @dl.versioning.version_of(research)
    def research_fixed(ctx, question):
        notes = [ctx.activity("model", model, question, turn)["note"]
                 for turn in range(8)]
        return ctx.activity("publish", _publish, {"notes": notes})

    with dl.Engine() as engine:
        engine.start(research, "idempotency keys", run_id="research")
        engine.run_until_idle()
        calls.clear()
        try:
            fork = engine.fork("research", at=at, workflow=research_fixed)
        except dl.DurableLabError:                  # no such position: nothing to fork
            return "not a position", 0
        engine.run_until_idle()
        return engine.run(fork).status, len(calls)


@exercise("10.3", "Fork earlier",
          "{'calls': the model calls a fork at position 5 makes, 'latest': the latest "
          "position a fork can start at and still fix the bug}")
def fork_earlier(answer):
    if not isinstance(answer, dict) or set(answer) != {"calls", "latest"} or not all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool)
            for v in answer.values()):
        raise Stop("give a dict of two whole numbers: {'calls': ..., 'latest': ...}")
    _, calls = _fork_at(5)
    if answer["calls"] == calls:
        yield True, f"a fork at 5 makes {calls} model calls"
    elif answer["calls"] == 5:
        yield False, ("calls: positions count from 1, and the model calls are positions 1 "
                      "to 8; the fork replays positions before 5")
    else:
        yield False, (f"calls: {answer['calls']} is not what the fork makes; count the model "
                      f"positions from 5 on")
    latest = answer["latest"]
    if latest < 1:
        yield False, "latest: positions count from 1"
        return
    fixed_there = _fork_at(latest)[0] == "completed"
    fixed_after = _fork_at(latest + 1)[0] == "completed"
    if fixed_there and not fixed_after:
        yield True, f"latest: {latest} is the last position where a fork fixes the bug"
    elif fixed_there:
        yield False, "latest: a fork can start later than that and still fix the bug"
    else:
        yield False, (f"latest: a fork at {latest} replays the failed publish from history, "
                      f"so the fixed code never runs it")
