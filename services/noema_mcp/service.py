"""Composition root of the MCP server: the application layer for located settings, the server bound
to one caller, and a transport (stdio, or streamable HTTP under ``/mcp``)."""

from __future__ import annotations

from typing import Any, Literal

import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from starlette.applications import Starlette

from noema.access import Caller
from noema.app import Noema
from noema.settings import Settings

from . import DEFAULT_PORT, HTTP_PATH
from .server import build_server

__all__ = ["Transport", "http_app", "serve"]

Transport = Literal["stdio", "http"]


def http_app(server: Server[Any], host: str) -> Starlette:
    """The streamable HTTP ASGI app (stateful sessions; DNS-rebinding protection on loopback hosts)."""
    return server.streamable_http_app(streamable_http_path=HTTP_PATH, host=host)


async def serve(
    settings: Settings,
    caller: Caller,
    transport: Transport = "stdio",
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
) -> None:
    """Serve the agent tools as ``caller`` until stdin closes (stdio) or SIGINT/SIGTERM (http).
    ``settings`` must be located (see :func:`noema.runtime.locate`).
    """
    async with Noema.open(settings, name=f"noema-mcp-{caller.agent}", pool_size=2) as app:
        server = build_server(app, caller)
        if transport == "stdio":
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
            return
        config = uvicorn.Config(
            http_app(server, host), host=host, port=port, log_level="warning", access_log=False
        )
        await uvicorn.Server(config).serve()
