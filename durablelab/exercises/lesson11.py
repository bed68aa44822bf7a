"""Checkers for the exercises of lesson 11 (the durable agent)."""

from __future__ import annotations

import numbers

from . import Stop, exercise

APPROVAL = "approve:charge_card"


def _careful_agent(ctx, task):
    """Lesson 11's careful agent: charging the card waits for a person's approval."""
    from .. import agents
    shop = ctx.world
    return agents.react(ctx, task, model=shop.model, tools=shop.tools,
                        approval=["charge_card"])


@exercise("11.1", "Refuse the charge",
          "the Run of the careful agent after you refused the approval (engine.run(careful))")
def refuse_the_charge(run):
    from ..run import Run
    if not isinstance(run, Run):
        raise Stop(f"give the run itself, engine.run(careful), not {type(run).__name__}")
    history = run.history
    events = list(zip(history["kind"], history["name"], history["value"]))
    if not any(kind == "wait_signal" and name == APPROVAL for kind, name, _ in events):
        raise Stop("this run never waited for an approval: start careful_agent, whose "
                   "charge_card needs one")
    answers = [value["value"] for kind, name, value in events
               if kind == "signal_received" and name == APPROVAL]
    if not answers:
        yield False, (f"no answer reached the approval wait: send the signal "
                      f"{APPROVAL!r} before the deadline")
    else:
        refused = all(isinstance(a, dict) and a.get("approved") is False for a in answers)
        yield refused, ("the approval was refused" if refused else
                        "the approval it received was not a refusal: send {'approved': False}")
    charged = any(kind == "activity" and name == "charge_card" for kind, name, _ in events)
    yield not charged, ("and the card was never charged" if not charged else
                        "but the card was charged")
    if run.status in ("running", "waiting"):
        yield False, "the run has not finished: call engine.run_until_idle()"
    else:
        answered = run.status == "completed" and (run.result or {}).get(
            "stop_reason") == "answered"
        yield answered, ("the agent answered the customer" if answered else
                         f"the run ended {run.status} without an answer")


@exercise("11.2", "Nobody answers",
          "the virtual seconds the careful agent waits for an approval that never comes "
          "(a number)")
def nobody_answers(seconds):
    import durablelab as dl
    from ..agents.shop import TASK, Shop
    if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real):
        raise Stop(f"give a number of seconds, not {type(seconds).__name__}")
    with dl.Engine(world=Shop()) as engine:
        run_id = engine.start(_careful_agent, TASK, run_id="nobody-answers")
        engine.run_until_idle()
        history = engine.run(run_id).history
    at = {kind: when for kind, name, when in zip(history["kind"], history["name"],
                                                 history["recorded_at"])
          if name == APPROVAL}
    waited = float(at["signal_timeout"] - at["wait_signal"])
    if abs(seconds - waited) <= 1:
        yield True, f"{seconds:g} s: the wait's deadline, met in no real time"
    elif abs(seconds - waited / 60) <= 1 or abs(seconds - waited / 3600) <= 0.1:
        yield False, "that is the right wait in another unit: the answer is in seconds"
    elif seconds < 1:
        yield False, ("that is how long it takes in real time: the question is the virtual "
                      "time that passes (look at the history's recorded_at)")
    else:
        yield False, (f"{seconds:g} s is not how long the agent waits: in run.history, "
                      f"subtract the recorded_at of the {APPROVAL!r} wait_signal event from "
                      f"that of its signal_timeout")


TOOLS = ("lookup_order", "charge_card", "send_receipt")


@exercise("11.3", "Only lost answers",
          "the tools whose effect the naive loop doubles under naive_vs_durable(range(30), "
          "lose=0.3): a list of tool names")
def only_lost_answers(answer):
    from ..agents.shop import Shop, naive_agent
    given = [answer] if isinstance(answer, str) else answer
    if not isinstance(given, (list, tuple, set)) or not all(t in TOOLS for t in given):
        raise Stop(f"give a list of tool names: {', '.join(TOOLS)}")
    doubled = set()
    for seed in range(30):
        outcome = naive_agent(Shop(seed, lose=0.3))
        if outcome["charges"] > 1:
            doubled.add("charge_card")
        if outcome["emails"] > 1:
            doubled.add("send_receipt")
    for tool in TOOLS:
        said, truth = tool in given, tool in doubled
        if said and truth:
            yield True, f"{tool}: doubled by the naive loop"
        elif said:
            yield False, (f"{tool}: its effect is never doubled"
                          + (" (looking an order up changes nothing)"
                             if tool == "lookup_order" else ""))
        elif truth:
            yield False, "a tool whose effect the naive loop doubles is missing"


@exercise("11.4", "Fix model_in_workflow",
          "your fixed model_in_workflow: the model call made with ctx.activity('model', ...)")
def fix_model_in_workflow(fn):
    import durablelab as dl
    from ..agents.shop import TASK, Shop, durable_agent
    from ..faults import Crash
    if not callable(fn):
        raise Stop("give the workflow function itself, not its result")
    calm = Shop()
    with dl.Engine(world=calm) as engine:
        engine.start(durable_agent, TASK, run_id="calm")
        engine.run_until_idle()
    shop = Shop()
    with dl.Engine(world=shop) as engine:
        run_id = engine.start(fn, TASK, run_id="fixed", faults=dl.FaultPlan(
            [Crash("charge_card", point="after_effect")]))
        engine.run_until_idle()
        run = engine.run(run_id)
    if run.status == "diverged":
        yield False, (f"after the crash, replay still diverges ({run.error.reason} at "
                      f"position {run.error.position}): the model's answers must come "
                      f"from history")
        return
    if run.status != "completed":
        yield False, f"the run ends {run.status}" + (f": {run.error}" if run.error else "")
        return
    yield True, "it survives the crash and completes"
    names = set(run.history["name"])
    yield "model" in names, ("the model calls are recorded as the activity 'model'"
                             if "model" in names else
                             "no activity named 'model' is recorded")
    paid, needed = shop.llm.usage["calls"], calm.llm.usage["calls"]
    yield paid <= needed, (f"the model answers paid for are no more than on a calm day"
                           if paid <= needed else
                           f"it pays for {paid} model answers where a calm day needs fewer")
    yield len(shop.payments.effects) == 1, ("the card is charged once"
                                            if len(shop.payments.effects) == 1 else
                                            f"the card is charged "
                                            f"{len(shop.payments.effects)} times")
