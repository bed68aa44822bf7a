"""Checkers for the exercises of lesson 16 (operating durable agents).

16.1 builds small boards whose right pages are known by construction (an overdue approval,
a wait without a deadline a day old, ones that must stay quiet) and calls the learner's
alert rule on each. 16.2 records a transcript and model drafts under the learner's
threshold and reads what went to the payloads table. 16.3 runs the crash and counts the
attempt spans the trace really holds.
"""

from __future__ import annotations

from . import Stop, exercise

HOUR, DAY = 3600.0, 86400.0
#: 16.2: a model draft of exactly 1,000 bytes of JSON (the transcript is the lesson's).
DRAFT = "d" * 998


def _waits(ctx, hours):
    """An approval wait: with a deadline `hours` from now, or none when `hours` is None."""
    return ctx.wait_signal("approval", timeout=None if hours is None else hours * HOUR)


def _done(ctx, _):
    return "done"


def _boards():
    """[(what the board is, board, the ids to page for)]: one engine read at two instants,
    and a quiet engine."""
    import durablelab as dl
    engine = dl.Engine()
    engine.start(_waits, 72, run_id="within-deadline")         # deadline at 72 h
    engine.start(_waits, None, run_id="no-deadline-old")       # waits from t = 0
    engine.start(_done, None, run_id="finished")
    engine.advance(28 * HOUR)
    engine.start(_waits, 1, run_id="past-deadline")            # deadline at 29 h
    engine.start(_waits, None, run_id="no-deadline-new")       # waits from 28 h
    engine.advance(0)                                          # they start waiting
    boards = [("read at 30 h", dl.ops(engine, now=30 * HOUR),
               {"past-deadline", "no-deadline-old"}),
              ("read at 28.5 h, before the 29 h deadline", dl.ops(engine, now=28.5 * HOUR),
               {"no-deadline-old"})]
    quiet = dl.Engine()
    quiet.start(_waits, None, run_id="no-deadline-new")
    quiet.start(_done, None, run_id="finished")
    quiet.advance(2 * HOUR)
    boards.append(("a quiet board at 2 h", dl.ops(quiet), set()))
    engine.close()
    quiet.close()
    return boards


_WHY = {"past-deadline": "the run past its deadline",
        "no-deadline-old": "the wait without a deadline that is more than a day old",
        "within-deadline": "a run still within its deadline",
        "no-deadline-new": "a wait without a deadline that is only hours old",
        "finished": "a run that is not waiting"}


@exercise("16.1", "An alert rule",
          "your function alerts(board) that returns the run ids to page for")
def alert_rule(fn):
    if not callable(fn):
        raise Stop(f"give the function itself, alerts, not {type(fn).__name__}")
    for what, board, expected in _boards():
        try:
            got = fn(board)
        except Exception as exc:
            raise Stop(f"alerts(board) raised {type(exc).__name__}: {exc} (board {what})")
        try:
            got = {str(run_id) for run_id in got}
        except TypeError:
            raise Stop(f"alerts(board) returned {type(got).__name__}; return the run ids, a "
                       f"list or a set of strings") from None
        for run_id in sorted(expected - got):
            yield False, f"board {what}: it does not page for {_WHY[run_id]}"
        for run_id in sorted(got - expected):
            yield False, f"board {what}: it pages for {_WHY.get(run_id, run_id)}"
        if got == expected:
            yield True, (f"board {what}: it pages for exactly "
                         f"{' and '.join(_WHY[r] for r in sorted(expected)) or 'nothing'}")


def _recorded(ctx, n):
    from ..examples.support import load_thread
    for _ in range(n):
        ctx.activity("load_thread", load_thread, "T-0042")
        ctx.activity("model", lambda: DRAFT)


@exercise("16.2", "Choose a threshold",
          "a payload_threshold in bytes that stores the transcript once and keeps the "
          "drafts inline")
def choose_threshold(threshold):
    import durablelab as dl
    from ..errors import UsageError
    if isinstance(threshold, bool) or not isinstance(threshold, int):
        raise Stop(f"give a whole number of bytes, not {type(threshold).__name__}")
    try:
        engine = dl.Engine(payload_threshold=threshold)
    except UsageError as exc:
        raise Stop(str(exc)) from None
    with engine:
        engine.start(_recorded, 3, run_id="thread")
        engine.run_until_idle()
        stored = [length for (length,) in engine.store.fetch(
            "SELECT length(body) FROM payloads ORDER BY length(body)")]
    draft_by_reference = any(length < 2000 for length in stored)
    transcript_once = sum(1 for length in stored if length > 2000) == 1
    yield transcript_once, ("the transcript is stored once, by reference" if transcript_once
                            else "the transcript is still stored inline, once per read: a "
                                 "value goes by reference only when its JSON is longer "
                                 "than the threshold")
    yield not draft_by_reference, ("the drafts stay inline" if not draft_by_reference else
                                   "the drafts are stored by reference too: a value is "
                                   "stored by reference when its JSON is longer than the "
                                   "threshold")


@exercise("16.3", "Spans after a crash",
          "the number of attempt spans the trace holds for the crashed run")
def spans_after_a_crash(answer):
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        raise Stop(f"give a number of spans, not {type(answer).__name__}")
    truth, replayed = crashed_run_spans()
    if answer == truth:
        yield True, (f"{truth} attempt spans: the fresh worker replayed the recorded steps "
                     f"from history ({replayed} events), and a replayed step is not new work")
    elif answer > truth:
        yield False, ("more than the trace holds: count only this run's spans named "
                      "'attempt ...'; does a step the fresh worker replayed from history get "
                      "one?")
    else:
        yield False, ("fewer than the trace holds: every attempt that ran is a span, a retry "
                      "after a 503 as much as the first try")


def crashed_run_spans() -> tuple[int, int]:
    """(attempt spans, events replayed by wake-ups) of 16.3's run: a question ticket whose
    worker dies right after the model's answer was recorded."""
    import durablelab as dl
    from ..examples import support
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter)
    except ImportError:
        raise Stop("this exercise needs OpenTelemetry: pip install \"durablelab[otel]\"") \
            from None
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with dl.Engine() as engine:
        engine.world = support.SupportWorld(engine.clock)
        dl.tracing.instrument(engine, tracer_provider=provider)
        ticket = support.tickets(1)[0]
        engine.start(support.support_ticket, ticket, run_id=ticket["id"],
                     faults=[dl.faults.Crash("model", point="after_record")])
        engine.run_until_idle()
    spans = exporter.get_finished_spans()
    attempts = sum(1 for s in spans if s.name.startswith("attempt "))
    replayed = sum(s.attributes.get("durablelab.replayed", 0) for s in spans
                   if s.name.startswith("wake-up"))
    return attempts, replayed
