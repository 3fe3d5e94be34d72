"""ASGI middleware shared by Noema's HTTP servers (the operator API and the MCP streamable HTTP
transport): a request body limit, JSON bodies only (:class:`JsonBodies`), and the access log with
request metrics (:class:`RequestLog`). Their refusals are RFC 9457 problems (:func:`problem_response`).

Starlette (and the MCP SDK on top of it) reads a whole request body into memory before looking at
it, with no limit, so any client that reaches the port can make the server hold gigabytes. The limit
is enforced before the application sees the request: a declared ``Content-Length`` above it is
refused without reading a byte of the body, and a body without one (chunked) is read only up to
the limit and then cut off. Either way the answer is a 413 whose problem says the limit.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import structlog

from noema.adapters import tracing
from noema.adapters.metrics import Metrics
from noema.errors import PROBLEM_JSON, SURFACES, Kind, problem
from noema_events.bounded import OutOfBounds, check_bounds

__all__ = [
    "DEFAULT_MAX_BODY",
    "KEEP_ALIVE_S",
    "BodyLimit",
    "JsonBodies",
    "MetricsEndpoint",
    "RequestLog",
    "is_json",
    "problem_response",
]

DEFAULT_MAX_BODY = 1024 * 1024
"""1 MiB: the largest body an operator action or an MCP tool call needs is a few tens of KB
(content is at most 32,000 characters)."""

KEEP_ALIVE_S = 75
"""Seconds an idle keep-alive connection of the HTTP servers (API, MCP) stays open; uvicorn's
default, 5, closes it under a client that pauses between calls."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def _size(limit: int) -> str:
    if limit % (1024 * 1024) == 0:
        return f"{limit // (1024 * 1024)} MiB"
    if limit % 1024 == 0:
        return f"{limit // 1024} KiB"
    return f"{limit} bytes"


class BodyLimit:
    """Refuse (413) any HTTP request whose body is larger than ``max_bytes``, and (422) one nested
    deeper than the bounded decoding allows (:mod:`noema_events.bounded`), whichever route it is for.

    The body is read here, up to the limit, and handed to ``app`` in one message: the application
    never waits on a body that will be refused, and memory per request is bounded by the limit.
    ``setting`` names what configures the limit, for the message (e.g. ``NOEMA_API_MAX_BODY``).
    """

    def __init__(self, app: App, max_bytes: int = DEFAULT_MAX_BODY, setting: str | None = None) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be positive, not {max_bytes}")
        self._app = app
        self._max = max_bytes
        how = f" (set by {setting})" if setting else ""
        self._message = (
            f"the request body is larger than the limit of {max_bytes} bytes ({_size(max_bytes)}){how}; "
            "send a smaller body"
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self._max:
            await self._refuse(send)  # before reading: the client may not even have sent it yet
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before its body was complete: nobody to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self._max:
                await self._refuse(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        try:  # every body is JSON (JsonBodies): none nested deeper than any decoder may recurse
            check_bounds(body, max_bytes=None, what="the body")
        except OutOfBounds as exc:
            await problem_response(send, Kind.INVALID, str(exc))
            return
        await self._app(scope, _replay(body, receive), send)

    async def _refuse(self, send: Send) -> None:
        # The rest of the body is never read: the connection cannot carry another request.
        await problem_response(send, Kind.TOO_LARGE, self._message, [(b"connection", b"close")])


async def problem_response(
    send: Send, kind: Kind, detail: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """Answer with ``kind``'s status and its RFC 9457 problem (``application/problem+json``)."""
    body = json.dumps(problem(kind, detail)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": SURFACES[kind].http,
            "headers": [
                (b"content-type", PROBLEM_JSON.encode()),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, wanted: bytes) -> str | None:
    for name, value in scope.get("headers", []):
        if name.lower() == wanted:
            return str(value.decode("latin-1"))
    return None


def _content_length(scope: Scope) -> int | None:
    text = (_header(scope, b"content-length") or "").strip()
    return int(text) if text.isdigit() else None  # the server refuses a malformed one itself


def is_json(content_type: str) -> bool:
    """Whether a ``Content-Type`` names JSON: ``application/json`` or a ``+json`` type, any parameters."""
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


class JsonBodies:
    """Refuse (415) a request that carries a body labelled as anything but JSON, before reading it.

    Every body Noema's HTTP servers take is JSON: a form or ``text/plain`` body would otherwise be
    read, fail to decode, and be answered 400 as if it were broken JSON. A body without a
    ``Content-Type`` is taken as JSON, as it always was.
    """

    def __init__(self, app: App) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            content_type = _header(scope, b"content-type")
            has_body = bool(_content_length(scope)) or _header(scope, b"transfer-encoding") is not None
            if has_body and content_type is not None and not is_json(content_type):
                detail = (
                    f"the body is {content_type.partition(';')[0].strip() or 'untyped'}: send JSON, "
                    "with Content-Type: application/json"
                )
                await problem_response(send, Kind.UNSUPPORTED_MEDIA_TYPE, detail)
                return
        await self._app(scope, receive, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that first gives the whole body, then whatever the server sends next (a
    disconnect, which streaming responses wait for)."""
    pending = True

    async def replay() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


UNMATCHED = "unmatched"
"""The route label of a request no route matched: labelled by path, every scanner's guess would be
a new time series."""


def _trace_headers(scope: Scope) -> dict[str, str]:
    """The request's ``traceparent`` and ``tracestate`` headers (validated by the tracing module)."""
    found = {}
    for name, value in scope.get("headers", []):
        if name in (b"traceparent", b"tracestate"):
            found[name.decode("latin-1")] = value.decode("latin-1")
    return found


class RequestLog:
    """Log one line per HTTP request (through structlog, so in the process's one log format) and
    count it into ``metrics`` by method, route template (``/v1/memories/{memory_id}``, never the
    path itself: ids would make unbounded series) and status.

    The query string is not logged: it carries search text, which may be anything an agent saw.
    """

    def __init__(self, app: App, metrics: Metrics, logger: str = "noema.access") -> None:
        self._app = app
        self._metrics = metrics
        self._log = structlog.get_logger(logger)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the server answers when the app fails before starting a response

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            # The caller's W3C trace context: the observations this request publishes continue it.
            with tracing.serving(_trace_headers(scope), f"noema.api {scope.get('method', '')}"):
                await self._app(scope, receive, sending)
        finally:
            seconds = time.perf_counter() - started
            route = getattr(scope.get("route"), "path", None) or UNMATCHED
            method = str(scope.get("method", ""))
            self._metrics.http_requests.labels(method, route, str(status)).inc()
            self._metrics.http_seconds.labels(method, route).observe(seconds)
            client = scope.get("client")
            self._log.info(
                "request",
                method=method,
                path=scope.get("path", ""),
                route=route,
                status=status,
                duration_ms=round(seconds * 1000, 2),
                client=client[0] if client else None,
            )


class MetricsEndpoint:
    """Answer ``GET /metrics`` with ``metrics`` (Prometheus text, or OpenMetrics when asked), before
    ``app`` sees it: a server whose app has no routes of ours (the MCP SDK's) still exports its
    metrics. No credentials are asked for: the values are counts and durations, never content."""

    def __init__(self, app: App, metrics: Metrics) -> None:
        self._app = app
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope.get("path") != "/metrics"
            or scope.get("method") not in ("GET", "HEAD")
        ):
            await self._app(scope, receive, send)
            return
        body, content_type = self._metrics.exposition(_header(scope, b"accept"))
        headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body if scope["method"] == "GET" else b""})
