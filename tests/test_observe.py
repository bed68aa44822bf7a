"""What an operator watches: logs on the "durablelab" logger and OpenTelemetry spans
(`dl.tracing.instrument`), read from the SDK's in-memory exporter and from its OTLP/HTTP
exporter sending to a receiver on 127.0.0.1."""

from __future__ import annotations

import http.server
import logging
import threading

import pytest

import durablelab as dl
from durablelab.faults import Latency, ServerError

otel = pytest.importorskip("opentelemetry.sdk.trace", reason="needs the otel extra")
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter)

SECRET = "the-customer's-card-4242"


def model(prompt):
    return {"text": "ok", "usage": {"input_tokens": 120, "output_tokens": 30}}


def onboard(ctx, request):
    answer = ctx.activity("model", model, request["prompt"])
    ctx.sleep(3 * 86400)          # three days waiting, say, for a person
    ctx.activity("charge", lambda card: {"id": "ch_1"}, SECRET,
                 policy=dl.RetryPolicy(initial=1.0, max_attempts=3))
    return answer["text"]


def traced(engine):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    dl.tracing.instrument(engine, tracer_provider=provider)
    return exporter


def run_onboarding(engine):
    run_id = engine.start(onboard, {"prompt": SECRET}, run_id="r1",
                          faults=[ServerError("charge", attempts=[1]),
                                  Latency("model", seconds=2.0)])
    engine.run_until_idle()
    return run_id


def test_a_run_is_a_trace_with_its_run_id_on_every_span_in_virtual_time():
    engine = dl.Engine()
    exporter = traced(engine)
    run_onboarding(engine)
    spans = exporter.get_finished_spans()
    assert {s.attributes["durablelab.run_id"] for s in spans} == {"r1"}
    [run] = [s for s in spans if s.name.startswith("run ")]
    assert all(s.parent.span_id == run.context.span_id for s in spans if s is not run)
    assert (run.end_time - run.start_time) / 1e9 == pytest.approx(3 * 86400 + 2 + 1, abs=2)
    attempts = [s for s in spans if s.name.startswith("attempt ")]
    assert [(s.attributes["durablelab.activity"], s.attributes["durablelab.attempt"])
            for s in attempts] == [("model", 1), ("charge", 1), ("charge", 2)]
    assert attempts[1].attributes["durablelab.error_class"] == "Transient"
    assert attempts[0].attributes["gen_ai.usage.input_tokens"] == 120
    assert attempts[0].attributes["gen_ai.usage.output_tokens"] == 30
    assert (attempts[0].end_time - attempts[0].start_time) / 1e9 == pytest.approx(2.0)
    wakeups = [s for s in spans if s.name.startswith("wake-up")]
    # replayed steps are not new work: as many attempt spans as attempts, however many
    # wake-ups replayed them
    assert sum(s.attributes["durablelab.replayed"] for s in wakeups) > 0
    assert len(attempts) == len(engine.run("r1").attempts)
    assert run.attributes["durablelab.status"] == "completed"


def test_a_tracer_provider_that_raises_is_refused_or_dropped_and_the_run_goes_on():
    class Broken:
        def get_tracer(self, name):
            raise RuntimeError("no exporter configured")

    engine = dl.Engine()
    with pytest.raises(dl.DurableLabError, match="get_tracer\\(\\) raised RuntimeError"):
        dl.tracing.instrument(engine, tracer_provider=Broken())
    with pytest.raises(TypeError, match="not an OpenTelemetry TracerProvider"):
        dl.tracing.instrument(engine, tracer_provider="jaeger")

    class Failing:
        def start_span(self, *args, **kwargs):
            raise ConnectionError("collector down")

    class Provider:
        def get_tracer(self, name):
            return Failing()

    dl.tracing.instrument(engine, tracer_provider=Provider())
    with pytest.warns(dl.ObserverWarning, match="collector down"):
        run_id = run_onboarding(engine)
    assert engine.run(run_id).status == "completed"
    assert len(engine.observers) == 1      # only the log observer is left


@pytest.mark.parametrize("broken", ["on_start", "on_end"])
def test_an_sdk_provider_whose_span_processor_raises_is_dropped_and_the_run_goes_on(broken):
    # A real TracerProvider, not a stand-in: its processor (an exporter, say) raises when a
    # span starts or ends. The SDK passes that on; the engine drops the observer, warns once.
    from opentelemetry.sdk.trace.export import SpanProcessor

    class Raising(SpanProcessor):
        def on_start(self, span, parent_context=None):
            if broken == "on_start":
                raise ConnectionError("collector down at start")

        def on_end(self, span):
            if broken == "on_end":
                raise ConnectionError("collector down at end")

    provider = TracerProvider()
    provider.add_span_processor(Raising())
    engine = dl.Engine()
    dl.tracing.instrument(engine, tracer_provider=provider)
    with pytest.warns(dl.ObserverWarning, match="collector down") as caught:
        run_id = run_onboarding(engine)
    assert len([w for w in caught if issubclass(w.category, dl.ObserverWarning)]) == 1
    assert engine.run(run_id).status == "completed"
    assert len(engine.observers) == 1      # the log observer stays


def test_spans_reach_an_otlp_http_receiver_on_localhost():
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest)

    received = []

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, ExportTraceServiceRequest.FromString(body)))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(
            endpoint=f"http://127.0.0.1:{server.server_port}/v1/traces", timeout=5)))
        engine = dl.Engine()
        dl.tracing.instrument(engine, tracer_provider=provider)
        run_onboarding(engine)
        provider.shutdown()
    finally:
        server.shutdown()
    spans = [span for _, request in received for rs in request.resource_spans
             for ss in rs.scope_spans for span in ss.spans]
    assert {path for path, _ in received} == {"/v1/traces"}
    assert any(span.name == "run onboard" for span in spans)
    run_ids = {a.value.string_value for span in spans for a in span.attributes
               if a.key == "durablelab.run_id"}
    assert run_ids == {"r1"}


def test_logs_are_silent_by_default_and_carry_fields_never_values(caplog):
    engine = dl.Engine()
    run_onboarding(engine)
    assert not [r for r in caplog.records if r.name == "durablelab"]
    with caplog.at_level(logging.DEBUG, logger="durablelab"):
        engine.start(onboard, {"prompt": SECRET}, run_id="r2")
        engine.run_until_idle()
    records = [r for r in caplog.records if r.name == "durablelab"]
    text = "\n".join(r.getMessage() for r in records)
    assert "run r2 started" in text and "replayed" in text and "run r2 completed" in text
    assert SECRET not in text and all(SECRET not in str(vars(r)) for r in records)
    attempts = [r for r in records if hasattr(r, "attempt")]
    assert {(r.activity, r.position, r.attempt) for r in attempts} == {("model", 1, 1),
                                                                       ("charge", 4, 1)}
    assert all(r.run_id == "r2" and r.workflow.endswith(":onboard") for r in records)
