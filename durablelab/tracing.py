"""Tracing: a run as an OpenTelemetry trace, end to end, with its run id on every span.

`instrument(engine)` adds an observer (`durablelab.observe`) that turns what the engine does
into spans: one per run (from its start to its end), one per wake-up (an execution of the
code: how many events it replayed and how many it recorded), and one per activity attempt.
Replayed steps are not new work, so they get no attempt span: a trace shows what was
really done, and a wake-up span's ``durablelab.replayed`` shows what replay cost.

Span times come from the engine's clock, so a run that waited three virtual days for an
approval reads as three days in a trace viewer (virtual time starts at the epoch). Model
attempts carry the OpenTelemetry GenAI usage attributes (``gen_ai.usage.input_tokens``,
``gen_ai.usage.output_tokens``) read from the usage the model reported. Needs the extra
``otel`` (``pip install "durablelab[otel]"``: the ``opentelemetry-sdk``).
"""

from __future__ import annotations

import json
from typing import Any

from .errors import bad_type
from .observe import Observer

_NS = 1_000_000_000


def _ns(seconds: float) -> int:
    return int(round(seconds * _NS))


def instrument(engine, tracer_provider=None) -> "Tracer":
    """Emit OpenTelemetry spans for `engine`'s runs from now on; returns the observer
    (``engine.observers.remove(it)`` stops it). `tracer_provider`: an SDK
    `TracerProvider` with the exporters of your choice; None: the global one."""
    try:
        from opentelemetry import trace
    except ImportError:   # pragma: no cover - the otel extra is missing
        raise ImportError("dl.tracing.instrument needs OpenTelemetry: pip install "
                          "\"durablelab[otel]\" (the opentelemetry-sdk).") from None
    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    if not callable(getattr(provider, "get_tracer", None)):
        raise bad_type("dl.tracing.instrument", "tracer_provider", (
            f"tracer_provider={provider!r} is not an OpenTelemetry TracerProvider; give "
            f"opentelemetry.sdk.trace.TracerProvider(...) or None for the global one"))
    try:
        tracer = Tracer(provider.get_tracer("durablelab"), trace)
    except Exception as exc:
        raise bad_type("dl.tracing.instrument", "tracer_provider", (
            f"its get_tracer() raised {type(exc).__name__}: {exc}; give a working "
            f"TracerProvider")) from exc
    engine.observers.append(tracer)
    return tracer


class Tracer(Observer):
    """The observer `instrument` adds: it keeps each live run's span, and opens the wake-up
    and attempt spans inside it."""

    def __init__(self, tracer, trace_api):
        self._tracer, self._trace = tracer, trace_api
        self._runs: dict[str, Any] = {}

    def _run_span(self, state):
        span = self._runs.get(state.run_id)
        if span is None:   # a run started before the engine was instrumented, or reloaded
            span = self._runs[state.run_id] = self._tracer.start_span(
                f"run {state.workflow.rpartition(':')[2]}", start_time=_ns(state.started_at),
                attributes=_attributes(state))
        return span

    def _child(self, state, name: str, start: float, end: float, attributes: dict,
               error_class: str | None = None) -> None:
        context = self._trace.set_span_in_context(self._run_span(state))
        span = self._tracer.start_span(name, context=context, start_time=_ns(start),
                                       attributes={**_attributes(state), **attributes})
        if error_class is not None:
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, error_class))
        span.end(end_time=_ns(max(end, start)))

    def run_started(self, state) -> None:
        self._run_span(state)

    def wakeup_ended(self, state, woke_at, reason, replayed, recorded, now) -> None:
        self._child(state, f"wake-up ({reason})", woke_at, now, {
            "durablelab.reason": reason, "durablelab.replayed": replayed,
            "durablelab.recorded": recorded})

    def attempt_ended(self, state, attempt, error) -> None:
        error_class = None if error is None else error.error_class
        attributes = {"durablelab.activity": attempt.name,
                      "durablelab.position": attempt.position,
                      "durablelab.attempt": attempt.attempt}
        if error_class is not None:
            attributes["durablelab.error_class"] = error_class
        attributes.update(_usage(attempt.value_json, getattr(error, "usage", None)))
        self._child(state, f"attempt {attempt.name}", attempt.started_at, attempt.ended_at,
                    attributes, error_class)

    def run_ended(self, state) -> None:
        span = self._run_span(state)
        span.set_attribute("durablelab.status", state.status)
        if state.error is not None:
            span.set_attribute("durablelab.error_class", type(state.error).__name__)
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, state.status))
        span.end(end_time=_ns(state.ended_at))
        del self._runs[state.run_id]


def _attributes(state) -> dict:
    return {"durablelab.run_id": state.run_id, "durablelab.workflow": state.workflow}


def _usage(value_json: str | None, usage: Any) -> dict:
    """GenAI usage attributes of a model attempt: from its answer's ``usage`` (a broken
    answer's rides on its error), or none."""
    if usage is None and value_json is not None and '"usage"' in value_json:
        value = json.loads(value_json)
        usage = value.get("usage") if isinstance(value, dict) else None
    if not isinstance(usage, dict):
        return {}
    found = {}
    for ours, theirs in (("input_tokens", "gen_ai.usage.input_tokens"),
                         ("output_tokens", "gen_ai.usage.output_tokens")):
        if isinstance(usage.get(ours), (int, float)) and not isinstance(usage.get(ours), bool):
            found[theirs] = int(usage[ours])
    return found


__all__ = ["instrument", "Tracer"]
