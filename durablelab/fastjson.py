"""Fast paths for JSON that replay and recording ask for on every step, kept out of the
replay lesson (`history.py`) so that it reads as the plain rules.

Each function here gives exactly what its plain counterpart gives (tests/test_fastjson.py
holds them equal over generated values): `fast_encoder(enc)` is ``enc.encode``; `kept` and
`copied` are ``json.loads(text)``; `matched_args` is ``json.loads(canonical(...))``;
`matched_before` answers True only when comparing digests would too. They exist because a
replay re-runs every recorded call on every wake-up, so what costs a little per call costs
a lot per run.
"""

from __future__ import annotations

import json
from typing import Any


def fast_encoder(encoder: json.JSONEncoder):
    """``encoder.encode``, for the text of one small value at a time.

    `JSONEncoder.encode` builds the C encoder again on every call, which costs as much as
    encoding a step's arguments; this builds it once (without the circular-reference
    check, which needs a fresh table per call). Only the successful path is taken here:
    whatever this one raises (a circular or unencodable value), the value is encoded again
    by `encoder` itself, so the error raised is exactly the one `encoder.encode` raises.
    The same text either way: the C encoder is what `encode` runs for these options.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None or encoder.indent is not None or encoder.check_circular is False:
        return encoder.encode
    strings = (json.encoder.encode_basestring_ascii if encoder.ensure_ascii
               else json.encoder.encode_basestring)
    once = make(None, encoder.default, strings, None, encoder.key_separator,
                encoder.item_separator, encoder.sort_keys, encoder.skipkeys, encoder.allow_nan)
    join, slow = "".join, encoder.encode

    def encode(value: Any) -> str:
        if type(value) is str:
            return strings(value)
        try:
            return join(once(value, 0))
        except Exception:   # RecursionError included: a circular value, said as encode says
            return slow(value)

    return encode


_SCALARS = frozenset((str, int, float, bool, type(None)))
_KEYS = frozenset((str,))
_scalars_only = _SCALARS.issuperset   # of an iterable of types: all of them scalars


def flat(value: Any) -> bool:
    """Whether `value` is a JSON scalar, or a list or str-keyed dict of JSON scalars (exact
    types, not subclasses): then a shallow copy of it is exactly its JSON round trip, with
    no text to parse."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if kind is list or kind is tuple:
        return _scalars_only(map(type, value))
    if kind is dict:
        return _KEYS.issuperset(map(type, value)) and _scalars_only(map(type, value.values()))
    return False


def kept(value: Any, text: str) -> tuple | None:
    """What `Event.loaded` holds of `value`, the JSON `text` encodes or decodes to, when
    `value` is flat (see `flat`): a copy of its JSON round trip (a tuple becomes a list), so
    the caller and every replay after get a copy (`copied`) instead of parsing the text;
    else None. Also None when the text holds escaped surrogates (see `history._storable`): that
    round trip can be another value (a pair of them reads back as one character), so only
    parsing the text gives what every replay will."""
    kind = type(value)
    if kind is tuple:
        value, kind = list(value), list
    if not flat(value) or "\\ud" in text:
        return None
    container = kind is list or kind is dict
    return (value.copy() if container else value, container)


def copied(held: tuple) -> Any:
    """A fresh copy of what `kept` returned: what `json.loads` of the text would give."""
    return held[0].copy() if held[1] else held[0]


def matched_args(args: tuple, kwargs: dict) -> list | None:
    """``json.loads(canonical(args, kwargs))`` without the text, when the arguments are
    flat (see `flat`); else None. What `Event.matched_args` holds for replay to compare."""
    if _scalars_only(map(type, args)) and (not kwargs or flat(kwargs)):
        return [list(args), dict(kwargs)]
    return None


def same_json(value: Any, recorded: Any) -> bool:
    """Whether `value` has the same JSON as `recorded` (a JSON-loaded structure): like ==,
    except that 1, 1.0 and True differ, as their JSON does. A False here is only a reason to
    compare digests, so it may be conservative; a True must be exact. (Replay asks this for
    every recorded call, so scalars are compared inline rather than by recursion.)"""
    kind = type(value)
    if kind in _SCALARS:
        return kind is type(recorded) and value == recorded
    if kind is tuple:
        kind = list
    if kind is not type(recorded):
        return False
    if kind is list:
        if len(value) != len(recorded):
            return False
        pairs = zip(value, recorded)
    elif kind is dict:
        if value.keys() != recorded.keys():
            return False
        pairs = ((v, recorded[k]) for k, v in value.items())
    else:
        return False
    for v, r in pairs:
        if type(v) in _SCALARS:
            if type(v) is not type(r) or v != r:
                return False
        elif not same_json(v, r):
            return False
    return True


def matched_before(matched: list | None, args: tuple, kwargs: dict) -> bool:
    """Whether a call's arguments are the ones that last matched an event (`matched`: the
    event's `matched_args`, JSON-shaped, or None). True means their canonical JSON, and so
    their digest, is the recorded one; False only means "compare digests"."""
    if matched is None:
        return False
    return same_json(args, matched[0]) and (
        same_json(kwargs, matched[1]) if kwargs or matched[1] else True)


__all__ = ["fast_encoder", "flat", "kept", "copied", "matched_args", "same_json",
           "matched_before"]
