"""Composition root of the MCP server: the connection to the running Noema (opened on first use),
the server bound to one caller, and a transport (stdio, or streamable HTTP under ``/mcp``, optionally
behind a bearer token, with ``/healthz`` and ``/readyz`` beside it)."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
from typing import Any, Literal

import structlog
import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from noema.adapters import tracing
from noema.adapters.asgi import (
    KEEP_ALIVE_S,
    BodyLimit,
    JsonBodies,
    MetricsEndpoint,
    RequestLog,
    problem_response,
)
from noema.adapters.metrics import Metrics
from noema.application.access import Caller
from noema.composition.instance import Instance
from noema.errors import PROBLEM_JSON, SURFACES, Kind, kind_of, problem, public_message
from noema.runtime.locate import locate
from noema.runtime.settings import Settings

from . import DEFAULT_PORT, HEALTH_PATHS, HTTP_PATH
from .server import build_server

__all__ = ["BearerToken", "Connection", "Transport", "http_app", "is_loopback", "serve"]

_log = structlog.get_logger("noema.mcp")
IDENTITY = "mcp"
"""The Noema process identity the server connects to the embedded NATS as (docs/security.md)."""

Transport = Literal["stdio", "http"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve to anything


class BearerToken:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``, else 401.

    The server acts as one agent, so whoever reaches it is that agent: the token is what keeps a
    listener on a shared network from being anyone's memory. Compared in constant time.
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                await problem_response(
                    send,
                    Kind.UNAUTHENTICATED,
                    "missing or wrong bearer token (send Authorization: Bearer <NOEMA_MCP_TOKEN>)",
                    [(b"www-authenticate", b'Bearer realm="noema-mcp"')],
                )
                return
        await self._app(scope, receive, send)


class Connection:
    """The running Noema the server acts on, opened on first use and again after a failure.

    A host starts its MCP server when it likes — before ``noemactl up``, or while Noema restarts —
    and shows nothing of a server that exits. So the server always starts: until Noema is found
    (:func:`~noema.runtime.locate.locate`, from any working directory), each tool call answers
    ``unavailable: no running Noema found in … — start it with `noemactl up` …``, and the next call
    looks again.
    """

    def __init__(self, settings: Settings, caller: Caller, metrics: Metrics) -> None:
        self._settings = settings
        self._caller = caller
        self._metrics = metrics
        self._stack = contextlib.AsyncExitStack()
        self._lock = asyncio.Lock()
        self._app: Instance | None = None

    async def __call__(self) -> Instance:
        """The application layer (connecting first if need be; raises what stops it)."""
        async with self._lock:
            if self._app is None:
                located = locate(self._settings, IDENTITY)
                # It acts for one agent: its connections see that agent's workspace only (row-level
                # security).
                self._app = await self._stack.enter_async_context(
                    Instance.open(
                        located,
                        name=f"noema-mcp-{self._caller.agent}",
                        pool_size=2,
                        workspace=self._caller.workspace,
                        metrics=self._metrics,
                    )
                )
                _log.info("connected to noema", data_dir=str(located.data_dir), agent=self._caller.agent)
            return self._app

    async def ready(self) -> str | None:
        """None when Noema is reachable, else why not."""
        try:
            app = await self()
        except Exception as exc:
            return public_message(exc, kind_of(exc))
        return None if app.nc.is_connected else "NATS is disconnected (reconnecting)"

    async def warm_up(self) -> None:
        """Connect now, so that the first call does not wait; say on stderr when Noema is not found."""
        if (problem := await self.ready()) is not None:
            _log.warning("noema not reachable yet; tool calls say so until it is", reason=problem)

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()


_WELL_KNOWN = "/.well-known/"


def _public_routes(connection: Connection) -> Starlette:
    """What answers without the token: health, readiness, and 404 for OAuth discovery."""

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        reason = await connection.ready()
        if reason is None:
            return JSONResponse({"status": "ready"})
        kind = Kind.UNAVAILABLE
        return JSONResponse(problem(kind, reason), SURFACES[kind].http, media_type=PROBLEM_JSON)

    async def no_oauth(request: Request) -> Response:
        # A 401 here would make hosts (Claude Code, the MCP Inspector) report a failed OAuth flow
        # instead of a wrong token: there is no OAuth, only the static bearer token.
        detail = "no OAuth metadata: this server takes a static bearer token (Authorization: Bearer <token>)"
        return JSONResponse(problem(Kind.NOT_FOUND, detail), 404, media_type=PROBLEM_JSON)

    return Starlette(
        routes=[
            *(
                Route(p, e, methods=["GET", "HEAD"])
                for p, e in zip(HEALTH_PATHS, (healthz, readyz), strict=True)
            ),
            Route(_WELL_KNOWN + "{rest:path}", no_oauth, methods=["GET", "HEAD"]),
        ]
    )


class PublicPaths:
    """ASGI middleware: ``/healthz``, ``/readyz`` and ``/.well-known/…`` go to ``public`` (no token
    asked), everything else to ``app``."""

    def __init__(self, app: ASGIApp, public: ASGIApp) -> None:
        self._app = app
        self._public = public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        public = path in HEALTH_PATHS or path.startswith(_WELL_KNOWN)
        await (self._public if public else self._app)(scope, receive, send)


def http_app(
    server: Server[Any],
    host: str,
    token: str | None = None,
    metrics: Metrics | None = None,
    connection: Connection | None = None,
) -> ASGIApp:
    """The streamable HTTP ASGI app (stateful sessions; DNS-rebinding protection on loopback hosts),
    behind :class:`BearerToken` when ``token`` is given. Request bodies above 1 MiB are refused (413)
    before they are read (the SDK would buffer any size), and bodies that are not JSON with 415;
    without the token none is read at all. With ``metrics``, ``GET /metrics`` serves them (no token)
    and every request is logged and counted (:class:`~noema.adapters.asgi.RequestLog`). With
    ``connection``, ``GET /healthz`` (the process serves), ``GET /readyz`` (Noema is reachable: 200,
    else 503) and 404 on ``/.well-known/…`` answer without the token."""
    app: Starlette = server.streamable_http_app(streamable_http_path=HTTP_PATH, host=host)
    limited = JsonBodies(BodyLimit(app))
    guarded: ASGIApp = BearerToken(limited, token) if token else limited
    if connection is not None:
        guarded = PublicPaths(guarded, _public_routes(connection))
    if metrics is None:
        return guarded
    return RequestLog(MetricsEndpoint(guarded, metrics), metrics, "noema.mcp.access")


async def serve(
    settings: Settings,
    caller: Caller,
    transport: Transport = "stdio",
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    token: str | None = None,
) -> None:
    """Serve the agent tools as ``caller`` until stdin closes (stdio) or SIGINT/SIGTERM (http).
    ``settings``: located on first use as :func:`noema.runtime.locate.locate` does (Noema need not
    run yet); ``token``: HTTP requests must carry it as a bearer token.
    """
    metrics = Metrics()
    tracing.configure("mcp")  # spans exported only when OTEL_* configures an exporter
    async with Connection(settings, caller, metrics) as connection:
        # The agent's rate and concurrency limits (NOEMA_RATE_LIMIT, ...), as on every surface.
        server = build_server(connection, caller, metrics.admission(settings.admission_limits, "mcp"))
        warming = asyncio.create_task(connection.warm_up())
        try:
            if transport == "stdio":
                async with stdio_server() as (read, write):
                    await server.run(read, write, server.create_initialization_options())
                return
            config = uvicorn.Config(
                http_app(server, host, token, metrics, connection),
                host=host,
                port=port,
                log_level="warning",
                access_log=False,  # RequestLog logs each request in the process's own format
                log_config=None,
                # An idle keep-alive connection stays open 75 s (uvicorn's default is 5): hosts pause
                # between tool calls and would otherwise find it closed under them.
                timeout_keep_alive=KEEP_ALIVE_S,
            )
            await uvicorn.Server(config).serve()
        finally:
            warming.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await warming
