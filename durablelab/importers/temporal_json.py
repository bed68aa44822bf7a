"""How Temporal writes values in JSON, for the importer in `durablelab.importers.temporal`.

Temporal's JSON is protobuf's JSON mapping, so a few things need decoding before a person
can read them:

- Payloads (inputs, results, signal values, marker details) are
  ``{"metadata": {"encoding": <base64>}, "data": <base64>}``; a list of them is
  ``{"payloads": [...]}``. The importer keeps them encoded, so an imported run can be
  exported and compared byte for byte; `decode_payloads` decodes them only for display.
- Instants are RFC 3339 text with up to nine fractional digits
  ("2022-07-01T20:28:48.796369169Z"); a float would lose the nanoseconds, so they are
  parsed to integer nanoseconds. Durations are "4s" or "0.100s".
- Enums come in two spellings, like event types: "TIMEOUT_TYPE_SCHEDULE_TO_START" and
  "ScheduleToStart"; `enum` turns both into the short one.

- A failure is a chain: each failure may carry a `cause`, and the SDKs often put the
  useful message at the bottom (the Java SDK writes an empty top-level message over the
  real `UnsupportedOperationException`). `root_failure` finds the deepest failure with a
  message, `user_frame` the first stack frame that is the user's code rather than the
  SDK's or the language runtime's.

`read_histories` checks a file before anything is mapped, so a truncated or foreign file
fails with a `TemporalHistoryError` that names the file and the problem, never
half-imported. A task's references (`scheduledEventId`, `startedEventId`, `initiatedEventId`
...: `BACKWARD_REFERENCES`) name the event that opened it, earlier in this history; one that
points to its own event or a later one means the history was damaged or edited, and is
refused the same way. Other references are not checked for order, because Temporal itself
writes them pointing elsewhere: `externalInitiatedEventId` names an event of *another*
workflow's history (the one that cancelled or signalled this run), `parentInitiatedEventId`
one of the parent's, and an update-heavy history can hold an event whose
`workflowTaskCompletedEventId` is later than its own id. Temporal's replayers accept both.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import json
import re
from pathlib import Path
from typing import Any

from ..errors import BadType, TemporalHistoryError

_INSTANT = re.compile(r"(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?"
                      r"(?:([Zz])|([+-])(\d\d):?(\d\d))$")
_JSON_ENCODINGS = ("json/plain", "json/protobuf")   # json/protobuf: proto3 JSON, still JSON
_FAILURE_KINDS = {   # Temporal failure info -> the exception class the SDKs raise
    "applicationFailureInfo": "ApplicationError", "timeoutFailureInfo": "TimeoutError",
    "canceledFailureInfo": "CanceledError", "terminatedFailureInfo": "TerminatedError",
    "serverFailureInfo": "ServerError", "activityFailureInfo": "ActivityError",
    "childWorkflowExecutionFailureInfo": "ChildWorkflowError",
    "resetWorkflowFailureInfo": "ResetWorkflowError"}


def history_error(label: str, problem: str) -> TemporalHistoryError:
    """The error for a history that cannot be imported, worded in one place."""
    return TemporalHistoryError(f"Cannot import the Temporal history {label}: {problem}.",
                                path=label, problem=problem)


def read_events(source) -> tuple[str, list[dict]]:
    """(label for errors, checked events) of a path, JSON text or an already-parsed object
    holding one history.

    Each event comes back as {"id", "type" (CamelCase), "ns" (nanoseconds since the epoch),
    "attrs" (its ...EventAttributes), "meta" (userMetadata or None)}, in ascending id order.
    """
    label, histories, _ = read_histories(source)
    if len(histories) != 1:
        raise history_error(label, f"it holds {len(histories)} histories, not one")
    return label, histories[0]


def read_histories(source) -> tuple[str, list[list[dict]], bool]:
    """(label, the events of each history, whether the source was a list of histories).

    A JSON list whose items are histories (`{"events": [...]}` or `{"history": ...}`), as
    Temporal's features repository keeps them, gives one entry per item; a problem in one
    item names it ("history #2").
    """
    label, doc = _parse(source)
    if isinstance(doc, list) and doc and all(isinstance(item, dict) and (
            "events" in item or "history" in item) for item in doc):
        return label, [_events(item, label, f"history #{i + 1}: ")
                       for i, item in enumerate(doc)], True
    return label, [_events(doc, label)], False


def _parse(source) -> tuple[str, Any]:
    if isinstance(source, (dict, list)):
        return "<JSON object>", source
    if isinstance(source, bytes):
        source = source.decode("utf-8", errors="replace")
    if not isinstance(source, (str, Path)):
        raise BadType(f"load_temporal(source): expected a path, JSON text or a parsed "
                        f"history; got {type(source).__name__}")
    label, text = "<JSON text>", source
    if isinstance(source, Path) or not source.lstrip().startswith(("{", "[")):
        label = str(source)
        if not Path(source).is_file():
            raise history_error(label, "no such file")
        try:
            text = Path(source).read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise history_error(label, f"not UTF-8 text ({exc.reason} at byte {exc.start})"
                                ) from None
    try:
        return label, json.loads(text)
    except RecursionError:
        raise history_error(label, "its JSON is nested too deeply to read (thousands of "
                            "levels; a Temporal history nests a few dozen)") from None
    except json.JSONDecodeError as exc:
        # The parser stops at the end of the text, or inside a string it never closes.
        cut = exc.pos >= len(text.rstrip()) - 1 or exc.msg.startswith("Unterminated string")
        raise history_error(label, f"not JSON ({exc.msg}: line {exc.lineno}, column "
                            f"{exc.colno})" + ("; the text stops in the middle of a value, "
                                               "so the file looks truncated" if cut else "")
                            ) from None


def _events(doc, label: str, which: str = "") -> list[dict]:
    try:
        return _checked(doc, label)
    except TemporalHistoryError as exc:
        if not which:
            raise
        raise history_error(label, which + exc.problem) from None


#: References that must name an earlier event of this same history: what a task's end or
#: start points back to (the activity, timer, child or Nexus operation it belongs to, the
#: workflow task it completes, the update it completes). Any other `...EventId` may name
#: an event of another workflow's history or a later one, and is only checked to be a number.
BACKWARD_REFERENCES = frozenset({
    "scheduledEventId", "startedEventId", "initiatedEventId", "latestCancelRequestedEventId",
    "acceptedEventId", "requestedEventId"})


def _checked(doc, label: str) -> list[dict]:
    if isinstance(doc, dict) and isinstance(doc.get("history"), dict):
        doc = {**doc, "events": doc["history"].get("events")}
    if not isinstance(doc, dict) or "events" not in doc:
        found = (f"top-level keys {sorted(doc)[:6]}" if isinstance(doc, dict)
                 else f"a JSON {type(doc).__name__}")
        raise history_error(label, f"unknown shape: expected {{\"events\": [...]}} or "
                            f"{{\"history\": {{\"events\": [...]}}}}, found {found}")
    if doc.get("nextPageToken"):
        raise history_error(label, "it is one page of a longer history (nextPageToken is "
                            "set); fetch every page and import the whole history")
    raw = doc["events"]
    if not isinstance(raw, list):
        raise history_error(label, f"unknown shape: \"events\" is a {type(raw).__name__}, "
                            f"not a list")
    if not raw:
        raise history_error(label, "no events: the history is empty")
    events = sorted((_event(item, i, label) for i, item in enumerate(raw)),
                    key=lambda e: e["id"])      # the UI's raw events come newest first
    ids = [e["id"] for e in events]
    for before, after in zip(ids, ids[1:]):
        if after == before:
            raise history_error(label, f"eventId {after} appears twice")
        if after != before + 1:
            raise history_error(label, f"events {before + 1} to {after - 1} are missing")
    if ids[0] != 1 or events[0]["type"] != "WorkflowExecutionStarted":
        raise history_error(label, f"the history starts with event {ids[0]} "
                            f"({events[0]['type']}), not event 1 (WorkflowExecutionStarted): "
                            f"it is incomplete")
    for event in events:
        for key, ref in event["attrs"].items():
            if not key.endswith("EventId"):
                continue
            number = event_id(ref)
            if number is None:
                raise history_error(label, f"event {event['id']} ({event['type']}) has "
                                    f"{key} {str(ref)[:40]!r}, which is not an event id")
            ref = number   # attrs keep the file's spelling ("11"): rows show them as recorded
            if key in BACKWARD_REFERENCES and ref >= event["id"]:
                raise history_error(label, (
                    f"event {event['id']} ({event['type']}) refers to {key} {ref}, "
                    f"{'itself' if ref == event['id'] else 'a later event'}; an event only "
                    f"refers to earlier ones, so the history is damaged or was edited "
                    f"(export it again from Temporal)"))
    return events


def _event(item, index: int, label: str) -> dict:
    where = f"event #{index + 1} in the file"
    if not isinstance(item, dict):
        raise history_error(label, f"{where} is a {type(item).__name__}, not an object")
    if "eventId" in item:
        where = f"event {str(item['eventId'])[:40]}"
    kind = item.get("eventType")
    if not isinstance(kind, str) or not kind:
        raise history_error(label, f"{where} is missing eventType")
    if kind.startswith("EVENT_TYPE_"):
        kind = "".join(part.capitalize() for part in kind[len("EVENT_TYPE_"):].split("_"))
    number = event_id(item.get("eventId"))
    if number is None:
        raise history_error(label, f"{where} ({kind}) has no usable eventId")
    ns = instant_ns(item.get("eventTime"))
    if ns is None:
        raise history_error(label, f"{where} ({kind}) has no usable eventTime "
                            f"({item.get('eventTime')!r}; expected RFC 3339 such as "
                            f"2022-07-01T20:28:48.796369169Z)")
    attrs = next((v for k, v in item.items() if k.endswith("EventAttributes")), None)
    return {"id": number, "type": kind, "ns": ns, "attrs": attrs if isinstance(attrs, dict)
            else {}, "meta": item.get("userMetadata")}


def event_id(value) -> int | None:
    """An event id as protobuf's JSON writes an int64 (digits in a string) or as a number,
    or None: not a bool, a fraction, an infinity (JSON's 1e999) or text of another kind."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None   # NaN and inf are not integers
    if isinstance(value, str) and value.strip().isdigit() and len(value) <= 30:
        return int(value)
    return None


#: How deep `decode_payloads` goes: further down, a value is shown as it is (JSON that
#: deep is a crafted file, and Python's own stack ends near a thousand levels).
DECODE_DEPTH = 100


def decode_payloads(value: Any, _depth: int = 0) -> Any:
    """A copy of `value` with every Temporal payload in it decoded, for display.

    `value` is any JSON structure: an imported history row's value, a run's raw input, a
    single payload. ``{"payloads": [p]}`` becomes p's value, ``{"payloads": [p, q]}`` the
    list of their values, ``{"payloads": []}`` None. "json/plain" and "json/protobuf"
    payloads become their JSON value, "binary/null" None; anything else (binary/protobuf,
    encrypted, a payload that does not decode) becomes a short placeholder such as
    ``"<binary/protobuf payload, 120 bytes>"``. Never raises: it is for looking, and the
    encoded original stays where it was.
    """
    if _depth > DECODE_DEPTH:
        return value
    if isinstance(value, list):
        return [decode_payloads(item, _depth + 1) for item in value]
    if not isinstance(value, dict):
        return value
    if _is_payload(value):
        return _decode(value)
    items = value.get("payloads")
    if len(value) == 1 and isinstance(items, list) and all(map(_is_payload, items)):
        decoded = [_decode(p) for p in items]
        return None if not decoded else decoded[0] if len(decoded) == 1 else decoded
    return {key: decode_payloads(item, _depth + 1) for key, item in value.items()}


def _is_payload(value) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("metadata"), dict)
            and set(value) <= {"metadata", "data", "externalPayloads"})


def _b64(text) -> bytes | None:
    if not isinstance(text, str):
        return None if text is not None else b""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        try:
            return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        except (binascii.Error, ValueError):
            return None


def _decode(payload: dict) -> Any:
    meta = {}
    for key, raw in payload["metadata"].items():
        data = _b64(raw)
        meta[key] = data.decode("utf-8", "replace") if data is not None else "?"
    encoding = meta.get("encoding") or "unknown encoding"
    data = _b64(payload.get("data"))
    if data is not None and encoding == "binary/null":
        return None
    if data is not None and encoding in _JSON_ENCODINGS:
        try:
            return json.loads(data)
        except (ValueError, RecursionError):   # RecursionError: nested thousands deep
            pass
    what = f"{encoding} {meta['messageType']}" if meta.get("messageType") else encoding
    size = "undecodable" if data is None else f"{len(data)} bytes"
    return f"<{what} payload, {size}>"


def instant_ns(text) -> int | None:
    """Nanoseconds since the epoch of an RFC 3339 instant, or None if it is not one."""
    match = _INSTANT.match(text.strip()) if isinstance(text, str) else None
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in match.group(1, 2, 3, 4, 5, 6))
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 61):
        return None
    seconds = calendar.timegm((year, month, day, hour, minute, second))
    if match.group(9):
        offset = int(match.group(10)) * 3600 + int(match.group(11)) * 60
        seconds -= offset if match.group(9) == "+" else -offset
    return seconds * 10**9 + int((match.group(7) or "0").ljust(9, "0"))


def duration(text) -> float | None:
    """Seconds of a protobuf JSON duration ("4s", "0.100s"), or None."""
    if isinstance(text, str) and text.endswith("s"):
        try:
            return float(text[:-1])
        except ValueError:
            return None
    return None


def enum(value, prefix: str) -> str | None:
    """The short spelling of an enum value: enum("TIMEOUT_TYPE_SCHEDULE_TO_START",
    "TIMEOUT_TYPE_") and enum("ScheduleToStart", ...) both give "ScheduleToStart"."""
    if not isinstance(value, str) or not value:
        return None
    if value.startswith(prefix):
        return "".join(part.capitalize() for part in value[len(prefix):].split("_"))
    return value


def failure_class(failure: dict) -> str:
    """The class a Temporal failure stands for: an application error's own type when it has
    one ("ActivityNotRegisteredError"), else the SDK exception for its kind."""
    app = failure.get("applicationFailureInfo")
    if isinstance(app, dict) and app.get("type"):
        return app["type"]
    return next((name for key, name in _FAILURE_KINDS.items() if key in failure), "Failure")


# Failures that only wrap the one in their cause: the real message is below them.
_WRAPPERS = ("activityFailureInfo", "childWorkflowExecutionFailureInfo",
             "nexusOperationExecutionFailureInfo")


def root_failure(failure: dict) -> dict:
    """The failure in `failure`'s cause chain that says what went wrong: going down past
    wrappers (an activity's, a child workflow's or a Nexus operation's failure, whose real
    error is their cause) and past empty messages, stopping at the first failure with a
    message of its own (a time-out keeps its own, not the last attempt's below it)."""
    found, seen = failure, 0
    while isinstance(failure, dict) and seen < 50:    # a chain, not a loop
        if message_of(failure):
            found = failure
            if not any(key in failure for key in _WRAPPERS):
                break
        failure, seen = failure.get("cause"), seen + 1
    return found


# Stack frames that belong to an SDK or a language runtime, not to the user's code.
_SDK_FRAME = re.compile(
    r"^(?:at\s+)?(?:java\.|javax\.|jdk\.|sun\.|kotlin\.|io\.temporal\.|"
    r"go\.temporal\.io/|runtime[./]|reflect\.|panic\(|Temporalio\.|System\.)"
    r"|/temporalio/|[\\/]asyncio[\\/]|[\\/]concurrent[\\/]|@temporalio[\\/]|node:internal|"
    r"go\.temporal\.io/sdk|/usr/(?:local/)?go/src/")


def user_frame(failure: dict) -> str | None:
    """The first stack frame of the user's own code in `failure`'s chain, deepest cause
    first: a Java or .NET "at ..." line, a Go function line, a Python 'File "..."' line or a
    TypeScript "at ..." line, skipping the SDK's and the runtime's own frames. None when the
    chain has no stack trace or only SDK frames."""
    chain, seen = [], 0
    while isinstance(failure, dict) and seen < 50:
        chain.append(failure)
        failure, seen = failure.get("cause"), seen + 1
    for item in reversed(chain):
        trace = str(item.get("stackTrace") or "")
        python = 'File "' in trace
        at = re.search(r"^\s*at ", trace, re.M) is not None   # JS, .NET: "at ..." frames
        for line in trace.splitlines():
            frame = line.strip()
            if not frame or (python and not frame.startswith('File "')) or (
                    at and not frame.startswith("at ")):
                continue
            if not python and line.startswith("\t") and ":" in frame:   # Go's file line
                continue
            if not _SDK_FRAME.search(frame):
                return frame
    return None


def message_of(failure: dict) -> str:
    """A failure's message, or its kind when the message is empty."""
    if failure.get("message"):
        return failure["message"]
    timeout = failure.get("timeoutFailureInfo")
    if isinstance(timeout, dict):
        return f"{enum(timeout.get('timeoutType'), 'TIMEOUT_TYPE_') or ''} timeout".strip()
    return ""
