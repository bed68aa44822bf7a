"""Tools: plain typed functions, described to a model by a JSON schema from their signature.

An agent's tool is an ordinary function with type hints and a docstring::

    def refund(order_id: str, amount: float, idempotency_key: str | None = None) -> dict:
        '''Refund `amount` EUR on an order.'''

The model is shown ``{"name": "refund", "description": <the docstring's first paragraph>,
"parameters": <a JSON schema>}``. The schema comes from the signature through pydantic,
*leaving out* ``idempotency_key`` and ``feedback``: those are the engine's to give, so a
model can never supply (or forge) the key that protects a payment from a retry.

The same pydantic model checks what the model asks for (`check_call`): arguments that do
not parse as JSON, a wrong type, a missing or misspelled field. A failed check raises
`ModelOutputError` inside the model activity, so the engine asks the model again with the
validation error as ``feedback=`` and the broken call never reaches the tool.
"""

from __future__ import annotations

import inspect
import json
import math
from typing import Any, Callable

from ..errors import AgentConfigError, ModelOutputError

#: parameters the engine supplies; a model never sees them in a schema.
HIDDEN = ("idempotency_key", "feedback")
#: keywords of ctx.activity itself: a keyword-only tool parameter by one of these names
#: could not be passed through it.
_RESERVED = {"name", "fn", "policy", "start_to_close", "schedule_to_close", "heartbeat"}


def _name(fn: Callable) -> str:
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str) or not name.isidentifier():
        raise AgentConfigError(f"agent tool {fn!r} has no usable __name__ (got {name!r}); a tool is "
                        f"a plain function defined with def, whose name is the activity name")
    return name


def _shape(fn: Callable):
    """What a tool's schema depends on, as a cache key: a function defined in a loop or a
    factory (a closure per world) shares its code, defaults and docstring with its
    siblings, so pydantic builds their model once (about 10 ms each)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return fn
    key = (code, fn.__defaults__, tuple(sorted((fn.__kwdefaults__ or {}).items())),
           fn.__doc__, fn.__name__)
    try:
        hash(key)
    except TypeError:
        return fn
    return key


_MODELS: dict = {}
_SPECS: dict = {}


def _cached(cache: dict, fn: Callable, build: Callable):
    key = _shape(fn)
    found = cache.get(key)
    if found is None:
        if len(cache) >= 1024:
            cache.clear()
        found = cache[key] = build(fn)
    return found


def arguments_model(fn: Callable):
    """The pydantic model of `fn`'s arguments (hidden parameters left out; unknown fields
    forbidden, so a misspelled name is an error, not silently dropped)."""
    return _cached(_MODELS, fn, _arguments_model)


def _arguments_model(fn: Callable):
    from pydantic import ConfigDict, create_model

    name = _name(fn)
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise AgentConfigError(f"agent tool {name!r}: its signature cannot be read ({exc})") from None
    try:
        hints = inspect.get_annotations(inspect.unwrap(fn), eval_str=True)
    except Exception:   # a hint that does not evaluate: fall back to the raw annotations
        hints = {}
    fields: dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.name in HIDDEN:
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise AgentConfigError(f"agent tool {name!r}: *{param.name} / **{param.name} cannot be "
                            f"described to a model; name each argument with a type hint")
        if param.kind is param.POSITIONAL_ONLY:
            raise AgentConfigError(f"agent tool {name!r}: positional-only parameter {param.name!r}; "
                            f"a model passes arguments by name")
        if param.kind is param.KEYWORD_ONLY and param.name in _RESERVED:
            raise AgentConfigError(f"agent tool {name!r}: keyword-only parameter {param.name!r} "
                            f"clashes with ctx.activity's own keyword; rename it")
        hint = hints.get(param.name, param.annotation)
        if hint is inspect.Parameter.empty:
            raise AgentConfigError(f"agent tool {name!r}: parameter {param.name!r} has no type hint; "
                            f"the model's schema is derived from the hints (write "
                            f"{param.name}: str, int, float, ...)")
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (hint, default)
    return create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)


def _spec(fn: Callable) -> str:
    return _cached(_SPECS, fn, _spec_of)


def _spec_of(fn: Callable) -> str:
    model = arguments_model(fn)
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    doc = inspect.getdoc(fn) or ""
    description = doc.split("\n\n")[0].replace("\n", " ").strip()
    if not description:
        raise AgentConfigError(f"agent tool {_name(fn)!r} has no docstring; the model reads it to "
                        f"know what the tool does, so give it one")
    return json.dumps({"name": _name(fn), "description": description, "parameters": schema},
                      sort_keys=True)


def tool_schema(fn: Callable) -> dict:
    """What a model is told about tool `fn`: ``{"name", "description", "parameters"}``.

    `parameters` is the JSON schema pydantic derives from the signature's type hints and
    defaults, without ``idempotency_key`` and ``feedback``; `description` is the first
    paragraph of the docstring. Raises `AgentConfigError` (a TypeError) naming the tool and the fix for a function
    without a docstring, a parameter without a type hint, or ``*args``/``**kwargs``.
    """
    return json.loads(_spec(fn))


def check_call(fn: Callable, arguments: Any, call_name: str | None = None) -> dict:
    """The arguments a model gave for `fn`, parsed and validated, defaults filled in.

    `arguments` is a dict, or the JSON text a model sent. Raises `ModelOutputError` whose
    message says what was wrong in words the model can act on: the text is not JSON, or
    which field is missing, misspelled (an extra field) or of the wrong type.
    """
    from pydantic import ValidationError

    name = call_name or _name(fn)
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (json.JSONDecodeError, RecursionError) as exc:
            raise ModelOutputError(
                f"the arguments of your call to {name!r} are not valid JSON ({exc}): "
                f"{arguments[:80]!r}", cause_class="JSONDecodeError") from None
    if not isinstance(arguments, dict):
        raise ModelOutputError(
            f"the arguments of your call to {name!r} must be a JSON object, not "
            f"{type(arguments).__name__}", cause_class="ValidationError")
    try:
        where = _not_finite(arguments)
    except RecursionError:
        raise ModelOutputError(f"the arguments of your call to {name!r} are nested too deep",
                               cause_class="ValidationError") from None
    if where is not None:   # Python's json reads NaN, Infinity and 1e400; JSON has no such number
        field, value = where
        raise ModelOutputError(
            f"the arguments of your call to {name!r} hold {value} at "
            f"{field or '(top level)'}, which is not a finite JSON number: give a finite "
            f"number",
            cause_class="ValidationError")
    try:
        return arguments_model(fn).model_validate(arguments).model_dump(mode="json")
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or '(top level)'}: {e['msg']}"
            for e in exc.errors(include_url=False))
        allowed = ", ".join(tool_schema(fn)["parameters"].get("properties", {})) or "none"
        raise ModelOutputError(
            f"your call to {name!r} does not fit its schema: {problems} (its arguments are: "
            f"{allowed})", cause_class="ValidationError") from None


def _not_finite(value: Any, path: str = "") -> tuple[str, str] | None:
    """(where, what) of the first NaN or infinite number in parsed arguments, or None."""
    if isinstance(value, float) and not math.isfinite(value):
        what = "NaN" if value != value else "a number too large for a float (Infinity, 1e400)"
        return path, what
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = _not_finite(item, f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None


def call_args(fn: Callable, arguments: dict) -> tuple[list, dict]:
    """(positional, keyword) arguments to hand `ctx.activity` for a checked call: positional
    in signature order, so a tool parameter may share a name with ctx.activity's own."""
    args, kwargs = [], {}
    for param in inspect.signature(fn).parameters.values():
        if param.name in HIDDEN or param.name not in arguments:
            continue
        if param.kind is param.KEYWORD_ONLY:
            kwargs[param.name] = arguments[param.name]
        else:
            args.append(arguments[param.name])
    return args, kwargs


__all__ = ["tool_schema", "check_call", "arguments_model", "call_args", "HIDDEN"]
