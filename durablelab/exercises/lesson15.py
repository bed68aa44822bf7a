"""Checkers for the exercises of lesson 15 (parallel tools and sub-agents): each runs the
research agent, the crash explorer or the learner's workflow on the answer."""

from __future__ import annotations

import functools
import numbers

from . import Stop, exercise

CANCEL_AFTER = 3.0      # virtual seconds: two reads are in flight then (section 3)
REASON = "the customer withdrew the question"


def buy_one_by_one(ctx, request: dict) -> dict:
    """The lesson's agent with its two charges made one after the other (exercise 15.1)."""
    from ..examples import research
    with ctx.saga() as saga:
        for price in request["paywalled"].values():
            receipt = ctx.activity("buy", ctx.world.payments.charge, request["customer"], price)
            saga.add("refund", ctx.world.payments.refund, receipt["id"])
        titles = ctx.activity("search", ctx.world.search, request["question"],
                              request.get("documents", len(research.LIBRARY)))
        notes = ctx.map("read", ctx.world.read, titles, limit=request.get("limit"),
                        policy=research.MODEL)
        report = ctx.child(research.write_report, {"question": request["question"],
                                                   "notes": notes})
    return {**report, "paid": sum(request["paywalled"].values())}


def charged_once(run, world):
    """Section 4's invariant: the run completes and no charge was made twice."""
    assert run.status == "completed", f"run {run.status}"
    duplicates = world.payments.duplicate_effects
    assert duplicates == 0, f"{duplicates} duplicate charge(s)"


def _points(answer) -> set[tuple[int, str, str]]:
    if isinstance(answer, (str, bytes)) or not hasattr(answer, "__iter__"):
        raise Stop("give the broken crash points as a set of (position, activity, point) "
                   "tuples, as section 4's assertion writes them")
    points = set()
    for item in answer:
        if not (isinstance(item, tuple) and len(item) == 3 and isinstance(item[0], int)
                and isinstance(item[1], str) and isinstance(item[2], str)):
            raise Stop(f"{item!r} is not a (position, activity, point) tuple such as "
                       f"(1, 'buy', 'after_effect')")
        points.add(item)
    return points


@exercise("15.1", "The charges one after the other",
          "the set of (position, activity, point) that break 'charged once' when the two "
          "charges are made one after the other with keys ignored")
def charges_one_after_the_other(answer):
    import durablelab as dl
    from ..examples import research
    given = _points(answer)
    report = dl.explore_crashes(buy_one_by_one, research.request(limit=2, documents=3),
                                charged_once,
                                world=functools.partial(research.world, honor_keys=False))
    truth = {(int(r.position), r.activity, r.point) for r in report.broken.itertuples()}
    right, extra, missing = given & truth, given - truth, truth - given
    if right:
        yield True, f"{len(right)} of the points you give really break"
    for position, activity, point in sorted(extra):
        yield False, (f"p{position} {activity} {point} holds when the charges are made one "
                      f"after the other: at that point no charge is between its effect and "
                      f"its record")
    if missing:
        yield False, f"{len(missing)} point(s) that break are missing from your answer"


def _rate_limited(limit: int, read_seconds: float) -> tuple[int, float]:
    """The 429s the model gave and the run's virtual duration, for the agent at `limit`
    with reads of `read_seconds` (seed 0, a fresh clock and world)."""
    import durablelab as dl
    from ..examples import research
    from ..faults import Latency
    plan = dl.FaultPlan([Latency("buy", seconds=0.5), Latency("read", seconds=read_seconds),
                         Latency("draft", seconds=2.0)])
    clock = dl.VirtualClock()
    world = research.world(clock)
    with dl.Engine(clock=clock, world=world) as engine:
        run_id = engine.start(research.research, research.request(limit=limit),
                              run_id="fast", faults=plan)
        engine.run_until_idle()
        run = engine.run(run_id)
    return world.llm.usage["rate_limited"], run.ended_at - run.started_at


@exercise("15.2", "A faster model",
          "the largest limit under which the agent meets no 429 when reading a document "
          "takes 0.5 s (a whole number)")
def faster_model(limit):
    if isinstance(limit, bool) or not isinstance(limit, numbers.Integral):
        raise Stop(f"give the limit as a whole number, not {type(limit).__name__}")
    if limit < 1:
        raise Stop(f"limit={limit} is not a limit ctx.map takes: give a whole number >= 1")
    limit = int(limit)
    refused, seconds = _rate_limited(limit, 0.5)
    if refused:
        yield False, f"with limit={limit} the model still refuses {refused} request(s)"
        return
    yield True, f"with limit={limit} the model answers every request ({seconds:g} s)"
    more, more_seconds = _rate_limited(limit + 1, 0.5)
    if more:
        yield True, (f"limit={limit + 1} meets {more} 429(s) and takes {more_seconds:.1f} s: "
                     f"{limit} is the largest")
    else:
        yield False, f"a larger limit, {limit + 1}, meets no 429 either"


@exercise("15.3", "Answer politely after a cancel",
          "your workflow research_or_cancelled(ctx, request), which ends completed with "
          "{'cancelled': True, 'reason': ...} after the refunds when it is cancelled")
def answer_after_cancel(workflow):
    import durablelab as dl
    from ..examples import research
    if not callable(workflow):
        raise Stop(f"give your workflow function itself, not {type(workflow).__name__}")

    def run(cancel: bool):
        clock = dl.VirtualClock()
        world = research.world(clock)
        with dl.Engine(clock=clock, world=world) as engine:
            try:
                run_id = engine.start(workflow, research.request(limit=2),
                                      faults=research.LATENCY, run_id="polite")
            except dl.DurableLabError as exc:
                raise Stop(str(exc)) from None
            if cancel:
                engine.advance(CANCEL_AFTER)
                if engine.run(run_id).status in ("running", "waiting"):
                    engine.cancel(run_id, reason=REASON)
            engine.run_until_idle()
            return engine.run(run_id), world

    plain, _ = run(cancel=False)
    if plain.status != "completed" or not isinstance(plain.result, dict) \
            or "answer" not in plain.result:
        yield False, (f"without a cancel the run should still write the report; it ended "
                      f"{plain.status}" + (f" ({plain.error})" if plain.error else ""))
    else:
        yield True, "without a cancel it still writes the report"
    told, world = run(cancel=True)
    if told.status == "cancelled":
        yield False, "cancelled 3 s in, the run still ends 'cancelled': the code lets "\
                     "dl.Cancelled propagate"
        return
    if told.status != "completed":
        yield False, (f"cancelled 3 s in, the run ends {told.status}"
                      + (f" ({told.error})" if told.error else ""))
        return
    yield True, "cancelled 3 s in, the run ends 'completed'"
    refunds = sum(1 for e in world.payments.effects if e["op"] == "refund")
    if refunds == 2:
        yield True, "both charges were refunded"
    else:
        yield False, (f"{refunds} of the 2 charges were refunded: the saga compensates only "
                      f"when the exception leaves its with-block")
    result = told.result
    if isinstance(result, dict) and result.get("cancelled") is True \
            and result.get("reason") == REASON:
        yield True, "the result says it was cancelled, and why"
    else:
        yield False, (f"the result is {result!r}; it should say cancelled: True and carry "
                      f"the cancel's reason (dl.Cancelled has it as .reason)")
