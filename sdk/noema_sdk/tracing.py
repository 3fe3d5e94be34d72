"""W3C trace context on the bus: the ``traceparent`` and ``tracestate`` NATS headers of an observation.

Every observation is published with a ``traceparent`` header, so the workers that turn it into a
memory can continue its trace (the server side is ``noema.adapters.tracing``). The publisher's own
trace is used when it has one: the current OpenTelemetry span's context when the application uses
OpenTelemetry, else the ``TRACEPARENT``/``TRACESTATE`` environment variables (a tool run inside a
trace); otherwise the observation starts a new trace of its own.

Nothing here imports OpenTelemetry: it is looked up only when the application has imported it
already (an application without it has no span to continue), so this costs a start-up nothing.

Incoming headers are untrusted: :func:`carried` keeps a well-formed context only, and ignores
anything else (it never raises).
"""

from __future__ import annotations

import os
import random
import re
import sys
from collections.abc import Mapping

__all__ = [
    "TRACEPARENT",
    "TRACESTATE",
    "carried",
    "current_span_headers",
    "new_traceparent",
    "trace_headers",
    "trace_id_of",
]

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"

MAX_HEADER = 512
"""The longest ``traceparent`` or ``tracestate`` read (the W3C limit a propagator must keep); longer
is dropped."""

_PARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_STATE = re.compile(r"[\x20-\x7e]*")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16


def _traceparent(value: object) -> str | None:
    """``value`` as a version-00 ``traceparent`` if it is a valid one (W3C Trace Context: a later
    version is read by its first four fields), else None."""
    if not isinstance(value, str) or len(value) > MAX_HEADER:
        return None
    found = _PARENT.match(value)
    if found is None:
        return None
    version, trace_id, span_id, flags = found.groups()
    if version == "ff" or trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return None
    if len(value) != found.end() and (version == "00" or value[found.end()] != "-"):
        return None
    return f"00-{trace_id}-{span_id}-{flags}"


def carried(headers: Mapping[str, str] | None) -> dict[str, str]:
    """The trace context in ``headers`` safe to carry on: a valid ``traceparent`` (as version 00) and
    its ``tracestate`` (when printable and at most 512 characters); empty when there is none or it is
    malformed. Never raises, whatever ``headers`` holds."""
    if not headers:
        return {}
    try:
        parent = _traceparent(headers.get(TRACEPARENT))
        if parent is None:
            return {}
        found = {TRACEPARENT: parent}
        state = headers.get(TRACESTATE)
        if isinstance(state, str) and 0 < len(state) <= MAX_HEADER and _STATE.fullmatch(state):
            found[TRACESTATE] = state
        return found
    except Exception:  # a hostile mapping (a header object that raises): no trace, never a failure
        return {}


def trace_id_of(headers: Mapping[str, str] | None) -> str | None:
    """The trace id (32 hex digits) of the valid ``traceparent`` in ``headers``, if any."""
    parent = carried(headers).get(TRACEPARENT)
    return parent.split("-")[1] if parent else None


def new_traceparent() -> str:
    """A new trace's ``traceparent``, sampled (the workers that continue it may record it)."""
    trace_id = random.getrandbits(128) or 1
    span_id = random.getrandbits(64) or 1
    return f"00-{trace_id:032x}-{span_id:016x}-01"


def current_span_headers() -> dict[str, str]:
    """The current OpenTelemetry span's context as headers, when the application imported
    OpenTelemetry and a span is current."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return {}
    try:
        context = trace.get_current_span().get_span_context()
        if not context.is_valid:
            return {}
        headers = {
            TRACEPARENT: f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
        }
        state = context.trace_state.to_header()
    except Exception:  # an OpenTelemetry we do not know: publish without its context
        return {}
    if state:
        headers[TRACESTATE] = state
    return carried(headers)


def trace_headers() -> dict[str, str]:
    """The trace headers of an observation published now: the current OpenTelemetry span's
    context, else ``TRACEPARENT``/``TRACESTATE`` from the environment, else a new trace."""
    return (
        current_span_headers()
        or carried(
            {TRACEPARENT: os.environ.get("TRACEPARENT", ""), TRACESTATE: os.environ.get("TRACESTATE", "")}
        )
        or {TRACEPARENT: new_traceparent()}
    )
