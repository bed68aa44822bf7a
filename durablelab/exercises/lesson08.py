"""Checkers for the exercises of lesson 08 (sagas)."""

from __future__ import annotations

from collections import Counter

from . import Stop, exercise

COMPENSATIONS = ("deactivate_vendor", "remove_payee")


def _onboard(plan, escalation=None):
    """Run lesson 08's onboarding under `plan` (approved after an hour; `escalation`, if given,
    is the answer to the signal "compensate:remove_payee" ten minutes later) and return the
    world it touched: (run, world)."""
    import durablelab as dl
    from ..examples import onboarding as ob
    ob.world.reset(honor_keys=True)
    with dl.Engine() as engine:
        run_id = engine.start(ob.onboard_vendor, {"vendor_id": "v-42"}, run_id="exercise-08",
                              faults=dl.FaultPlan(plan))
        engine.advance(3600)
        engine.signal(run_id, "approval", {"approved": True})
        engine.advance(600)
        if escalation is not None:
            engine.signal(run_id, "compensate:remove_payee", escalation, signal_id="ops-1")
        engine.run_until_idle()
        return engine.run(run_id), ob.world


def _names(answer, what: str) -> list[str]:
    if not isinstance(answer, (list, tuple)) or not all(isinstance(name, str)
                                                     for name in answer):
        raise Stop(f"give {what} as a list of names, such as ['create_vendor'] "
                   f"([] for none)")
    return list(answer)


@exercise("08.1", "A crash after the compensation was recorded",
          "the compensations the services were called for twice: a list of names, [] for "
          "none")
def crash_after_record(answer):
    from .. import faults as F
    given = _names(answer, "the compensations called twice")
    run, world = _onboard([F.Fail("send_welcome", status=400, message="mailbox does not exist"),
                           F.ServerError("remove_payee", attempts=[1, 2]),
                           F.Crash("remove_payee", point="after_record")])
    calls = Counter(call["op"] for service in (world.erp, world.bank)
                    for call in service.calls)
    twice = sorted(name for name in COMPENSATIONS if calls[name] >= 2)
    wrong_in = sorted(set(given) - set(twice))
    if wrong_in:
        yield False, (f"{', '.join(wrong_in)}: its service saw it once. A crash after "
                      f"the result was recorded costs a replay, and replay hands the "
                      f"recorded result back instead of calling again")
    missing = sorted(set(twice) - set(given))
    if missing:
        yield False, "a compensation that was called twice is missing from your list"
    if not wrong_in and not missing:
        yield True, ("that is what the ERP's and the bank's ledgers of calls say"
                     if twice else "no service was called twice for a compensation: the "
                     "ledgers agree")


@exercise("08.3", "A person resolves the compensation",
          "the bank's ledger after {'resolved': True}: the list of its effects' 'op', in "
          "order")
def resolved_by_hand(answer):
    from .. import faults as F
    given = _names(answer, "the bank's ledger")
    run, world = _onboard([F.Fail("send_welcome", status=400, message="mailbox does not exist"),
                           F.ServerError("remove_payee", times=10)],
                          escalation={"resolved": True})
    truth = [effect["op"] for effect in world.bank.effects]
    if given == truth:
        yield True, "that is the bank's ledger, effect for effect"
        yield True, (f"the payee's removal is not in it: the run's history records that a "
                     f"person did it by hand, the saga undid the vendor and the run ended "
                     f"{run.status} with the original error")
    elif "remove_payee" in given:
        yield False, ("{'resolved': True} does not run remove_payee again: it records that "
                      "a person undid it by hand, outside the bank's API")
    elif len(given) < len(truth):
        yield False, "an effect that did happen is missing: what did the bank do before the failure?"
    else:
        yield False, "that is not what the bank's ledger holds"
