"""``noemactl mcp``: the MCP server exposing the agent tools to MCP clients (stdio or streamable HTTP).

The server acts as one agent, fixed by ``--workspace``/``--agent``/``--role`` (or ``NOEMA_WORKSPACE``,
``NOEMA_AGENT``, ``NOEMA_ROLE``); no tool argument can change who is calling.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import typer

from noema_mcp import DEFAULT_PORT, HTTP_PATH

from .common import DataDir, caller, err, fail, fail_for, state, use

__all__ = ["register"]

mcp_app = typer.Typer(help="The MCP server: the agent tools for MCP clients.", no_args_is_help=True)


@mcp_app.command("serve")
def serve(
    workspace: str = typer.Option(
        ..., "--workspace", "-w", envvar="NOEMA_WORKSPACE", help="Workspace of the calling agent."
    ),
    agent: str = typer.Option(..., "--agent", "-a", envvar="NOEMA_AGENT", help="The calling agent's name."),
    role: str = typer.Option(
        "agent", "--role", "-r", envvar="NOEMA_ROLE", help="The agent's role (its grants apply)."
    ),
    transport: Literal["stdio", "http"] = typer.Option(
        "stdio",
        "--transport",
        "-t",
        envvar="NOEMA_MCP_TRANSPORT",
        help="stdio (spawned by the client) or http (streamable HTTP).",
    ),
    host: str = typer.Option(
        "127.0.0.1", "--host", envvar="NOEMA_MCP_HOST", help="HTTP: address to listen on."
    ),
    port: int = typer.Option(
        DEFAULT_PORT,
        "--port",
        "-p",
        envvar="NOEMA_MCP_PORT",
        min=1,
        max=65535,
        help="HTTP: port to listen on.",
    ),
    token: str | None = typer.Option(
        None,
        "--token",
        envvar="NOEMA_MCP_TOKEN",
        show_envvar=True,
        help="HTTP: require this bearer token (Authorization: Bearer TOKEN) on every request; "
        "needed to listen on a non-loopback address. Prefer the environment variable (a command "
        "line is visible to other users). Not used by stdio.",
    ),
    data_dir: Path | None = DataDir(),
) -> None:
    """Serve the agent tools (search_memory, propose_fact, …, get_preamble) over MCP as one agent.

    With stdio (the default) an MCP client starts this command itself and talks over stdin/stdout;
    with http it listens on http://HOST:PORT/mcp until Ctrl-C, behind a bearer token when
    NOEMA_MCP_TOKEN is set (required for a non-loopback --host: whoever reaches the server acts as
    this agent). It starts even when Noema does not run yet: tool calls then answer that, until
    it does. Given no data folder, it finds the `noemactl up` running in any folder.

    Example: noemactl mcp serve --workspace acme --agent alice --role engineer
    """
    import asyncio  # the event loop: loaded by the command that runs one, not by --help

    from noema_mcp.service import is_loopback
    from noema_mcp.service import serve as serve_mcp

    use(data_dir)
    who = caller(workspace, agent, role)
    if transport == "http":
        if not token and not is_loopback(host):
            fail(
                f"refusing to serve {who.agent}'s memory on {host} without a token: anyone who reaches "
                "it would act as this agent. Set NOEMA_MCP_TOKEN (clients then send "
                "Authorization: Bearer <token>), or listen on 127.0.0.1.",
                2,
            )
        guarded = " (bearer token required)" if token else ""
        err.print(
            f"MCP server for {who.agent} ({who.role}) in {who.workspace} "
            f"on http://{host}:{port}{HTTP_PATH}{guarded}"
        )
    # Not located here: the server starts without Noema running and finds it when a call comes.
    try:
        asyncio.run(serve_mcp(state.settings, who, transport, host=host, port=port, token=token))
    except Exception as exc:
        fail_for(exc)


def register(app: typer.Typer) -> None:
    """Add ``noemactl mcp`` to ``noemactl``."""
    app.add_typer(mcp_app, name="mcp")
