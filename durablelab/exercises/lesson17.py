"""Checkers for the exercises of lesson 17 (your framework under faults): each runs
LangGraph's crash explorer on the lesson's order agent, or on the learner's graph.

Pydantic AI and LangGraph are imported only when a checker runs, so that `dl.exercises`
loads without the extras; without them a checker says which extra to install."""

from . import Stop, exercise

#: A call inside a node has these two: its result is saved only with the node's writes.
POINTS = ("before_activity", "after_effect")


def _langgraph():
    """The LangGraph bridge and the lesson's agent, or Stop naming the extra to install."""
    try:
        from ..backends import langgraph as lgb
        from ..examples import three_ways
    except ImportError as exc:     # FrameworkError says which extra
        raise Stop(str(exc)) from None
    return lgb, three_ways


def _windows(answer) -> set[tuple[str, str]]:
    if isinstance(answer, (str, bytes, dict)) or not hasattr(answer, "__iter__"):
        raise Stop("give the crash windows as a set of (activity, point) tuples, such as "
                   "{('charge_card', 'after_effect')}")
    found = set()
    for item in answer:
        if not (isinstance(item, tuple) and len(item) == 2
                and all(isinstance(part, str) for part in item)):
            raise Stop(f"{item!r} is not an (activity, point) tuple such as "
                       f"('charge_card', 'after_effect')")
        if item[1] == "after_record":
            raise Stop(f"{item!r}: a tool call inside a LangGraph node has no after_record "
                       f"point: LangGraph saves its result only with the whole node's writes, "
                       f"so the explorer crashes a call at before_activity and after_effect")
        if item[1] not in POINTS:
            raise Stop(f"{item[1]!r} is not a crash point of a call inside a LangGraph node: "
                       f"one of {', '.join(POINTS)}")
        found.add(item)
    return found


@exercise("17.1", "Which windows break when only the receipt ignores its key",
          "the set of (activity, point) where a crash breaks 'one charge, one receipt' in "
          "the lesson's LangGraph graph when only the email service ignores keys")
def receipt_windows(answer):
    given = _windows(answer)
    lgb, tw = _langgraph()
    report = lgb.explore_crashes(tw.build_graph, tw.graph_input(), tw.one_charge_one_receipt,
                                 world=tw.keyless_receipts)
    truth = {(row.activity, row.point) for row in report.broken.itertuples()}
    right, extra, missing = given & truth, given - truth, truth - given
    if right:
        yield True, f"{len(right)} of the windows you give really break"
    for activity, point in sorted(extra):
        if activity == "charge_card":
            yield False, (f"{activity} {point} holds: the tools node runs the charge again, "
                          f"but the payment service honours the key it sends again")
        else:
            yield False, (f"{activity} {point} holds: a crash there sends no second receipt "
                          f"(was the receipt sent yet?)")
    if missing:
        yield False, f"{len(missing)} window(s) that break are missing from your answer"


@exercise("17.2", "A graph that repeats only the call in flight",
          "a build(checkpointer, world) returning the compiled graph, whose crash "
          "exploration (the charge ignoring its key) breaks only at the charge's own "
          "after_effect window")
def one_call_per_step(build):
    if not callable(build):
        raise Stop(f"give the function itself, build(checkpointer, world), not "
                   f"{type(build).__name__}")
    from ..errors import DurableLabError
    lgb, tw = _langgraph()
    try:
        report = lgb.explore_crashes(build, tw.graph_input(), tw.one_charge_one_receipt,
                                     world=tw.keyless_charges)
    except DurableLabError as exc:
        raise Stop(str(exc)) from None
    except Exception as exc:       # the learner's graph: say what it raised, and stop
        raise Stop(f"your graph raised {type(exc).__name__}: {exc}") from None
    baseline = report.frame.iloc[0]
    if not baseline.holds:
        raise Stop(f"without any crash the graph does not charge once and send one receipt "
                   f"({baseline.detail}): fix that first")
    yield True, "without a crash it charges once and sends one receipt"
    broken = {(row.activity, row.point) for row in report.broken.itertuples()}
    window = ("charge_card", "after_effect")
    if window in broken:
        yield True, ("a crash between the charge and its save still charges twice: no graph "
                     "can close that window, only the service's keys can")
    else:
        yield False, ("a crash right after the charge should charge twice here (the service "
                      "ignores keys): call the charge through the injector, "
                      "inject.call('charge_card', ...), so the explorer can crash there")
    others = sorted(broken - {window})
    for activity, point in others:
        yield False, (f"a crash at {activity} {point} still charges twice: LangGraph runs the "
                      f"whole node again, and the charge is in it")
    if not others and window in broken:
        yield True, "no crash anywhere else repeats the charge"
