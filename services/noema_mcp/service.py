"""Composition root of the MCP server: the application layer for located settings, the server bound
to one caller, and a transport (stdio, or streamable HTTP under ``/mcp``, optionally behind a bearer
token)."""

from __future__ import annotations

import hmac
import ipaddress
from typing import Any, Literal

import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

from noema.adapters.asgi import BodyLimit, JsonBodies, MetricsEndpoint, RequestLog, problem_response
from noema.application.access import Caller
from noema.application.facade import Noema
from noema.errors import Kind
from noema.runtime.metrics import Metrics
from noema.runtime.settings import Located

from . import DEFAULT_PORT, HTTP_PATH
from .server import build_server

__all__ = ["BearerToken", "Transport", "http_app", "is_loopback", "serve"]

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


def http_app(
    server: Server[Any], host: str, token: str | None = None, metrics: Metrics | None = None
) -> ASGIApp:
    """The streamable HTTP ASGI app (stateful sessions; DNS-rebinding protection on loopback hosts),
    behind :class:`BearerToken` when ``token`` is given. Request bodies above 1 MiB are refused (413)
    before they are read (the SDK would buffer any size), and bodies that are not JSON with 415;
    without the token none is read at all. With ``metrics``, ``GET /metrics`` serves them (no token)
    and every request is logged and counted (:class:`~noema.adapters.asgi.RequestLog`)."""
    app: Starlette = server.streamable_http_app(streamable_http_path=HTTP_PATH, host=host)
    limited = JsonBodies(BodyLimit(app))
    guarded: ASGIApp = BearerToken(limited, token) if token else limited
    if metrics is None:
        return guarded
    return RequestLog(MetricsEndpoint(guarded, metrics), metrics, "noema.mcp.access")


async def serve(
    settings: Located,
    caller: Caller,
    transport: Transport = "stdio",
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    token: str | None = None,
) -> None:
    """Serve the agent tools as ``caller`` until stdin closes (stdio) or SIGINT/SIGTERM (http).
    ``settings``: as :func:`noema.runtime.locate.locate` finds them; ``token``: HTTP requests must
    carry it as a bearer token.
    """
    # It acts for one agent: its connections see that agent's workspace only (row-level security).
    async with Noema.open(
        settings, name=f"noema-mcp-{caller.agent}", pool_size=2, workspace=caller.workspace
    ) as app:
        server = build_server(app, caller)
        if transport == "stdio":
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
            return
        config = uvicorn.Config(
            http_app(server, host, token, app.metrics),
            host=host,
            port=port,
            log_level="warning",
            access_log=False,  # RequestLog logs each request in the process's own format
            log_config=None,
        )
        await uvicorn.Server(config).serve()
