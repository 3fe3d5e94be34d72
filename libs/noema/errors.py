"""The one error taxonomy: every failure a surface reports is one :class:`Kind`, and each surface
(HTTP API, MCP server, NATS agent service, ``noemactl``) maps a kind to its own code through
:data:`SURFACES`, the one table (``docs/errors.md`` is generated from it; a test drives one failing
call per kind through every surface and checks the code it answers).

Application code raises a :class:`NoemaError` subclass (``OperationError``, ``NotFound``,
``Conflict``, ``InvalidQuery``, ``InsufficientMemoryPermission``, ``ToolInputError``, …), whose class
names its kind. A server that is not there (a refused connection, a timeout, a lost NATS or
PostgreSQL connection) is ``unavailable``; anything else is ``internal`` — a bug, logged with its
traceback and reported without it.

Over HTTP (the operator API, the MCP server's HTTP transport) an error is an RFC 9457 problem
(:func:`problem`): ``application/problem+json`` with ``type``, ``title``, ``status``, ``detail`` and
the kind as ``code`` — the same word the NATS service's, the MCP tools' and ``noemactl``'s errors
are classified by.
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar

from noema.records import dataclass

__all__ = [
    "KIND_BY_HTTP_STATUS",
    "PROBLEM_JSON",
    "SURFACES",
    "Codes",
    "Conflict",
    "InvalidQuery",
    "Kind",
    "NoemaError",
    "NotFound",
    "OperationError",
    "RateLimited",
    "Unavailable",
    "WorkerFatal",
    "kind_of",
    "markdown_table",
    "problem",
    "public_message",
]


class Kind(StrEnum):
    """What went wrong, as every surface reports it (the value is the wire name)."""

    MALFORMED = "malformed"
    INVALID = "invalid"
    UNAUTHENTICATED = "unauthenticated"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    TOO_LARGE = "too_large"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    RATE_LIMITED = "rate_limited"
    UNAVAILABLE = "unavailable"
    INTERNAL = "internal"


class NoemaError(Exception):
    """Base of the errors Noema raises on purpose; ``kind`` says how every surface reports it, the
    message (shown to users as is) says what to fix."""

    kind: ClassVar[Kind] = Kind.INTERNAL


class Unavailable(NoemaError):
    """A server this operation needs is not reachable (the message says which and what to do)."""

    kind = Kind.UNAVAILABLE


class OperationError(NoemaError, ValueError):
    """The operation cannot be done; the message says why (shown to users as is). Kind ``invalid``
    unless a subclass says otherwise (see :data:`SURFACES`)."""

    kind = Kind.INVALID


class NotFound(OperationError):
    """The target does not exist (in the read model)."""

    kind = Kind.NOT_FOUND


class Conflict(OperationError):
    """The target exists but its current state does not allow the operation."""

    kind = Kind.CONFLICT


class InvalidQuery(OperationError):
    """A read's query or filters are not understood (kind ``malformed``)."""

    kind = Kind.MALFORMED


class RateLimited(NoemaError):
    """The caller is over its rate or concurrency limit (:mod:`noema.domain.admission`); the
    message names the limit, ``retry_after`` says in how many whole seconds to try again."""

    kind = Kind.RATE_LIMITED

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class WorkerFatal(RuntimeError):
    """The worker cannot go on in this process (e.g. its consumer skipped messages); a restart resumes."""


@dataclass(frozen=True)
class Codes:
    """How one kind is reported on each surface (``None``: that surface never reports it)."""

    title: str
    """The problem's title over HTTP: the same for every failure of the kind (RFC 9457)."""
    meaning: str
    """When a failure is of this kind."""
    http: int
    """HTTP status; the body is the kind's :func:`problem`."""
    nats: int | None
    """The NATS service's error code (``Nats-Service-Error-Code`` header and the reply body)."""
    mcp: int
    """JSON-RPC error code of a failed MCP request (resource reads); a failed tool call is a tool
    result with ``isError`` whose text starts with ``<kind>:``."""
    cli: int | None
    """``noemactl`` exit status; the message is on stderr (a JSON object under ``--json``)."""
    http_only_mcp: bool = False
    """Only the MCP server's HTTP transport reports it, with the HTTP status (no tool result)."""


# JSON-RPC 2.0 codes (MCP uses -32602 for bad params, -32002 for an unknown resource).
_INVALID_PARAMS = -32602
_INTERNAL_ERROR = -32603
_RESOURCE_NOT_FOUND = -32002
_SERVER_ERROR = -32000

SURFACES: dict[Kind, Codes] = {
    Kind.MALFORMED: Codes(
        "Malformed request",
        "the request cannot be read (not JSON, unknown or repeated parameter, query not understood)",
        http=400,
        nats=400,
        mcp=_INVALID_PARAMS,
        cli=2,
    ),
    Kind.INVALID: Codes(
        "Invalid request",
        "the request is read but breaks a rule (range, blank text, unknown name, bad date)",
        http=422,
        nats=422,
        mcp=_INVALID_PARAMS,
        cli=2,
    ),
    Kind.UNAUTHENTICATED: Codes(
        "Not authenticated",
        "no credentials, or wrong ones",
        http=401,
        nats=None,
        mcp=401,
        cli=None,
        http_only_mcp=True,
    ),
    Kind.FORBIDDEN: Codes(
        "Forbidden",
        "the caller may not do this (grant, token's workspace, private notes)",
        http=403,
        nats=403,
        mcp=_SERVER_ERROR,
        cli=3,
    ),
    Kind.NOT_FOUND: Codes(
        "Not found",
        "what the request names does not exist",
        http=404,
        nats=404,
        mcp=_RESOURCE_NOT_FOUND,
        cli=4,
    ),
    Kind.CONFLICT: Codes(
        "Conflict with the current state",
        "it exists but its state does not allow the operation",
        http=409,
        nats=409,
        mcp=_SERVER_ERROR,
        cli=5,
    ),
    Kind.TOO_LARGE: Codes(
        "Request body too large",
        "the body is larger than the surface accepts",
        http=413,
        nats=None,
        mcp=413,
        cli=None,
        http_only_mcp=True,
    ),
    Kind.UNSUPPORTED_MEDIA_TYPE: Codes(
        "Unsupported media type",
        "the body is not JSON by its Content-Type (send application/json)",
        http=415,
        nats=None,
        mcp=415,
        cli=None,
        http_only_mcp=True,
    ),
    Kind.RATE_LIMITED: Codes(
        "Too many requests",
        "the caller is over its rate or concurrency limit; retry after the time given (Retry-After)",
        http=429,
        nats=429,
        mcp=_SERVER_ERROR,
        cli=None,
    ),
    Kind.UNAVAILABLE: Codes(
        "Service unavailable",
        "NATS, PostgreSQL or the running instance is not there; retry later",
        http=503,
        nats=503,
        mcp=_SERVER_ERROR,
        cli=6,
    ),
    Kind.INTERNAL: Codes(
        "Internal error",
        "a bug: logged with its traceback, reported without it",
        http=500,
        nats=500,
        mcp=_INTERNAL_ERROR,
        cli=1,
    ),
}
"""Every kind's code on every surface: the one mapping each surface uses."""

KIND_BY_HTTP_STATUS: dict[int, Kind] = {codes.http: kind for kind, codes in SURFACES.items()}
"""The inverse of the HTTP column (the kind of a status Starlette itself answers, e.g. 404)."""


_DRIVERS_UNAVAILABLE = frozenset(
    {
        "nats.Error",
        "asyncpg.InterfaceError",
        "asyncpg.PostgresConnectionError",
        "asyncpg.OperatorInterventionError",
        "asyncpg.InsufficientResourcesError",
    }
)
"""The drivers' exceptions (and their subclasses) that mean a server is not there, by package and class
name: this module sits below the adapters and imports no driver. The same classes as
:data:`noema.adapters.errors.BACKEND_UNAVAILABLE` (a test holds the two together)."""


def kind_of(exc: BaseException) -> Kind:
    """The kind of any exception: a :class:`NoemaError`'s own, ``invalid`` for bytes refused by the
    bounded decoding (:class:`noema_events.Undecodable`), ``unavailable`` for a server that is not
    there, ``internal`` (a bug) for everything else."""
    if isinstance(exc, NoemaError):
        return exc.kind
    from noema_events.bounded import Undecodable

    if isinstance(exc, Undecodable):
        return Kind.INVALID
    if isinstance(exc, (OSError, TimeoutError)) or any(
        f"{cls.__module__.partition('.')[0]}.{cls.__qualname__}" in _DRIVERS_UNAVAILABLE
        for cls in type(exc).__mro__
    ):
        return Kind.UNAVAILABLE
    return Kind.INTERNAL


def public_message(exc: BaseException, kind: Kind | None = None) -> str:
    """What a surface tells the caller about ``exc``: a :class:`NoemaError`'s own message; for a
    server that is not there, which kind of failure it was (a driver's text may name hosts); for a
    bug nothing but that it is one (the surface logs the traceback)."""
    kind = kind or kind_of(exc)
    if isinstance(exc, NoemaError) or kind is Kind.INVALID:
        return str(exc)
    if kind is Kind.UNAVAILABLE:
        return f"a server Noema needs is unavailable ({type(exc).__name__}); retry later"
    return "internal error"


PROBLEM_JSON = "application/problem+json"
"""The media type of every HTTP error body (RFC 9457)."""


def problem(kind: Kind, detail: str, status: int | None = None) -> dict[str, str | int]:
    """The RFC 9457 problem details of a failure of ``kind``: ``type`` (a URN per kind, stable),
    ``title`` (the kind's, the same every time), ``status``, ``detail`` (this failure's message,
    saying what to fix) and ``code`` (the kind). ``error`` repeats ``detail`` for clients written
    before problem details (the body was ``{"error": message, "code": kind}``). ``status``: when
    the HTTP layer answers with another status than the kind's (a 405 is ``malformed``)."""
    codes = SURFACES[kind]
    return {
        "type": f"urn:noema:error:{kind}",
        "title": codes.title,
        "status": status or codes.http,
        "detail": detail,
        "code": str(kind),
        "error": detail,
    }


def markdown_table() -> str:
    """The table of ``docs/errors.md``: kind, meaning and each surface's code (``—``: that surface
    never reports the kind)."""
    lines = [
        "| kind | meaning | HTTP status | NATS service code | MCP tool call | MCP request (JSON-RPC) "
        "| `noemactl` exit |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind, c in SURFACES.items():
        tool, rpc = (
            (f"HTTP {c.mcp}", f"HTTP {c.mcp}") if c.http_only_mcp else (f"`isError`, `{kind}: …`", str(c.mcp))
        )
        nats = "—" if c.nats is None else str(c.nats)
        cli = "—" if c.cli is None else str(c.cli)
        lines.append(f"| `{kind}` | {c.meaning} | {c.http} | {nats} | {tool} | {rpc} | {cli} |")
    return "\n".join(lines) + "\n"
