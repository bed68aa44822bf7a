"""Checking what a caller gives: each check returns the value as the store will keep it,
or raises a usage error (`BadValue`, `BadType`: still the `ValueError` or `TypeError`
callers catch) naming the call, the argument and the fix.

A value that would poison a store is refused where it is given: an infinite or NaN time, a
negative latency, an int DuckDB cannot keep, and a finite duration that, added to the clock,
would overflow to `inf` (`check_later`): saved, it would break every later wake-up on the file.
"""

from __future__ import annotations

import json
import math

from .classes import BadType, BadValue, PolicyError, SerializationError


def policy_error(where: str, key: str | None, problem: str) -> PolicyError:
    from ..retry import _FIELDS
    if key is not None:
        problem = (f"{problem} {key!r}; a RetryPolicy's keys are "
                   f"{', '.join(_FIELDS)}")
    return PolicyError(f"{where}: {problem}. See help(dl.RetryPolicy).", where=where, key=key)


def _full_stop(text: str) -> str:
    return text if text.endswith(".") else text + "."


def bad_value(call: str, argument: str, message: str) -> BadValue:
    return BadValue(f"{call}: {_full_stop(message)}", call=call, argument=argument)


def bad_type(call: str, argument: str, message: str) -> BadType:
    return BadType(f"{call}: {_full_stop(message)}", call=call, argument=argument)


def limit_error(call: str, argument: str, value, rule: str) -> BadValue | BadType:
    """A Budget or CircuitBreaker limit that is not a usable number."""
    maker = bad_type if isinstance(value, bool) or not isinstance(value, (int, float)) \
        else bad_value
    return maker(call, argument, f"{argument}={value!r} must be {rule}")


def plan_error(message: str) -> BadValue:
    """A fault plan's JSON (text or file) that cannot be read as a plan; `message` names the
    source, the rule and the field."""
    return BadValue(message, call="FaultPlan.from_json", argument=None)


def not_a_workflow(fn) -> BadType:
    kind = type(fn).__name__
    return bad_type("workflow", "workflow", (
        f"{fn!r} (a {kind}) is not a workflow function. History records a workflow as "
        f"'module:qualname' to find it again, so a workflow is a function defined with def "
        f"(or a lambda) taking (ctx, input); a functools.partial or a callable object has "
        f"no such name. Wrap it: def my_flow(ctx, input): return inner(ctx, input, ...)."))


def check_seconds(value, call: str, argument: str, *, positive: bool = False,
                  none_ok: bool = False) -> float | None:
    """`value` as float seconds: a finite number >= 0 (> 0 when `positive`)."""
    if value is None and none_ok:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad_type(call, argument, f"{argument}={value!r} must be a number of seconds "
                                       f"(an int or a float)")
    try:
        seconds = float(value)
    except OverflowError:
        seconds = math.inf
    if not math.isfinite(seconds):
        raise bad_value(call, argument, (
            f"{argument}={value!r} is not a finite number of seconds. An infinite or NaN "
            f"time would be saved in history and break every later run on the file; give a "
            f"finite number"))
    if seconds < 0 or (positive and seconds == 0):
        raise bad_value(call, argument, f"{argument}={value!r} must be seconds "
                                        f"{'> 0' if positive else '>= 0'} (time in history "
                                        f"only runs forwards)")
    return seconds


def check_probability(value, call: str, argument: str = "p") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad_type(call, argument, f"{argument}={value!r} must be a probability, a number "
                                       f"in [0, 1] (p=1.0 fires every time)")
    if not 0.0 <= value <= 1.0:   # NaN fails this too
        raise bad_value(call, argument, f"{argument}={value!r} must be a probability in [0, 1]")
    return float(value)


def check_int(value, call: str, argument: str, minimum: int, none_ok: bool = False,
              what: str = "") -> int | None:
    if value is None and none_ok:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_type(call, argument, f"{argument}={value!r} must be an int >= {minimum}"
                                       f"{' or None' if none_ok else ''}{what}")
    if value < minimum:
        raise bad_value(call, argument, f"{argument}={value!r} must be an int >= {minimum}"
                                        f"{' or None' if none_ok else ''}{what}")
    return value


def check_seed(value, call: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_type(call, "seed", f"seed={value!r} must be an int")
    if not -2 ** 63 <= value < 2 ** 63:
        raise bad_value(call, "seed", (
            f"seed={value!r} is outside the 64-bit range the store keeps (-2**63 to "
            f"2**63 - 1). Seeds only need to differ: use a smaller int"))
    return value


def check_text(value, call: str, argument: str, *, none_ok: bool = False,
               empty_ok: bool = False) -> str | None:
    """A name the store keeps as text: a str, not empty, valid Unicode (no lone surrogate,
    which UTF-8 cannot hold)."""
    if value is None and none_ok:
        return None
    if not isinstance(value, str):
        raise bad_type(call, argument, f"{argument}={value!r} must be a string "
                                       f"(it is a {type(value).__name__})")
    if not value and not empty_ok:
        raise bad_value(call, argument, f"{argument}={value!r} must be a non-empty string")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise bad_value(call, argument, (
                f"{argument}={value!r} holds a lone surrogate ({value[exc.start]!r} at index "
                f"{exc.start}), which is not text UTF-8 can store; names must be valid "
                f"Unicode")) from None
    return value


def check_json_keys(value, what: str, where: str, root: str = "input") -> None:
    """Refuse a dict key that JSON would quietly turn into a string (an int, a float, a
    bool, None): history holds JSON, so after replay the code would read ``"1"`` where it
    wrote ``1``, and the `KeyError` would blame the workflow. Raises `SerializationError`
    naming the key, its type and where it is (``input['items'][2]``, `root` naming the
    value); keys that JSON cannot hold at all (tuples, ...) are left to the JSON encoder."""
    pending = [(value, root)]
    while pending:
        item, path = pending.pop()
        if isinstance(item, dict):
            for key, inner in item.items():
                if isinstance(key, (int, float)) or key is None:     # bool is an int
                    becomes = next(iter(json.loads(json.dumps({key: 0}))))
                    raise SerializationError(
                        f"{what} has a dict key {key!r} (of type {type(key).__name__}) in "
                        f"{path}, at {where}. History holds JSON, whose keys are strings: after "
                        f"replay the code would read the key {becomes!r} instead, and a "
                        f"KeyError would blame the workflow. Use string keys ({becomes!r}), "
                        f"or a list of [key, value] pairs.", what=what, where=where)
                if isinstance(inner, (dict, list, tuple)):
                    pending.append((inner, f"{path}[{key!r}]"))
        elif isinstance(item, (list, tuple)):
            pending.extend((inner, f"{path}[{i}]") for i, inner in enumerate(item)
                           if isinstance(inner, (dict, list, tuple)))


def check_later(now: float, seconds: float, call: str, argument: str) -> float:
    """The instant `now + seconds`, or a `BadValue` when that sum is not a finite float.
    `seconds` has passed `check_seconds` already; `call` and `argument` name where it came
    from."""
    instant = now + seconds
    if not math.isfinite(instant):
        raise bad_value(call, argument, (
            f"{argument}={seconds!r} seconds after t={now:g}s is past the largest time a "
            f"float can hold (the sum is {instant!r}); an infinite instant saved in history "
            f"would break every later wake-up on the file. Give a shorter time"))
    return instant


def not_a_clock(clock) -> BadType:
    return bad_type("Engine", "clock", (
        f"clock={clock!r} is not a clock. Give dl.VirtualClock() (simulated time, the "
        f"default) or dl.WallClock() (real time), or an object with now(), "
        f"advance_to(instant), sleep_until(instant) and a `virtual` flag"))


def not_a_path(path) -> BadType:
    return bad_type("Engine", "path", (
        f"path={path!r} must be a file name (a str or a pathlib.Path) or None for an "
        f"in-memory store, for example dl.Engine(\"runs.duckdb\")"))


def not_a_policy(call: str, policy) -> BadType:
    return bad_type(call, "policy", (
        f"policy={policy!r} must be a dl.RetryPolicy, or None for the default "
        f"(3 attempts), for example policy=dl.RetryPolicy(max_attempts=5)"))


def not_callable(call: str, fn) -> BadType:
    return bad_type(call, "fn", (
        f"fn={fn!r} is not callable: pass the function the activity runs (not its result), "
        f"for example ctx.activity(\"charge\", charge, order_id)"))
