"""Checkers for the exercises of lesson 02 (crashes and idempotency).

Each checker runs the lesson's checkout (charge a card, send a receipt) on fresh simulated
services, under the fault plan or durability mode the exercise names, and compares the
ledgers it finds with what the learner counted.
"""

from __future__ import annotations

import numbers

from . import Stop, exercise

ORDER = {"customer": "cus_ada", "amount": 42.0, "email": "ada@example.com"}
POINTS = ("before_activity", "after_effect", "after_record", "during_wait")


def _checkout(honor_keys=True, *, start_to_close=None, sleep=None, key_from_workflow=False):
    """The lesson's checkout and its two services: (workflow, payments, email)."""
    import durablelab as dl
    from ..sim import Email, Payments
    payments, email = Payments(honor_keys=honor_keys), Email(honor_keys=honor_keys)
    pay = dl.RetryPolicy(max_attempts=5, initial=10.0, backoff=2.0, jitter="none")
    limits = {} if start_to_close is None else {"start_to_close": start_to_close}

    def charge_card(customer, amount, idempotency_key=None):
        return payments.charge(customer, amount, idempotency_key=idempotency_key)

    def charge_card_with(customer, amount, key):
        return payments.charge(customer, amount, idempotency_key=key)

    def send_receipt(to, charge_id, idempotency_key=None):
        return email.send(to, f"Your receipt for {charge_id}", idempotency_key=idempotency_key)

    def checkout(ctx, order):
        if key_from_workflow:
            charge = ctx.activity("charge_card", charge_card_with, order["customer"],
                                  order["amount"], ctx.uuid(), policy=pay)
        else:
            charge = ctx.activity("charge_card", charge_card, order["customer"],
                                  order["amount"], policy=pay, **limits)
        if sleep is not None:
            ctx.sleep(sleep)
        receipt = ctx.activity("send_receipt", send_receipt, order["email"], charge["id"],
                               policy=pay)
        return {"charge": charge["id"], "receipt": receipt["id"]}

    return checkout, payments, email


def _run(workflow, faults, durability="sync"):
    import durablelab as dl
    with dl.Engine(durability=durability) as engine:
        run_id = engine.start(workflow, ORDER, run_id="exercise-02", seed=1, faults=faults)
        engine.run_until_idle()
        return engine.run(run_id)


def _count(value, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise Stop(f"give {what} as a number, not {type(value).__name__}")
    return value


def _keys(answer, keys, example):
    if not isinstance(answer, dict):
        raise Stop(f"give a dict like {example}, not {type(answer).__name__}")
    missing = [k for k in keys if k not in answer]
    if missing:
        raise Stop(f"the dict has no {', '.join(repr(k) for k in missing)}: give {example}")


@exercise("02.1", "A lost answer",
          "a dict {'calls': n, 'honoured': charges, 'ignored': charges, 'like': crash point}")
def lost_answer(answer):
    import durablelab as dl
    _keys(answer, ("calls", "honoured", "ignored", "like"),
          "{'calls': 2, 'honoured': 1, 'ignored': 1, 'like': 'before_activity'}")
    lost = [dl.faults.Timeout("charge_card", attempts=[1])]
    seen = {}
    for honor_keys, label in ((True, "honoured"), (False, "ignored")):
        workflow, payments, _ = _checkout(honor_keys, start_to_close=5)
        _run(workflow, lost)
        seen[label] = (len(payments.calls), len(payments.effects))
    calls = _count(answer["calls"], "'calls'")
    yield calls == seen["honoured"][0], (
        "the payment service gets that many calls" if calls == seen["honoured"][0] else
        f"{calls:g} is not the number of calls the payment service gets: the function ran on "
        f"attempt 1, then the engine retried")
    for label in ("honoured", "ignored"):
        charges = _count(answer[label], f"'{label}'")
        right = charges == seen[label][1]
        yield right, (f"with keys {label}: that many charges" if right else
                      f"with keys {label}: {charges:g} is not the number of charges in the "
                      f"ledger (payments.effects)")
    like = answer["like"]
    if like not in POINTS:
        yield False, f"'like' should be one of the crash points {', '.join(POINTS)}"
    else:
        right = like == "after_effect"
        yield right, ("a lost answer is the crash window: the effect happened, its record "
                      "did not" if right else
                      f"{like}: compare what happened and what history holds when the "
                      f"answer is lost")


@exercise("02.2", "Crash twice",
          "a dict {'payments': calls, 'email': calls} the two services got")
def crash_twice(answer):
    import durablelab as dl
    _keys(answer, ("payments", "email"), "{'payments': 1, 'email': 1}")
    workflow, payments, email = _checkout()
    run = _run(workflow, [dl.faults.Crash("charge_card", point="after_effect"),
                          dl.faults.Crash("send_receipt", point="after_effect")])
    rights = []
    for name, service in (("payments", payments), ("email", email)):
        given = _count(answer[name], f"'{name}'")
        right = given == len(service.calls)
        rights.append(right)
        yield right, (f"{name}: that many calls" if right else
                      f"{name}: {given:g} is not the number of calls in its ledger "
                      f"({name}.calls); each crash is in the window of its own activity")
    if all(rights) and run.status == "completed":   # said only once the counts are right
        yield True, "each crash re-ran only its own activity, and the run still completed"


@exercise("02.3", "A key from the workflow",
          "how many distinct keys the payment service saw under \"exit\" durability, "
          "with the key drawn by ctx.uuid() (a number)")
def key_from_workflow(answer):
    import durablelab as dl
    given = _count(answer, "the number of distinct keys")
    # datasets/faults/payment_crash_window.json, the lesson's crash-window plan
    plan = [dl.faults.Crash("charge*", point="after_effect", times=1)]
    workflow, payments, _ = _checkout(key_from_workflow=True)
    _run(workflow, plan, durability="exit")
    keys = len({call["key"] for call in payments.calls})
    if given == keys:
        yield True, (f"{given:g}: the crash threw the recorded uuid away, and the "
                     f"re-executed run drew it again")
        yield True, "ctx.uuid() is drawn from the run's seed and position, not from the clock"
    elif given > keys:
        yield False, (f"{given:g}: the crash took the recorded uuid with it, but read "
                      f"help(dl.Context.uuid): what is it drawn from?")
    else:
        yield False, f"{given:g} is not the number of distinct keys in payments.calls"


@exercise("02.4", "Batch mode",
          "the charge calls the payment service gets in \"batch\" mode with ctx.sleep(60) "
          "between the two activities (a number)")
def batch_mode(answer):
    import durablelab as dl
    given = _count(answer, "the number of charge calls")
    workflow, payments, _ = _checkout(sleep=60)
    _run(workflow, [dl.faults.Crash("send_receipt", point="before_activity")],
         durability="batch")
    calls = len(payments.calls)
    if given == calls:
        yield True, (f"{given:g}: the charge was committed when its wake-up ended at the "
                     f"sleep; the crash took only the wake-up it hit")
    elif given > calls:
        yield False, (f"{given:g}: that is what \"batch\" costs without the sleep; where "
                      f"does a wake-up end now, and what is committed there?")
    else:
        yield False, f"{given:g} is not the number of calls in payments.calls"
