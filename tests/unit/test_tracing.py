"""Trace context: what is carried on, what is ignored, and when spans are recorded."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from noema.adapters import tracing
from noema.adapters.jetstream import Outgoing
from noema_sdk.tracing import carried, trace_headers, trace_id_of
from tests.support import memory_created

TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT = f"00-{TRACE}-b7ad6b7169203331-01"


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracing.install(provider)
    yield spans
    tracing.install(None)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"traceparent": PARENT}, {"traceparent": PARENT}),
        (
            {"traceparent": PARENT, "tracestate": "congo=t61rcWkgMzE"},
            {"traceparent": PARENT, "tracestate": "congo=t61rcWkgMzE"},
        ),
        # a later version is read by its first four fields, and carried on as version 00
        ({"traceparent": f"cc-{TRACE}-b7ad6b7169203331-01-what-comes-next"}, {"traceparent": PARENT}),
        ({"traceparent": PARENT, "tracestate": "x=\u0000"}, {"traceparent": PARENT}),
        ({"traceparent": PARENT, "tracestate": "x" * 513}, {"traceparent": PARENT}),
        ({"traceparent": f"00-{TRACE}-b7ad6b7169203331-01-more"}, {}),
        ({"traceparent": PARENT.upper()}, {}),
        ({"traceparent": f"00-{'0' * 32}-b7ad6b7169203331-01"}, {}),
        ({"traceparent": f"00-{TRACE}-{'0' * 16}-01"}, {}),
        ({"traceparent": f"ff-{TRACE}-b7ad6b7169203331-01"}, {}),
        ({"traceparent": PARENT + "-" + "x" * 600}, {}),
        ({"traceparent": ""}, {}),
        ({"Traceparent": PARENT}, {}),  # NATS header names are case-sensitive: lower case only
        ({"tracestate": "congo=t61rcWkgMzE"}, {}),
        ({}, {}),
        (None, {}),
    ],
)
def test_only_a_well_formed_context_is_carried(
    headers: dict[str, str] | None, expected: dict[str, str]
) -> None:
    assert carried(headers) == expected


class Hostile(dict[str, str]):
    def get(self, *_: Any) -> Any:
        raise RuntimeError("a header object that fails")


@given(st.dictionaries(st.sampled_from(["traceparent", "tracestate", "other"]), st.text(max_size=700)))
def test_no_header_value_makes_it_raise(headers: dict[str, str]) -> None:
    found = carried(headers)
    assert set(found) <= {"traceparent", "tracestate"}
    assert carried(Hostile(headers)) == {}


def test_an_observation_starts_a_trace_or_continues_the_callers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRACEPARENT", raising=False)
    first, second = trace_id_of(trace_headers()), trace_id_of(trace_headers())
    assert first
    assert second
    assert first != second
    assert trace_headers()["traceparent"].endswith("-01")  # sampled: the workers may record it
    monkeypatch.setenv("TRACEPARENT", PARENT)
    assert trace_headers() == {"traceparent": PARENT}
    monkeypatch.setenv("TRACEPARENT", "not a trace")
    assert trace_id_of(trace_headers()) not in (None, TRACE)


def test_the_current_span_is_what_an_observation_continues(exporter: InMemorySpanExporter) -> None:
    provider = TracerProvider()
    with provider.get_tracer("agent").start_as_current_span("turn") as span:
        context = span.get_span_context()
        parent = f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
        assert trace_headers() == {"traceparent": parent}


def test_without_recording_a_batch_passes_the_context_on_as_it_came() -> None:
    tracing.install(None)
    event = memory_created("x")
    caused = msgspec.structs.replace(memory_created("y"), causation_id=event.id)
    with tracing.batch("noema.test") as traces:
        traces.carry(event.id, {"traceparent": PARENT, "tracestate": "a=b"})
        traces.carry("other", {"traceparent": "hostile"})
        assert tracing.outgoing(caused) == {"traceparent": PARENT, "tracestate": "a=b"}
        assert tracing.outgoing(event) == {}
    assert tracing.outgoing(caused) == {}  # outside the batch: nothing


def test_a_recorded_batch_continues_each_trace_under_a_span_of_its_own(
    exporter: InMemorySpanExporter,
) -> None:
    cause = memory_created("x")
    caused = msgspec.structs.replace(memory_created("y"), causation_id=cause.id)
    with tracing.batch("noema.test") as traces:
        traces.carry(cause.id, {"traceparent": PARENT}, subject="s")
        traces.carry("hostile", {"traceparent": "00-zz"})
        out = tracing.outgoing(caused)
    (span,) = exporter.get_finished_spans()
    assert span.name == "noema.test"
    assert span.parent is not None
    assert f"{span.context.trace_id:032x}" == TRACE
    assert f"{span.parent.span_id:016x}" == "b7ad6b7169203331"
    assert out == {"traceparent": f"00-{TRACE}-{span.context.span_id:016x}-01"}


def test_a_failed_batch_ends_its_spans_with_the_error(exporter: InMemorySpanExporter) -> None:
    def fail() -> None:
        with tracing.batch("noema.test") as traces:
            traces.carry("id", {"traceparent": PARENT})
            raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        fail()
    (span,) = exporter.get_finished_spans()
    assert not span.status.is_ok


def test_a_projector_batch_does_nothing_unless_recording() -> None:
    tracing.install(None)
    with tracing.batch("noema.project", publishes=False) as traces:
        traces.carry("id", {"traceparent": PARENT})
        assert traces.headers_for(memory_created("x")) == {}


def test_a_request_is_served_inside_its_callers_trace() -> None:
    tracing.install(None)
    with tracing.serving({"traceparent": PARENT}, "noema.api POST"):
        assert trace_headers() == {"traceparent": PARENT}
    with tracing.serving({"traceparent": "hostile"}, "noema.api POST"):
        assert trace_id_of(trace_headers()) != TRACE


def test_carried_headers_never_replace_the_message_id() -> None:
    out = Outgoing("s", b"", "id-1", {"traceparent": PARENT, "Nats-Msg-Id": "forged"})
    assert out.all_headers()["Nats-Msg-Id"] == "id-1"
    assert out.all_headers(**{"Nats-Batch-Id": "b"}) == {
        "traceparent": PARENT,
        "Nats-Msg-Id": "id-1",
        "Nats-Batch-Id": "b",
    }


@pytest.mark.parametrize(
    ("env", "exporter"),
    [
        ({}, None),
        ({"OTEL_TRACES_EXPORTER": "none"}, None),
        ({"OTEL_TRACES_EXPORTER": "console"}, "console"),
        ({"OTEL_TRACES_EXPORTER": "otlp,console"}, "otlp"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, "otlp"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, "otlp"),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, None),
    ],
)
def test_the_exporter_is_off_unless_the_environment_asks(env: dict[str, str], exporter: str | None) -> None:
    assert tracing.exporter_of(env) == exporter


@pytest.mark.parametrize("name", ["console", "otlp"])
def test_configure_records_with_the_exporter_asked_for(name: str) -> None:
    try:
        assert tracing.configure("attend", {"OTEL_TRACES_EXPORTER": name}) is True
        assert tracing.recording()
    finally:
        tracing.install(None)
    assert tracing.configure("attend", {"OTEL_TRACES_EXPORTER": "zipkin-or-typo"}) is False
    assert tracing.configure("attend", {}) is False
    assert not tracing.recording()


def test_a_worker_without_an_exporter_never_imports_opentelemetry() -> None:
    code = (
        "import sys; from noema.adapters import tracing; import noema_attend.worker, noema_projector.worker, "
        "noema_embed.service; assert not tracing.configure('attend', {}); "
        "from noema.adapters.jetstream import EventPublisher; "
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
