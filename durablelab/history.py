"""History: the append-only list of events of one run, and the one comparison replay makes.

Every recording `ctx` call adds one event at the next `position` (counting from 1). On
every wake-up the workflow runs again from the top and each `ctx` call asks the cursor for
the event at its position: if history has one, the call must be the same request (same kind,
same name, same input digest) and gets the recorded value back; if history has run out, the
call is new work. Anything else is non-determinism, and `Cursor.expect` is the one place
that decides it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from .errors import NonDeterminismError, SerializationError, non_determinism
from .fastjson import copied, fast_encoder, kept, matched_before

# Event kinds. A kind is named after the ctx method that records it, so an error can say
# "history recorded ctx.activity('charge')" in the words the learner wrote. The *_END kinds
# are appended by the engine when a wait ends.
ACTIVITY, NOW, RANDOM, UUID, PATCHED = "activity", "now", "random", "uuid", "patched"
SLEEP, TIMER_FIRED = "sleep", "timer_fired"
WAIT_SIGNAL, SIGNAL_RECEIVED, SIGNAL_TIMEOUT = "wait_signal", "signal_received", "signal_timeout"
# Concurrency: `ctx.start_activity` and `ctx.start_child` record where the code started
# something it does not wait for at once; its end is appended later (an ACTIVITY or CHILD
# event whose `handle` is that position), whenever it happens. CANCELLED marks the call at
# which the code was told of `engine.cancel`.
START_ACTIVITY, START_CHILD, CHILD = "start_activity", "start_child", "child"
CANCELLED = "cancelled"


# Built once: json.dumps with non-default options would build an encoder on every call.
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_CANONICAL = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False,
                              sort_keys=True)
# The same with non-ASCII escaped (a backslash, "u" and four hex digits), for the rare
# value holding a lone surrogate ("\ud800"): a Python str that UTF-8, and so DuckDB,
# cannot carry, but JSON can, escaped. Only such values take this path, so every other
# text (and its digest) is unchanged.
_COMPACT_ASCII = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=False)
_CANONICAL_ASCII = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=False,
                                    sort_keys=True)


_compact = fast_encoder(_COMPACT)
_canonical = fast_encoder(_CANONICAL)


def _storable(text: str, value: Any, escaped: json.JSONEncoder) -> str:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return escaped.encode(value)
    return text


def storable_text(text: str | None) -> str | None:
    """Free text for a text column (an error message): a lone surrogate, which UTF-8 cannot
    hold, becomes its escape (\\ud800), so a strange exception message never stops a write."""
    if text is None or text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def compact(value: Any) -> str:
    """Compact JSON text of `value`; raises TypeError or ValueError if it is not JSON."""
    return _storable(_compact(value), value, _COMPACT_ASCII)


def to_json(value: Any, what: str, where: str) -> str:
    """Compact JSON text of `value`, or a SerializationError naming what and where."""
    try:
        return _storable(_compact(value), value, _COMPACT_ASCII)
    except (TypeError, ValueError) as exc:
        raise SerializationError(
            f"{what} is not JSON-serialisable ({exc}) at {where}. History holds JSON only: "
            f"pass plain dicts, lists, strings, numbers, booleans or None (convert dataclasses "
            f"with dataclasses.asdict, datetimes with .isoformat()).",
            what=what, where=where) from None


def canonical(args: tuple, kwargs: dict, call: str, where, name: str | None = None) -> str:
    """Canonical JSON of a call's arguments: sorted keys, so equal inputs give equal text.
    The error's words (`call`, `name`, `where`: a frame or text) are put together only if
    the arguments are not JSON, so the common path pays nothing for them."""
    try:
        value = [list(args), kwargs]
        return _storable(_canonical(value), value, _CANONICAL_ASCII)
    except (TypeError, ValueError) as exc:
        what = call if name is None else f"{call}({name!r})"
        raise SerializationError(
            f"{what} has an argument that is not JSON-serialisable ({exc}) at {site(where)}. "
            f"Activity arguments are digested as JSON so replay can check them; pass plain "
            f"data, or pass an id and load the object inside the activity.",
            what=what, where=site(where)) from None


#: History keeps each call's canonical arguments beside their digest, so a divergence can
#: show the values themselves, up to this many characters of canonical JSON; a longer text
#: is cut there and ends with "…" (the digest still covers all of it). A large prompt then
#: costs at most 2 kB a row.
ARGS_CAP = 2000


def shown_args(text: str | None) -> str | None:
    """The canonical-JSON arguments as history keeps them: whole up to ARGS_CAP characters,
    else their first ARGS_CAP characters and "…"."""
    if text is None or len(text) <= ARGS_CAP:
        return text
    return text[:ARGS_CAP] + "…"


def digest_of(text: str) -> str:
    """A stable 16-hex-digit digest of canonical JSON text."""
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


@dataclass(slots=True)
class Event:
    """One history event. For an activity, the final attempt's facts ride along, so a
    durable step is a single row."""

    position: int
    kind: str
    name: str
    digest: str | None
    ok: bool
    value: str | None          # JSON text; for a failed activity, the error's JSON
    recorded_at: float
    attempt: int | None = None
    started_at: float | None = None
    outcome: str | None = None
    error_class: str | None = None
    error: str | None = None
    call_site: str | None = None   # "file:line" of the ctx call that recorded it
    # The canonical JSON of the call's arguments, [args, kwargs], capped (see ARGS_CAP);
    # None for calls without input and for events written before history kept them.
    args: str | None = None
    # For the end of something started concurrently (an ACTIVITY or CHILD event): the
    # position of the start_activity or start_child event it ends; None otherwise.
    handle: int | None = None
    # The arguments last seen to match this event (JSON-shaped), so replay can compare
    # cheaply before it pays for a digest. Never stored.
    matched_args: Any = field(default=None, repr=False, compare=False)
    # `value` decoded, kept when that is flat (see `flat`), so a replay hands back a copy
    # instead of parsing the JSON again on every wake-up. Never stored.
    loaded: Any = field(default=None, init=False, repr=False, compare=False)

    def loads(self) -> Any:
        """`value` decoded: a fresh object on every call, as `json.loads` would give."""
        if self.loaded is not None:
            return copied(self.loaded)
        if self.value is None:
            return None
        value = json.loads(self.value)
        self.loaded = kept(value, self.value)
        return value

    def describe(self) -> dict:
        return {"kind": self.kind, "name": self.name, "digest": self.digest}


def site(frame) -> str | None:
    """'file:line' of a frame (the workflow line that made a ctx call), or None."""
    if frame is None or isinstance(frame, str):
        return frame
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


class CancelledHere(Exception):
    """Raised by `Cursor.expect` where history says the code was told of a cancellation:
    the `Context` turns it into `dl.Cancelled` at the same call."""

    def __init__(self, event: Event):
        super().__init__("cancelled")
        self.event = event


class Cursor:
    """Walks one run's history during one wake-up."""

    def __init__(self, history: list[Event], run_id: str, workflow: str):
        self.history = history
        self.run_id = run_id
        self.workflow = workflow
        self.position = 0            # the last position handed out
        self.replayed = 0            # events handed back from history in this wake-up
        #: handle position -> the event that ended it, for the ends this wake-up has seen
        #: (see `absorb`).
        self.ended: dict[int, Event] = {}

    @property
    def replaying(self) -> bool:
        return self.position < len(self.history)

    def peek(self) -> Event | None:
        """The event at the next position, if history has one."""
        if self.position < len(self.history):
            return self.history[self.position]
        return None

    def take(self) -> Event:
        event = self.history[self.position]
        self.position += 1
        self.replayed += 1
        return event

    def absorb(self) -> None:
        """Take the ends of concurrent work that history holds at the next positions.

        Only a call that blocks (waits for a handle, an activity, a timer, a signal) calls
        this: such ends are appended while the code is blocked, so on replay they sit right
        before the event the code recorded next, and the blocking call that was waiting for
        them meets them first. A call that does not block never sees one, so `done()` on
        replay answers what it answered the first time."""
        history = self.history
        while self.position < len(history) and history[self.position].handle is not None:
            event = self.take()
            self.ended[event.handle] = event

    def cancelled(self) -> Event | None:
        """The CANCELLED event at the next position, taken, if that is what history holds."""
        event = self.peek()
        if event is not None and event.kind == CANCELLED:
            return self.take()
        return None

    def expect(self, kind: str, name: str, call_site,
               args: tuple | None = None, kwargs: dict | None = None,
               blocking: bool = False) -> Event | None:
        """The recorded event for this request, or None when history has run out.

        `call_site` is the frame of the ctx call (formatted only if an error needs it).
        `args` is None for requests without input (now, random, uuid). Raises
        NonDeterminismError when the event at this position is a different request: another
        kind or name, or arguments whose digest differs from the recorded one. (Arguments
        equal to the ones that last matched this event are known to match: see
        `fastjson.matched_before`.) A `blocking` request (an activity the code waits for)
        first takes the ends of concurrent work that precede it (`absorb`); a CANCELLED
        event raises `CancelledHere`.
        """
        position = self.position
        if position >= len(self.history):
            return None
        event = self.history[position]
        if kwargs is None:
            kwargs = {}
        if event.kind != kind or event.name != name or event.handle is not None:
            if event.kind == CANCELLED:
                self.take()
                raise CancelledHere(event)
            if blocking and event.handle is not None:
                self.absorb()
                return self.expect(kind, name, call_site, args, kwargs)
            text = None if args is None else canonical(args, kwargs, f"ctx.{kind}",
                                                       call_site, name)
            raise self.diverged(event, kind, name, None if text is None else digest_of(text),
                                call_site, "different_call", text)
        if args is not None and event.digest is not None \
                and not matched_before(event.matched_args, args, kwargs):
            text = canonical(args, kwargs, f"ctx.{kind}", call_site, name)
            requested = digest_of(text)
            if requested != event.digest:
                raise self.diverged(event, kind, name, requested, call_site,
                                    "different_arguments", text)
            event.matched_args = json.loads(text)
        self.position = position + 1      # self.take(), inline
        self.replayed += 1
        return event

    def expect_end(self) -> NonDeterminismError | None:
        """Called when the workflow returns: history must have been consumed (ends of
        concurrent work appended after it returned, as a cancel appends, aside)."""
        self.absorb()
        event = self.peek()
        if event is None:
            return None
        return self.diverged(event, None, None, None, None, "history_not_consumed")

    def diverged(self, recorded: Event, kind, name, digest, call_site, reason,
                 requested_args: str | None = None):
        requested = None if kind is None else {"kind": kind, "name": name, "digest": digest}
        return non_determinism(
            run_id=self.run_id, workflow=self.workflow, position=self.position + 1,
            recorded=recorded.describe(), requested=requested, call_site=site(call_site),
            reason=reason, remaining=len(self.history) - self.position,
            recorded_args=recorded.args, requested_args=shown_args(requested_args))


__all__ = ["Event", "Cursor", "canonical", "digest_of", "to_json", "NonDeterminismError"]
