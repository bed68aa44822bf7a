"""Checkers for the exercises of lesson 06 (looking at runs).

The checkers run lesson 01's onboarding workflow and lesson 02's checkout again under the
lesson's fault plans, or load the learner's export, and compare what those runs record
with the learner's reading of them.
"""

from __future__ import annotations

import math
import numbers
from pathlib import Path

from . import Stop, exercise

DAY = 86400.0


def _plan(name: str):
    """A fault plan shipped with the lessons (datasets/faults/NAME), as the lesson reads it."""
    import durablelab as dl
    from ..curriculum import dataset
    return dl.FaultPlan.from_json(dataset("faults", name))


def _faults():
    import durablelab as dl
    F = dl.faults
    return dl.FaultPlan([
        F.ServerError("fetch_documents", attempts=[1], status=503),
        F.RateLimit("extract_fields", attempts=[1], retry_after=3600),
        F.Crash("approval", point="during_wait"),
        F.Crash("create_vendor", point="after_effect"),
    ])


def _onboard(plan, seed, approve_at):
    """An onboarding run under `plan`, approved at `approve_at` if it is waiting then."""
    import durablelab as dl
    from ..examples.onboarding import onboard_vendor, world
    world.reset()
    with dl.Engine() as engine:
        run_id = engine.start(onboard_vendor, {"vendor_id": "v-42"}, run_id=f"onboard-{seed}",
                              seed=seed, faults=plan)
        engine.advance(approve_at)
        if engine.run(run_id).status == "waiting":
            engine.signal(run_id, "approval", {"approved": True, "by": "maria"},
                          signal_id="click-1")
        engine.run_until_idle()
        run = engine.run(run_id)
    world.reset()
    return run


@exercise("06.1", "Approve earlier",
          "the crash points the run approved after one day meets: run.crashes.point.tolist()")
def approve_earlier(answer):
    if isinstance(answer, str) or not isinstance(answer, (list, tuple)):
        raise Stop("give a list of crash points, run.crashes.point.tolist()")
    truth = list(_onboard(_faults(), 7, 1 * DAY).crashes.point)
    given = list(answer)
    if given == truth:
        yield True, "those are the crashes the run meets"
        yield True, ("the during_wait crash is due halfway through the wait the run really "
                     "waits; approved after one day, the wait ends before that instant")
    elif given == ["during_wait", "after_effect"]:
        yield False, ("those are the crashes of the run approved after 2.5 days; send the "
                      "approval after one day and look at run.crashes again")
    elif "during_wait" in given:
        yield False, ("the run approved after one day does not die during its wait: when is "
                      "the during_wait crash due?")
    else:
        yield False, "those are not the crash points in run.crashes of the run approved early"


def _checkout_durations(seed: int = 16) -> dict:
    import durablelab as dl
    from ..sim import Email, Payments
    payments, email = Payments(), Email()

    def charge_card(customer, amount, idempotency_key=None):
        return payments.charge(customer, amount, idempotency_key=idempotency_key)

    def send_receipt(to, charge_id, idempotency_key=None):
        return email.send(to, f"Your receipt for {charge_id}", idempotency_key=idempotency_key)

    def checkout(ctx, order):
        policy = dl.RetryPolicy(**order["retry"])
        charge = ctx.activity("charge_card", charge_card, order["customer"], order["amount"],
                              policy=policy)
        receipt = ctx.activity("send_receipt", send_receipt, order["email"], charge["id"],
                               policy=policy)
        return {"charge": charge["id"], "receipt": receipt["id"]}

    storm = _plan("rate_limit_storm.json")
    with dl.Engine() as shop:
        for jitter in ("none", "full"):
            order = {"customer": "ada", "amount": 42.0, "email": "ada@example.com",
                     "retry": {"max_attempts": 6, "initial": 1.0, "backoff": 2.0,
                               "jitter": jitter}}
            shop.start(checkout, order, run_id=jitter, seed=seed, faults=storm)
        shop.run_until_idle()
        frame = dl.compare([shop.run("none"), shop.run("full")])
    return frame["virtual_duration"].to_dict()


@exercise("06.2", "Jitter",
          "a dict {'first': 'none' or 'full', 'none': seconds}: which checkout finishes "
          "first, and the virtual_duration of the one without jitter (seed 16)")
def jitter(answer):
    if not isinstance(answer, dict) or not {"first", "none"} <= set(answer):
        raise Stop("give a dict {'first': 'none' or 'full', 'none': seconds}")
    runs = {seed: _checkout_durations(seed) for seed in (16, 1, 2, 3)}
    first, seconds = answer["first"], answer["none"]
    if first not in ("none", "full"):
        yield False, "'first' is the jitter of the run that finishes first: 'none' or 'full'"
    elif first == "full":
        never_later = all(d["full"] <= d["none"] for d in runs.values())
        yield never_later, ("full jitter finishes first, and with the same 429s it never "
                            "finishes later: each of its waits is drawn below the cap the "
                            "other run waits in full" if never_later else
                            "full jitter does not always finish first here")
    else:
        yield False, ("with the same seed both runs meet the same 429s on the same attempts; "
                      "compare each wait with its cap")
    if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real):
        yield False, "'none': give the seconds, a number"
    elif math.isclose(seconds, runs[16]["none"], abs_tol=1e-6):
        yield True, f"without jitter the checkout takes {seconds:g} s, as dl.compare says"
    else:
        yield False, (f"'none': {seconds:g} s is not that run's virtual_duration (seed 16, "
                      f"max_attempts=6, initial=1.0, backoff=2.0, jitter=\"none\")")


def _blame_holds(rule_type: str) -> tuple[bool, list[str]]:
    """(no run is left running, the statuses) for seeds 1-6 of everything_at_once.json
    without the rules of type `rule_type`."""
    import durablelab as dl
    plan = _plan("everything_at_once.json")
    kept = dl.FaultPlan([r for r in plan.rules if type(r).__name__ != rule_type])
    statuses = [_onboard(kept, seed, 2 * DAY).status for seed in range(1, 7)]
    return "running" not in statuses, statuses


@exercise("06.3", "Everything at once",
          "the rule of everything_at_once.json that leaves runs running: a rule from "
          "plan.rules, or its type's name")
def everything_at_once(answer):
    from ..faults import Rule
    if not isinstance(answer, (str, Rule)):
        raise Stop("give one rule from plan.rules, or its type's name (a string)")
    name = answer if isinstance(answer, str) else type(answer).__name__
    kinds = {type(r).__name__ for r in _plan("everything_at_once.json").rules}
    if name not in kinds:
        raise Stop(f"the plan has no {name} rule; its rules are {', '.join(sorted(kinds))}")
    holds, statuses = _blame_holds(name)
    if holds:
        yield True, f"without the {name} rules, no run of seeds 1 to 6 is left running"
        yield True, "an attempt nobody answers needs a time-out of its own (lesson 04)"
    else:
        yield False, (f"without the {name} rules, {statuses.count('running')} of the six runs "
                      f"are still running: look at what the stuck run's last attempt is "
                      f"waiting for")


@exercise("06.4", "One file for all",
          "the path of one .jsonl export holding the onboarding run and both checkout runs")
def one_file(path):
    import durablelab as dl
    if not isinstance(path, (str, Path)):
        raise Stop(f"give the path of your export (a string or a Path), not "
                   f"{type(path).__name__}")
    if not Path(path).is_file():
        raise Stop(f"there is no file at {path}: dl.export(runs, path) writes it")
    try:
        runs = dl.load(path)
    except dl.DurableLabError as err:
        raise Stop(f"dl.load cannot read it: {getattr(err, 'problem', err)}") from None
    runs = runs if isinstance(runs, list) else [runs]
    yield Path(path).suffix == ".jsonl", ("it is JSON Lines" if Path(path).suffix == ".jsonl"
                                          else "the exercise asks for a .jsonl file")
    names = [run.workflow.rsplit(":", 1)[-1] for run in runs]
    onboarding, checkouts = names.count("onboard_vendor"), names.count("checkout")
    yield onboarding == 1, ("it holds the onboarding run" if onboarding == 1 else
                            f"it holds {onboarding} onboarding runs, not one")
    statuses = sorted(run.status for run, name in zip(runs, names) if name == "checkout")
    both = statuses == ["completed", "failed"]
    yield both, ("and both checkout runs, the hasty one that failed and the patient one"
                 if both else f"its checkout runs are {statuses or 'missing'}: export the "
                              f"hasty and the patient run")
    frame = dl.compare(path)
    yield len(frame) == len(runs), ("dl.compare(path) reads it, a row per run"
                                    if len(frame) == len(runs) else
                                    "dl.compare(path) does not give a row per run")
