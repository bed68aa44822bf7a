"""dl.viz.trace_plot draws one run's OpenTelemetry spans (from the SDK's in-memory exporter)
on the engine's clock: a run that waits three virtual days is three days wide; a window
zooms on a busy minute; spans of several runs need a run id; bad input is refused."""

from __future__ import annotations

import pytest
from IPython.core.formatters import DisplayFormatter

import durablelab as dl
from durablelab.errors import BadType, BadValue
from durablelab.faults import RateLimit

pytest.importorskip("opentelemetry.sdk.trace", reason="needs the otel extra")
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter)

DAY = 86400.0


def ask(prompt):
    return {"text": "ok", "usage": {"input_tokens": 10, "output_tokens": 2}}


def waits_for_a_reply(ctx, prompt):
    ctx.activity("model", ask, prompt, policy=dl.RetryPolicy(initial=1.0, jitter="none"))
    return ctx.wait_signal("reply", timeout=3 * DAY)


@pytest.fixture(scope="module")
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with dl.Engine() as engine:
        dl.tracing.instrument(engine, tracer_provider=provider)
        engine.start(waits_for_a_reply, "hi", run_id="a",
                     faults=[RateLimit("model", attempts=[1, 2], retry_after=5)])
        engine.start(waits_for_a_reply, "hi", run_id="b")
        engine.run_until_idle()
    return exporter.get_finished_spans()


def bars(figure):
    """(lane label, left, width) of every bar, in the axis unit."""
    ax = figure.axes[0]
    labels = {round(tick): label.get_text()
              for tick, label in zip(ax.get_yticks(), ax.get_yticklabels())}
    return [(labels[round(p.get_y() + p.get_height() / 2)], p.get_x(), p.get_width())
            for p in ax.patches]


def test_a_three_day_wait_is_three_days_wide_with_a_lane_per_kind(spans):
    figure = dl.viz.trace_plot(spans, "a", unit="days")
    drawn = bars(figure)
    [run] = [b for b in drawn if b[0] == "run"]
    assert run[1] == 0 and run[2] == pytest.approx(3 + 10 / DAY, abs=1e-6)
    assert [label for label, _, _ in drawn].count("model (3)") == 3     # two 429s, then ok
    assert "wake-ups (4)" in {label for label, _, _ in drawn}
    assert figure.axes[0].get_xlabel() == "virtual time since the run started (days)"
    legend = [t.get_text() for t in figure.axes[0].get_legend().get_texts()]
    assert legend == ["run span", "wake-up span", "attempt ok", "attempt: RateLimited"]
    data, _ = DisplayFormatter().format(figure)
    assert data["image/png"][:8] == b"\x89PNG\r\n\x1a\n"


def test_a_window_shows_the_busy_seconds(spans):
    figure = dl.viz.trace_plot(spans, "a", unit="s", until=30)
    model = sorted(left for label, left, _ in bars(figure) if label.startswith("model"))
    assert model == pytest.approx([0.0, 5.0, 10.0])          # Retry-After 5 s, twice
    assert "window 0 s to 30 s" in figure._suptitle.get_text()


def test_bad_input_is_refused(spans):
    with pytest.raises(BadValue, match="the spans are of 2 runs"):
        dl.viz.trace_plot(spans)
    with pytest.raises(BadValue, match="no finished span has durablelab.run_id = 'zz'"):
        dl.viz.trace_plot(spans, "zz")
    with pytest.raises(BadValue, match="unit='weeks'"):
        dl.viz.trace_plot(spans, "a", unit="weeks")
    with pytest.raises(BadValue, match="window .* is empty"):
        dl.viz.trace_plot(spans, "a", start=60, until=10)
    with pytest.raises(BadType, match="spans is int"):
        dl.viz.trace_plot(42, "a")
    with pytest.raises(BadValue, match="no finished span"):
        dl.viz.trace_plot([], None)
