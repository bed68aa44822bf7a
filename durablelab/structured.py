"""Structured output: turn a model's text into validated data, or fail in a way that helps.

A model asked for JSON sometimes answers with half of it, renames a field, or refuses. A
retry with the same prompt may fail the same way; a retry that *tells the model what was
wrong* usually works. So `structured` makes an activity that validates the answer with a
pydantic model and raises `ModelOutputError` carrying the validation error. The engine
gives that class its own small budget (`RetryPolicy.model_output_budget`) and hands the
message to the next attempt as ``feedback=``, which goes back into the prompt as a repair
instruction. When the budget is spent, `ask_structured` can fall back to another model.

Every result carries the call's ``"usage"`` (input_tokens, output_tokens, cost), the
convention budgets and `dl.compare` count by. Broken answers cost tokens too: the
`ModelOutputError` a broken answer raises carries that answer's usage, and a run's
`dl.Budget` counts it (the real bill includes every answer thrown away).
"""

from __future__ import annotations

import functools
import json
from typing import Callable

from .errors import ActivityFailed, BadValue, ModelOutputError
from .retry import RetryPolicy

#: the default policy for model calls: up to 2 repairs, apart from 3 attempts for blips.
MODEL_OUTPUT = RetryPolicy(model_output_budget=2)

REPAIR = ("Your previous answer was rejected: {feedback}\n"
          "Answer again with only the corrected JSON object.")


@functools.lru_cache(maxsize=256)
def structured(llm, schema) -> Callable:
    """An activity function that asks `llm` and returns its answer validated by `schema`.

    Use it as ``ctx.activity("extract", structured(llm, Fields), prompt)``. The returned
    ``fn(prompt, feedback=None, idempotency_key=None) -> dict`` asks
    ``llm.complete(prompt + the fields wanted [+ a repair instruction quoting feedback])``,
    parses the text as JSON and validates it with ``schema.model_validate``.

    Args:
        llm: anything with ``complete(prompt, *, feedback=None, idempotency_key=None) ->
            {"model", "text", "usage"}`` (a `dl.sim.SimLLM`, or an adapter to a real model)
            and a ``name``.
        schema: a pydantic model class.

    Returns ``schema(...).model_dump(mode="json")`` plus ``"usage"``. Raises
    `ModelOutputError` when the answer is not JSON (a truncation, prose, a refusal) or does
    not match the schema; its message names what was wrong, for the next attempt to fix,
    and its `usage` is what the broken answer cost.
    The same (llm, schema) gives the same function, so the engine's bookkeeping stays small.
    """
    fields = ", ".join(schema.model_fields)

    def fn(prompt: str, feedback: str | None = None, idempotency_key: str | None = None) -> dict:
        asked = f"{prompt}\n\nAnswer with only a JSON object with the fields: {fields}."
        if feedback:
            asked += "\n\n" + REPAIR.format(feedback=feedback)
        reply = llm.complete(asked, feedback=feedback, idempotency_key=idempotency_key)
        try:
            data = parse(reply["text"], schema, reply.get("model", llm.name))
        except ModelOutputError as exc:
            exc.usage = reply.get("usage")     # the broken answer was paid for
            raise
        return {**data, "usage": reply["usage"]}

    fn.__name__ = fn.__qualname__ = f"structured_{schema.__name__}"
    fn.__doc__ = f"Ask {llm.name} for a {schema.__name__} (fields: {fields})."
    return fn


def parse(text: str, schema, model: str = "the model") -> dict:
    """`text` as JSON validated by `schema`, dumped to plain data; else `ModelOutputError`
    whose message says what was wrong, in words a model (and a learner) can act on."""
    from pydantic import ValidationError

    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        looks = ("it looks cut off" if text.lstrip().startswith(("{", "["))
                 else "it is prose or a refusal, not JSON")
        raise ModelOutputError(
            f"{model}'s answer is not valid JSON ({exc}; "
            f"{looks}): {_snippet(text)}", cause_class="JSONDecodeError") from None
    try:
        return schema.model_validate(data).model_dump(mode="json")
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(top level)'}: {e['msg']}"
                             for e in exc.errors(include_url=False))
        got = (f" (the answer had the fields: {', '.join(map(str, data))})"
               if isinstance(data, dict) else f" (the answer was a {type(data).__name__})")
        raise ModelOutputError(
            f"{model}'s answer does not match {schema.__name__}: {problems}{got}",
            cause_class="ValidationError") from None


def _snippet(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def ask_structured(ctx, name: str, prompt: str, schema, models, policy=None,
                   fallback_on=("ModelOutputError",)) -> dict:
    """Ask each model in turn for a `schema`, falling back when one cannot produce it.

    Call it from workflow code. Each model is its own recorded activity, named
    ``f"{name}:{model.name}"``, with `policy` (default ``RetryPolicy(model_output_budget=2)``:
    up to two repairs with the validation error fed back). If a model's activity fails for
    good with an error class in `fallback_on`, the next model is asked; any other failure
    (say a ``NonRetryable``) is raised at once, since another model would not fix it. It
    only calls ``ctx.activity``, so a replay takes the same path without asking anyone.

    Returns the first valid answer (fields plus ``"usage"``). Raises the last
    `ActivityFailed` when every model failed.
    """
    if not models:
        raise BadValue(f"ask_structured({name!r}): give at least one model")
    failure = None
    for llm in models:
        try:
            return ctx.activity(f"{name}:{llm.name}", structured(llm, schema), prompt,
                                policy=policy or MODEL_OUTPUT)
        except ActivityFailed as exc:
            if exc.error_class not in fallback_on:
                raise
            failure = exc
    raise failure


__all__ = ["structured", "ask_structured", "parse", "MODEL_OUTPUT"]
