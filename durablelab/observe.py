"""Observers: what an engine tells the outside about its work, as it happens.

An operator watches runs through logs and traces, not through the history: a line when a
run starts, when it wakes up and how much it replayed, when an attempt ends and how. The
engine hands these moments to its observers (`Engine.observers`); each sees the run's id,
workflow, position, attempt and error class, never a payload's content. The log observer
below is always there and is silent until the user configures logging;
`durablelab.tracing` adds one that emits OpenTelemetry spans.

An observer that raises is removed with an `ObserverWarning`: what watches the work must
never stop it.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

from .errors import ObserverWarning

#: durablelab's logger. Silent unless configured, e.g.
#: ``logging.basicConfig(level=logging.INFO)`` or a handler on this logger.
log = logging.getLogger("durablelab")


class Observer:
    """The moments an engine reports (each method does nothing here: override those you
    need). Times are seconds on the engine's clock."""

    def run_started(self, state) -> None:
        """A run was recorded and scheduled."""

    def wakeup_ended(self, state, woke_at: float, reason: str, replayed: int,
                     recorded: int, now: float) -> None:
        """One execution of the run's code ended: it replayed `replayed` events from
        history and recorded `recorded` new ones."""

    def attempt_ended(self, state, attempt, error) -> None:
        """An activity attempt ended (`attempt`: an `activities.Attempt`; `error`: the
        error it ended with, or None)."""

    def run_ended(self, state) -> None:
        """The run ended (completed, failed, continued or cancelled)."""


class LogObserver(Observer):
    """Run starts and ends at INFO, wake-ups and attempts at DEBUG, on the ``durablelab``
    logger, each with its facts in `extra` (``run_id``, ``workflow``, ``position``,
    ``attempt``, ``error_class``, ``outcome``) and sizes only, never values."""

    def run_started(self, state) -> None:
        if log.isEnabledFor(logging.INFO):
            log.info("run %s started (%s), input %d bytes", state.run_id, state.workflow,
                     len(state.input_json), extra=_fields(state))

    def wakeup_ended(self, state, woke_at, reason, replayed, recorded, now) -> None:
        if log.isEnabledFor(logging.DEBUG):
            log.debug("run %s woke (%s) at t=%g: replayed %d events, recorded %d",
                      state.run_id, reason, woke_at, replayed, recorded,
                      extra=_fields(state, reason=reason, replayed=replayed,
                                    recorded=recorded))

    def attempt_ended(self, state, attempt, error) -> None:
        if log.isEnabledFor(logging.DEBUG):
            error_class = None if error is None else error.error_class
            log.debug("run %s: %s at position %d, attempt %d ended %s after %gs",
                      state.run_id, attempt.name, attempt.position, attempt.attempt,
                      error_class or "ok", attempt.ended_at - attempt.started_at,
                      extra=_fields(state, activity=attempt.name, position=attempt.position,
                                    attempt=attempt.attempt, error_class=error_class,
                                    value_bytes=len(attempt.value_json or "")))

    def run_ended(self, state) -> None:
        if log.isEnabledFor(logging.INFO):
            error = state.error
            log.info("run %s %s at t=%g", state.run_id, state.status, state.ended_at,
                     extra=_fields(state, status=state.status,
                                   error_class=None if error is None
                                   else type(error).__name__))


def _fields(state, **more: Any) -> dict:
    return {"run_id": state.run_id, "workflow": state.workflow, **more}


def notify(observers: list, moment: str, *args) -> None:
    """Tell every observer; one that raises is dropped, with a warning saying which."""
    for observer in list(observers):
        try:
            getattr(observer, moment)(*args)
        except Exception as exc:   # an exporter, a tracer provider: never the run's problem
            observers.remove(observer)
            warnings.warn(ObserverWarning(
                f"observer {observer!r} raised {type(exc).__name__}: {exc} in {moment}; it "
                f"is removed from the engine, which carries on. Fix the observer (a tracer "
                f"provider, an exporter) and instrument the engine again."), stacklevel=2)


__all__ = ["Observer", "LogObserver", "log", "notify"]
