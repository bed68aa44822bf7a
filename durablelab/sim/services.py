"""Services with ledgers: the outside world a workflow's activities change.

Each service records every call and every effect. A service that honours idempotency keys
(``honor_keys=True``, the default) answers a repeated key with the first answer and creates
no new effect; one that ignores keys creates a new effect every time, so a retry after a
crash in the window between an effect and its record shows up as a duplicate you can count.

A service can also fail on its own (``failure_rate``): a request then gets a
`ServiceUnavailable` (HTTP 503) before it has any effect, drawn from the service's seed and
the request's number, so the same calls fail the same way on every run of a notebook.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any
from ..errors import BadValue


class ServiceUnavailable(Exception):
    """The service answered 503; `dl.classify` makes it a Transient error."""

    status_code = 503


class Service:
    """A simulated external system with a ledger of calls and effects."""

    prefix = "fx"

    def __init__(self, honor_keys: bool = True, *, failure_rate: float = 0.0, seed: int = 0):
        if not 0.0 <= failure_rate <= 1.0:
            raise BadValue(f"{type(self).__name__}(failure_rate={failure_rate!r}): a "
                             f"probability in [0, 1]")
        self.honor_keys = honor_keys
        self.failure_rate = failure_rate
        self.seed = seed
        #: every request, in arrival order: {"op", "args", "key"}.
        self.calls: list[dict] = []
        #: every effect created: {"id", "op", "args", "key"}.
        self.effects: list[dict] = []
        self._answers: dict[str, Any] = {}

    def perform(self, op: str, args: dict, idempotency_key: str | None = None) -> dict:
        """Handle one request: fail (503), replay the answer for a known key, or create an
        effect."""
        number = len(self.calls) + 1
        self.calls.append({"op": op, "args": args, "key": idempotency_key})
        if self.failure_rate and random.Random(
                f"{self.seed}:{self.prefix}:{number}").random() < self.failure_rate:
            raise ServiceUnavailable(f"{type(self).__name__} is unavailable (503) for "
                                     f"request {number} ({op})")
        if self.honor_keys and idempotency_key is not None and idempotency_key in self._answers:
            return self._answers[idempotency_key]
        effect_id = f"{self.prefix}_{len(self.effects) + 1}"
        self.effects.append({"id": effect_id, "op": op, "args": args, "key": idempotency_key})
        answer = {"id": effect_id, **args}
        if idempotency_key is not None:
            self._answers.setdefault(idempotency_key, answer)
        return answer

    @property
    def duplicate_effects(self) -> int:
        """Effects created again for a key that already had one: what keys exist to prevent."""
        keyed = Counter(e["key"] for e in self.effects if e["key"] is not None)
        return sum(n - 1 for n in keyed.values())

    def reset(self) -> None:
        self.calls.clear()
        self.effects.clear()
        self._answers.clear()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(honor_keys={self.honor_keys}: {len(self.calls)} calls, "
                f"{len(self.effects)} effects, {self.duplicate_effects} duplicates)")


class Payments(Service):
    prefix = "ch"

    def charge(self, customer: str, amount: float, idempotency_key: str | None = None) -> dict:
        return self.perform("charge", {"customer": customer, "amount": amount}, idempotency_key)

    def refund(self, charge_id: str, idempotency_key: str | None = None) -> dict:
        return self.perform("refund", {"charge_id": charge_id}, idempotency_key)


class Email(Service):
    prefix = "msg"

    def send(self, to: str, subject: str, idempotency_key: str | None = None) -> dict:
        return self.perform("send", {"to": to, "subject": subject}, idempotency_key)


class ERP(Service):
    prefix = "vnd"

    def create_vendor(self, legal_name: str, country: str,
                      idempotency_key: str | None = None) -> dict:
        return self.perform("create_vendor", {"legal_name": legal_name, "country": country},
                            idempotency_key)

    def deactivate_vendor(self, vendor_id: str, idempotency_key: str | None = None) -> dict:
        return self.perform("deactivate_vendor", {"vendor_id": vendor_id}, idempotency_key)


class Bank(Service):
    prefix = "payee"

    def register_payee(self, vendor_id: str, iban: str,
                       idempotency_key: str | None = None) -> dict:
        return self.perform("register_payee", {"vendor_id": vendor_id, "iban": iban},
                            idempotency_key)

    def remove_payee(self, payee_id: str, idempotency_key: str | None = None) -> dict:
        return self.perform("remove_payee", {"payee_id": payee_id}, idempotency_key)
