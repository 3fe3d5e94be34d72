"""Trace context through the bus, from an observation to its memory (docs/operations.md "Traces").

An observation carries a W3C ``traceparent`` (and ``tracestate``) in its NATS headers
(:mod:`noema_sdk.tracing`); the API and the agent service take the caller's from the request
(:func:`serving`). A worker continues it (:func:`batch`): every event it publishes because of a
message that carried a trace context carries it on, keyed by the event's ``causation_id`` (attend's
``attention.decided``, ``memory.created`` and the rest of the cycle, embed's ``memory.embedded``), and
the projector's work on an event joins the event's trace.

Spans are recorded only when an exporter is configured (:func:`configure`: ``OTEL_TRACES_EXPORTER``
``console`` or ``otlp``, or an OTLP endpoint), with the OpenTelemetry SDK. Without one nothing is
recorded, OpenTelemetry is not even imported by the workers, and the context is passed on as it
came: the trace id still goes from the observation to every event made from it. Malformed or
hostile headers are ignored (:func:`noema_sdk.tracing.carried`); tracing never fails a message.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import structlog

from noema_events import Event
from noema_sdk.tracing import TRACEPARENT, TRACESTATE, carried, current_span_headers

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, SpanContext, Tracer

__all__ = ["Batch", "batch", "configure", "install", "outgoing", "recording", "serving"]

log = structlog.get_logger("noema.tracing")

EXPORTERS = ("console", "otlp")
"""The values of ``OTEL_TRACES_EXPORTER`` that turn recording on (``none``, or unset: off)."""

_tracer: Tracer | None = None
_current: ContextVar[Batch | None] = ContextVar("noema_trace_batch", default=None)


def exporter_of(env: Mapping[str, str]) -> str | None:
    """The exporter the environment asks for: ``OTEL_TRACES_EXPORTER`` (its first entry), else
    ``otlp`` when an OTLP endpoint is set; None when none, or ``OTEL_SDK_DISABLED`` is true."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    named = env.get("OTEL_TRACES_EXPORTER", "").split(",")[0].strip().lower()
    if named:
        return named if named != "none" else None
    if env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return "otlp"
    return None


def configure(service: str, env: Mapping[str, str] | None = None) -> bool:
    """Record and export this process's spans when the environment configures an exporter (the
    standard ``OTEL_*`` variables; the service name defaults to ``noema-<service>``); returns whether
    it does. An exporter that cannot be made is logged and tracing stays off: never a failed start."""
    env = os.environ if env is None else env
    exporter = exporter_of(env)
    if exporter is None:
        return False
    if exporter not in EXPORTERS:
        log.warning(
            "unknown OTEL_TRACES_EXPORTER; traces are not exported", exporter=exporter, known=EXPORTERS
        )
        return False
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

        span_exporter: SpanExporter
        if exporter == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            span_exporter = OTLPSpanExporter()
        else:
            span_exporter = ConsoleSpanExporter()
        # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES over this default.
        name = env.get("OTEL_SERVICE_NAME") or f"noema-{service}"
        provider = TracerProvider(resource=Resource.create({"service.name": name}))
        provider.add_span_processor(BatchSpanProcessor(span_exporter))
    except Exception as exc:  # e.g. otlp without the noema[otlp] extra installed
        log.warning("traces cannot be exported; tracing stays off", exporter=exporter, error=repr(exc))
        return False
    install(provider)
    log.info("exporting traces", exporter=exporter, service=name)
    return True


def install(provider: TracerProvider | None) -> None:
    """Record spans through ``provider`` from now on (None: stop recording). Its exporters are the
    provider's; a test installs one with an in-memory exporter."""
    global _tracer
    _tracer = None if provider is None else provider.get_tracer("noema")


def recording() -> bool:
    """Whether spans are recorded (an exporter is configured)."""
    return _tracer is not None


def _span_context(headers: Mapping[str, str]) -> SpanContext:
    """The remote span context of carried (already validated) headers."""
    from opentelemetry.trace import SpanContext, TraceFlags, TraceState

    _, trace_id, span_id, flags = headers[TRACEPARENT].split("-")
    state = headers.get(TRACESTATE)
    return SpanContext(
        int(trace_id, 16),
        int(span_id, 16),
        is_remote=True,
        trace_flags=TraceFlags(int(flags, 16)),
        trace_state=TraceState.from_header([state]) if state else None,
    )


def _context(headers: Mapping[str, str]) -> Context:
    from opentelemetry.trace import NonRecordingSpan, set_span_in_context

    return set_span_in_context(NonRecordingSpan(_span_context(headers)))


def _headers(span: Span) -> dict[str, str]:
    context = span.get_span_context()
    headers = {TRACEPARENT: f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"}
    state = context.trace_state.to_header()
    if state:
        headers[TRACESTATE] = state
    return headers


def _start(name: str, headers: Mapping[str, str], kind: str, attributes: Mapping[str, Any]) -> Span | None:
    """A recorded span continuing ``headers``' trace (None when not recording, or it cannot be made)."""
    tracer = _tracer
    if tracer is None:
        return None
    try:
        from opentelemetry.trace import SpanKind

        return tracer.start_span(
            name, context=_context(headers), kind=SpanKind[kind], attributes=dict(attributes)
        )
    except Exception as exc:  # tracing never fails a message
        log.debug("span not started", name=name, error=repr(exc))
        return None


def _end(span: Span, error: BaseException | None) -> None:
    try:
        if error is not None:
            from opentelemetry.trace import Status, StatusCode

            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, repr(error)[:200]))
        span.end()
    except Exception as exc:
        log.debug("span not ended", error=repr(exc))


class Batch:
    """One batch's continued traces: each incoming message's context under the id of what it
    carried, and (when recording) the spans that continue them, ended with the batch."""

    def __init__(self, name: str, publishes: bool) -> None:
        self._name = name
        self._publishes = publishes
        self._out: dict[str, dict[str, str]] = {}
        self._spans: list[Span] = []

    def carry(self, cause: str, headers: Mapping[str, str] | None, **attributes: Any) -> None:
        """Continue the trace of a message (``headers``) carrying ``cause`` (an observation or event
        id): the events caused by it carry the trace on. Malformed headers are ignored."""
        if not self._publishes and _tracer is None:
            return  # nothing to pass on, nothing recorded
        incoming = carried(headers)
        if not incoming:
            return
        span = _start(self._name, incoming, "CONSUMER", attributes)
        if span is not None:
            self._spans.append(span)
        self._out[cause] = incoming if span is None else _headers(span)

    def headers_for(self, event: Event) -> Mapping[str, str]:
        """The trace headers of an event this batch publishes (empty when its cause had none)."""
        return self._out.get(event.causation_id or "", {}) if self._out else {}

    def end(self, error: BaseException | None = None) -> None:
        """End the batch's spans (with ``error`` recorded on each, when it failed)."""
        spans, self._spans = self._spans, []
        for span in spans:
            _end(span, error)


@contextmanager
def batch(name: str, *, publishes: bool = True) -> Iterator[Batch]:
    """The traces a worker continues while it handles one batch; events published meanwhile (by
    :class:`noema.adapters.jetstream.EventPublisher`) carry them on. A worker that ``publishes``
    nothing (the projector) only records its spans, when recording."""
    current = Batch(name, publishes)
    token = _current.set(current)
    try:
        yield current
    except BaseException as exc:
        current.end(exc)
        raise
    else:
        current.end()
    finally:
        _current.reset(token)


def outgoing(event: Event) -> Mapping[str, str]:
    """The trace headers to publish ``event`` with: its cause's, in the batch being handled; else
    the request's being served (an operator's retraction through the API, a fact through the agent
    service); else none."""
    current = _current.get()
    return current.headers_for(event) if current is not None else current_span_headers()


@contextmanager
def serving(headers: Mapping[str, str] | None, name: str, **attributes: Any) -> Iterator[None]:
    """Serve a request (an HTTP or NATS service request) inside its caller's trace: the observations
    it publishes continue it (:func:`noema_sdk.tracing.trace_headers`), under a server span when
    recording. Without a valid ``traceparent`` the request is served as it is."""
    incoming = carried(headers)
    if not incoming:
        yield
        return
    from opentelemetry import context as otel_context
    from opentelemetry.trace import set_span_in_context

    span = _start(name, incoming, "SERVER", attributes)
    token = otel_context.attach(_context(incoming) if span is None else set_span_in_context(span))
    error: BaseException | None = None
    try:
        yield
    except BaseException as exc:
        error = exc
        raise
    finally:
        otel_context.detach(token)
        if span is not None:
            _end(span, error)
