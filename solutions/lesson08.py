"""Lesson 08 (sagas): solutions."""

#: 08.1: a crash after remove_payee's result was recorded costs a replay, and replay hands
#: the recorded result back: no compensation is called twice.
CALLED_TWICE: list[str] = []

#: 08.3: {"resolved": True} records that a person removed the payee by hand; the bank's
#: API never saw a removal, so its ledger holds only the registration.
BANK_LEDGER = ["register_payee"]

#: What `dl.exercises.check` takes for each exercise (tests/test_exercises.py checks them all).
ANSWERS = {"08.1": lambda: CALLED_TWICE, "08.3": lambda: BANK_LEDGER}
