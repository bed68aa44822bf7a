"""Heartbeats: how a long activity says "still alive, and here is how far I got".

An activity that runs for minutes (a batch of model calls, a big upload) promises, with
`ctx.activity(..., heartbeat=seconds)`, to report at least that often. Its code calls
`dl.heartbeat(details)` as it goes; the engine records the details at once, as a fact
about the world (in every durability mode, like a fault firing), so they outlive the
worker. If the worker dies, the missing heartbeat is how the loss is noticed (the engine
marks the attempt timed out one heartbeat interval after the last one went out). The
retried attempt, or the re-execution after a crash, calls `dl.last_heartbeat()` and gets
the last details back, so it resumes where the lost one got to instead of starting over:

    def summarise(documents):
        done = dl.last_heartbeat() or 0          # None on the first attempt
        for i in range(done, len(documents)):
            summarise_one(documents[i])
            dl.heartbeat(i + 1)                  # JSON details: here, how many are done
        return "ok"

As in Temporal (`activity.heartbeat`, `activity.info().heartbeat_details`), only the last
details of each activity are kept, and only activity code may call these: a workflow
function has no attempt to report on.
"""

from __future__ import annotations

import json
import warnings
from contextvars import ContextVar
from typing import Any

from .errors import HeartbeatError, HeartbeatIgnoredWarning, SerializationError

# The activity attempt running in this thread (or task), if any.
_CURRENT: ContextVar["_Current | None"] = ContextVar("durablelab_heartbeat", default=None)


def _details_json(value: Any, activity: str, where: str) -> str:
    """The JSON of a heartbeat (its details in it), or the SerializationError that says the
    details are not JSON, naming the activity."""
    try:
        return json.dumps(value, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise SerializationError(
            f"dl.heartbeat(details) in {activity}: the details are not JSON ({exc}); pass "
            f"plain data such as a count, an offset or a dict of them.",
            what="heartbeat details", where=where) from None


class _Current:
    """Makes itself what `dl.heartbeat` and `dl.last_heartbeat` find, for the activity
    called inside ``with``; `current()` is what they report to."""

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = _CURRENT.set(self)

    def __exit__(self, *exc) -> None:
        _CURRENT.reset(self._token)


class Attempt:
    """One activity attempt that may heartbeat: where to record, and what was recorded."""

    def __init__(self, store, clock, run_id: str, position: int, attempt: int, name: str):
        self.store, self.clock = store, clock
        self.run_id, self.position, self.attempt, self.name = run_id, position, attempt, name
        self.beats = 0

    def record(self, details: Any) -> None:
        text = _details_json({"attempt": self.attempt, "sent_at": self.clock.now(),
                              "details": details}, f"activity {self.name!r} (run "
                             f"{self.run_id!r}, position {self.position})",
                             f"{self.run_id}:{self.position}")
        self.store.save_heartbeat(self.run_id, self.position, text)
        self.beats += 1

    def last(self) -> Any:
        found = self.store.last_heartbeat(self.run_id, self.position)
        return None if found is None else json.loads(found)["details"]


class attempt(_Current):   # noqa: N801 (used as a function: ``with heartbeat.attempt(...):``)
    """Make `dl.heartbeat` and `dl.last_heartbeat` work for the activity called inside.
    (A class rather than a `contextlib.contextmanager`: every attempt enters one, and a
    generator-based one costs several times as much. The `Attempt` is made only when the
    activity asks for it: most never heartbeat.)"""

    __slots__ = ("_where", "_attempt")

    def __init__(self, store, clock, run_id: str, position: int, attempt: int, name: str):
        self._where = (store, clock, run_id, position, attempt, name)
        self._attempt = None

    def current(self) -> Attempt:
        if self._attempt is None:
            self._attempt = Attempt(*self._where)
        return self._attempt


class unrecorded(_Current):   # noqa: N801 (used as a function, like `attempt`)
    """For the activity called inside, on an engine that has no heartbeats (DBOS
    Transact): `dl.heartbeat` checks its details and keeps nothing, `dl.last_heartbeat` is
    None (a retried attempt starts over), and the first heartbeat of each activity says so
    in a `HeartbeatIgnoredWarning`. So activity code written for `dl.Engine` runs there
    unchanged, as the engine that runs it can."""

    __slots__ = ("_name", "_engine", "_warned")

    def __init__(self, name: str, engine: str, warned: set):
        self._name, self._engine, self._warned = name, engine, warned

    def current(self) -> "unrecorded":
        return self

    def record(self, details: Any) -> None:
        _details_json(details, f"activity {self._name!r}", self._name)   # as `Attempt.record`
        if self._name not in self._warned:
            self._warned.add(self._name)
            warnings.warn(HeartbeatIgnoredWarning(
                f"activity {self._name!r} called dl.heartbeat() on {self._engine}, which has "
                f"no activity heartbeats: the details are not kept, so a retried attempt's "
                f"dl.last_heartbeat() is None and it starts over. On dl.Engine the same code "
                f"resumes where the last attempt got to."), stacklevel=3)

    def last(self) -> None:
        return None


def _current(call: str) -> "Attempt | unrecorded":
    found = _CURRENT.get()
    if found is None:
        raise HeartbeatError(
            f"{call} was called outside an activity: only code that ctx.activity(...) runs "
            f"has an attempt to report on. Call it inside the activity function; workflow "
            f"code records progress with ctx calls instead (see lesson 04).", call=call)
    return found.current()


def heartbeat(details: Any = None) -> None:
    """Report from inside an activity that it is alive, with `details` of its progress.

    Call it at least as often as the activity's `heartbeat=` promise (seconds). The engine
    records `details` (any JSON value: a count, an offset, a dict) at once and durably; the
    next attempt of this activity, after a failure or a crash, reads the last ones with
    `dl.last_heartbeat()`. Raises `HeartbeatError` outside an activity and
    `SerializationError` (a TypeError) when `details` is not JSON.
    """
    _current("dl.heartbeat()").record(details)


def idempotency_key() -> str:
    """The idempotency key of the activity attempt in progress, ``"{run_id}:{position}"``:
    the same on every attempt and after a crash. For activity code that cannot take the
    ``idempotency_key=`` keyword (a framework's tool function): pass it on to the service
    so the service can drop a repeat. Raises `HeartbeatError` outside an activity."""
    found = _CURRENT.get()
    where = getattr(found, "_where", None)
    if where is None:
        _current("dl.idempotency_key()")   # outside an activity: says so
        raise HeartbeatError(
            "dl.idempotency_key() was called in an activity run by an engine that gives "
            "no idempotency keys; take the key from the engine you run on.",
            call="dl.idempotency_key()")
    return f"{where[2]}:{where[3]}"


def attempt_now() -> float | None:
    """The engine's clock now, read inside an activity attempt (None outside one, or on an
    engine that gives no clock): what a simulated service (`dl.sim.Server`) stamps a request
    with when it is not given a clock of its own."""
    where = getattr(_CURRENT.get(), "_where", None)
    return None if where is None else where[1].now()


def last_heartbeat() -> Any:
    """The details of the last heartbeat this activity sent, in this attempt or an earlier
    one (before a retry or a crash), or None if it never sent one. Call it inside an
    activity, typically first thing, to resume where the previous attempt got to."""
    return _current("dl.last_heartbeat()").last()


__all__ = ["heartbeat", "idempotency_key", "last_heartbeat"]
