"""The MCP server over the agent tools of :mod:`noema.application.tools`: every tool with its description and
typed input schema, and the dispatch preamble as a resource.

The server is bound to one calling agent (:class:`~noema.application.access.Caller`), fixed when it is built
from the server's configuration: no tool argument names an agent (tool inputs forbid unknown
fields), so a client cannot act as anyone else. Each call goes through
:func:`noema.application.tools.call_tool`, the same path as every other agent surface.

Every failure is mapped once, by its :class:`~noema.errors.Kind` (docs/errors.md): a tool call that
fails is a tool result with ``isError`` whose text is ``<kind>: <message>`` for the model to read, the
kind also in ``_meta["noema/code"]`` and no structured content (which clients check against the
tool's output schema) — Noema not running included, so that the host shows why; a resource read
that fails is a JSON-RPC error with the kind's code, and so is a call of a tool that does not exist
(``-32602``, invalid params, as the MCP specification says). An unexpected failure (``internal``) is
logged with its traceback on stderr and reported without it, as the SDK's own ``MCPServer`` does.

The application layer comes from a *provider*, asked on every request: the composition root's
opens the running Noema on first use (:class:`noema_mcp.service.Connection`).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

import msgspec
import structlog
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from noema.application.access import Caller
from noema.application.tools import TOOLS, Tool, call_tool, input_schema, output_schema
from noema.composition.instance import Instance
from noema.domain.admission import Admission
from noema.errors import SURFACES, Kind, RateLimited, kind_of, public_message

__all__ = ["ERROR_CODE_META", "PREAMBLE_URI", "Provider", "build_server", "preamble_uri", "tool_definitions"]

Provider = Callable[[], Awaitable[Instance]]
"""Gives the application layer to run a request on (raises when Noema cannot be reached)."""

PREAMBLE_URI = "noema://preamble"
"""The dispatch preamble without a task (policies and notes); ``PREAMBLE_URI/{task}`` adds the facts
matching a task, ``?repo=<slug>`` ranks that repository's memory first and ``?as_of=<point>`` gives
the preamble as of a past point."""

ERROR_CODE_META = "noema/code"
"""The ``_meta`` key of a failed tool call's result that holds its kind (``invalid``, ``unavailable``…)."""

_MARKDOWN = "text/markdown"
_PREAMBLE = types.Resource(
    uri=PREAMBLE_URI,
    name="preamble",
    title="Dispatch preamble",
    description="Your active policies and private notes, as given at dispatch.",
    mime_type=_MARKDOWN,
)
_PREAMBLE_FOR_TASK = types.ResourceTemplate(
    uri_template=PREAMBLE_URI + "/{task}",
    name="preamble-for-task",
    title="Dispatch preamble for a task",
    description="Policies, your notes and up to five facts matching the task (percent-encoded; add "
    "?repo=<slug> to rank a repository's memory first, ?as_of=<seq or zoned time> for the preamble "
    "given at that past point).",
    mime_type=_MARKDOWN,
)
_log = structlog.get_logger("noema.mcp")


def preamble_uri(task: str = "", repo: str | None = None) -> str:
    """The resource URI of the preamble for ``task`` (percent-encoded), optionally for a repo."""
    uri = f"{PREAMBLE_URI}/{quote(task, safe='')}" if task else PREAMBLE_URI
    return f"{uri}?repo={quote(repo, safe='')}" if repo else uri


def _definition(tool: Tool) -> types.Tool:
    return types.Tool(
        name=tool.name,
        title=tool.name.replace("_", " ").capitalize(),
        description=tool.description,
        input_schema=input_schema(tool),
        output_schema=output_schema(tool),
        annotations=types.ToolAnnotations(
            read_only_hint=not tool.mutates,
            destructive_hint=False,  # nothing is deleted: superseded and archived records stay
            open_world_hint=False,
        ),
    )


def tool_definitions() -> list[types.Tool]:
    """Every agent tool as the MCP ``tools/list`` describes it."""
    return [_definition(tool) for tool in TOOLS.values()]


def _result(data: Any) -> types.CallToolResult:
    # Structured content is restricted to a JSON object before protocol 2026-07-28.
    structured = data if isinstance(data, dict) else {"result": data}
    text = msgspec.json.encode(data).decode()
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=structured)


def _error(kind: Kind, message: str, **more: Any) -> types.CallToolResult:
    # No structured content: a client checks whatever a result carries against the tool's output
    # schema (the TypeScript SDK's does so even on an error, and throws -32602 instead of showing the
    # message), and the specification leaves an error result's structured content undefined. The kind
    # stays machine-readable in ``_meta``, under Noema's own key.
    return types.CallToolResult(
        content=[types.TextContent(text=f"{kind}: {message}")],
        is_error=True,
        # More about the failure (a refusal's retry_after) beside the kind, under Noema's key too.
        _meta={ERROR_CODE_META: str(kind), **{f"noema/{k}": v for k, v in more.items()}},
    )


def _failure(exc: Exception, caller: Caller, what: str) -> tuple[Kind, str]:
    """The kind and message of a failed call (a bug is logged here with its traceback)."""
    kind = kind_of(exc)
    if kind is Kind.INTERNAL:
        _log.exception("tool crashed", tool=what, agent=caller.agent, workspace=caller.workspace)
        return kind, f"error executing {what} (the server log has the details)"
    return kind, public_message(exc, kind)


def _given(app: Instance) -> Provider:
    async def provide() -> Instance:
        return app

    return provide


def _instructions(caller: Caller) -> str:
    return (
        f"Noema memory for agent {caller.agent!r} (role {caller.role!r}) in workspace "
        f"{caller.workspace!r}. Start a task with get_preamble (or read {PREAMBLE_URI}/<task>): it "
        "carries the active policies, your private notes and matching facts. search_memory recalls; "
        "propose_fact / propose_policy record knowledge; record_observation and update_my_notes keep "
        "your own context; why tells how a memory or fact came to be what it is. Your identity "
        "comes from this server's configuration, not from arguments."
    )


def build_server(app: Instance | Provider, caller: Caller, admission: Admission | None = None) -> Server[Any]:
    """An MCP server running every agent tool as ``caller`` against ``app`` (or the application
    layer a provider gives for each request). With ``admission``, a tool call or resource read over
    the caller's rate or concurrency limit is refused at once: a tool result with ``isError``,
    ``rate_limited: …``, and ``noema/retry_after`` (seconds) in its ``_meta``."""
    provider = app if callable(app) else _given(app)
    key = f"{caller.workspace}/{caller.agent}"

    def admitted() -> contextlib.AbstractContextManager[None]:
        if admission is None:
            return contextlib.nullcontext()
        return admission.admitted(key, time.monotonic())

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_definitions())

    async def run_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name not in TOOLS:
            raise MCPError(INVALID_PARAMS, f"unknown tool {params.name!r}; the tools are: {', '.join(TOOLS)}")
        try:
            with admitted():
                return _result(await call_tool(await provider(), caller, params.name, params.arguments or {}))
        except RateLimited as exc:
            return _error(Kind.RATE_LIMITED, str(exc), retry_after=exc.retry_after)
        except Exception as exc:
            return _error(*_failure(exc, caller, params.name))

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[_PREAMBLE])

    async def list_templates(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[_PREAMBLE_FOR_TASK])

    async def read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = urlsplit(params.uri)
        if f"{uri.scheme}://{uri.netloc}" != PREAMBLE_URI:
            raise MCPError(
                SURFACES[Kind.NOT_FOUND].mcp, f"unknown resource {params.uri!r}; see resources/list"
            )
        args: dict[str, Any] = {"task": unquote(uri.path.removeprefix("/"))}
        query = parse_qs(uri.query)
        if repo := query.get("repo"):
            args["repo"] = repo[0]
        if as_of := query.get("as_of"):  # the preamble given at a past point
            args["as_of"] = as_of[0]
        try:
            with admitted():
                preamble = await call_tool(await provider(), caller, "get_preamble", args)
        except Exception as exc:
            kind, message = _failure(exc, caller, "get_preamble")
            raise MCPError(SURFACES[kind].mcp, message) from None
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=params.uri, mime_type=_MARKDOWN, text=preamble["text"])]
        )

    return Server(
        "noema",
        version=importlib.metadata.version("noema"),
        title="Noema memory",
        instructions=_instructions(caller),
        on_list_tools=list_tools,
        on_call_tool=run_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )
