"""Declared endpoints: one table says what each route takes and returns; the app and the OpenAPI
document are both built from it, so they cannot drift apart.

A handler receives its input already checked — the caller authenticated, the query string and the
JSON body decoded into msgspec Structs that forbid unknown fields — and returns a Struct. Anything it
cannot do is an :class:`~noema_api.errors.ApiError` or a :class:`~noema.errors.NoemaError`, answered
with its kind's status (:data:`noema.errors.SURFACES`); a server that is not there is a 503; any
other exception is a bug, logged with its traceback and answered with a plain 500.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import urlencode

import msgspec
import structlog
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from noema.adapters.postgres.tenancy import ALL_WORKSPACES, NO_WORKSPACE, workspace_scope
from noema.adapters.published import recording_published
from noema.application.views import parse
from noema.composition.instance import Instance
from noema.domain.admission import Admission
from noema.errors import PROBLEM_JSON, InvalidQuery, Kind, NotFound, RateLimited, kind_of, public_message
from noema.inputs import InvalidInput, convert
from noema.ports import ExpectingSink
from noema.runtime.wiring import Pool
from noema.stream_points import StreamPoint, parse_stream_point
from noema_events.bounded import OutOfBounds, Undecodable, decode_json

from .auth import Principal, Tokens
from .consistency import (
    AFTER_SEQ,
    AS_OF,
    AS_OF_SEQ_HEADER,
    AS_OF_TIME_HEADER,
    SEQ_HEADER,
    caught_up,
    parse_after_seq,
)
from .errors import ApiError, Problem
from .urls import check_path, query_params

__all__ = ["CURSORS", "Api", "Endpoint", "Req", "error_response", "is_paged", "json_response", "routes"]

log = structlog.get_logger("noema.api")

Q = TypeVar("Q")
B = TypeVar("B")

_encoder = msgspec.json.Encoder()
_PATH_PARAM = re.compile(r"{(\w+)}")


@dataclass(frozen=True)
class Api:
    """What handlers work with: the application layer every surface calls, and the tokens; with
    ``admission``, each token's rate and concurrency limits (:mod:`noema.domain.admission`)."""

    app: Instance
    tokens: Tokens
    admission: Admission | None = None

    @property
    def pool(self) -> Pool:
        """The read model."""
        return self.app.pool

    def clock(self) -> datetime:
        """Now, as the application layer tells it."""
        return self.app.clock()

    def bus(self) -> ExpectingSink:
        """The publisher; while NATS is not connected, writes answer 503 (``unavailable``)."""
        return self.app.writer()


@dataclass(frozen=True)
class Req(Generic[Q, B]):
    """A checked request."""

    api: Api
    principal: Principal
    query: Q
    body: B
    path: Mapping[str, str]


Handler = Callable[[Req[Any, Any]], Awaitable[Any]]


@dataclass(frozen=True)
class Endpoint:
    """One operation: method, path, input and output types, and how it may fail."""

    method: str
    path: str
    handler: Handler
    summary: str
    response: Any
    tag: str
    query: type[msgspec.Struct] | None = None
    body: type[msgspec.Struct] | None = None
    status: int = 200
    errors: tuple[int, ...] = ()
    """Statuses answered with a Problem (401 and 403 are implied unless ``public``)."""
    other: tuple[tuple[int, Any], ...] = ()
    """Other statuses with their own body type."""
    public: bool = False
    description: str = ""

    @property
    def reads_after(self) -> bool:
        """Whether the endpoint takes ``after_seq`` (every authenticated read does)."""
        return self.method == "GET" and not self.public

    @property
    def reads_as_of(self) -> bool:
        """Whether the endpoint takes ``as_of``: every read of memory and knowledge does, and the
        audit questions (the log, why, audit diff: the events stored by then); not the read
        model's position, which is about now."""
        return self.reads_after and (
            self.tag in ("memories", "knowledge")
            or (self.tag == "audit" and self.path != "/v1/replay/status")
        )

    @property
    def path_params(self) -> list[str]:
        """Names of the ``{placeholders}`` in the path."""
        return _PATH_PARAM.findall(self.path)


CURSORS = {"next_offset": "offset", "next_before": "before"}
"""A page's cursor member → the query parameter it is passed back in for the next page."""


def is_paged(response: Any) -> bool:
    """Whether an endpoint's answer is a page with a ``next`` link (filled by :func:`_with_next`)."""
    fields = getattr(response, "__struct_fields__", ())
    return "next" in fields and any(cursor in fields for cursor in CURSORS)


def _with_next(result: Any, request: Request, headers: dict[str, str]) -> Any:
    """A page with its ``next`` link: this request's path and query with the page's cursor in its
    parameter (every other parameter kept, so the next page has the same filters and point), also
    sent as an RFC 8288 ``Link`` header. Unchanged on the last page."""
    if not is_paged(type(result)):
        return result
    found = [(param, getattr(result, cursor)) for cursor, param in CURSORS.items() if hasattr(result, cursor)]
    param, value = found[0]
    if value is None:
        return result
    params = query_params(request.scope.get("query_string", b""))
    params[param] = [str(value)]
    link = f"{request.url.path}?{urlencode([(k, v) for k, values in params.items() for v in values])}"
    headers["Link"] = f'<{link}>; rel="next"'
    return msgspec.structs.replace(result, next=link)


def json_response(data: Any, status: int = 200) -> Response:
    """Encode a Struct (or plain data) as a JSON response."""
    return Response(_encoder.encode(data), status_code=status, media_type="application/json")


def error_response(
    kind: Kind, message: str, headers: Mapping[str, str] | None = None, *, status: int | None = None
) -> Response:
    """``kind``'s status (or ``status``) and problem, ``message`` its detail (and ``headers``)."""
    problem = Problem.of(kind, message, status)
    response = Response(_encoder.encode(problem), status_code=problem.status, media_type=PROBLEM_JSON)
    response.headers.update(headers or {})
    return response


def _clean(value: Any) -> None:
    """Refuse text PostgreSQL cannot store (NUL) or UTF-8 cannot encode (lone surrogates)."""
    if isinstance(value, str):
        if "\x00" in value:
            raise ApiError(Kind.MALFORMED, "text must not contain NUL characters")
        try:
            value.encode()
        except UnicodeEncodeError:
            raise ApiError(Kind.MALFORMED, "text must be valid Unicode (no lone surrogates)") from None
    elif isinstance(value, dict):
        for k, v in value.items():
            _clean(k)
            _clean(v)
    elif isinstance(value, list):
        for v in value:
            _clean(v)


def parse_query(
    request: Request, struct: type[msgspec.Struct] | None, after_seq: bool = False, as_of: bool = False
) -> Any:
    """The query string as ``struct`` (unknown or repeated parameters, malformed escapes and text
    that is not UTF-8 are refused); with ``after_seq`` and ``as_of``, those parameters are left for
    :mod:`noema_api.consistency` and :func:`_past`."""
    params = query_params(request.scope.get("query_string", b""))
    if after_seq:
        params.pop(AFTER_SEQ, None)
    if as_of:
        params.pop(AS_OF, None)
    # The names on the wire (a field may be renamed, e.g. a diff's ``from``).
    unknown = set(params) - set(struct.__struct_encode_fields__ if struct else ())
    if unknown:
        raise ApiError(Kind.MALFORMED, f"unknown query parameters: {', '.join(sorted(unknown))}")
    if struct is None:
        return None
    repeated = sorted(k for k, values in params.items() if len(values) > 1)
    if repeated:
        raise ApiError(Kind.MALFORMED, f"query parameters given more than once: {', '.join(repeated)}")
    raw = {k: values[0] for k, values in params.items()}
    _clean(raw)
    try:
        return parse(struct, raw)  # the one validation of filters, shared with noemactl
    except InvalidQuery as exc:
        raise ApiError(Kind.MALFORMED, f"invalid query parameter: {exc}") from None


async def parse_body(request: Request, struct: type[msgspec.Struct] | None) -> Any:
    """The JSON body as ``struct`` (malformed JSON → 400, schema violation → 422)."""
    if struct is None:
        return None
    data = await request.body()
    if not data.strip():
        raise ApiError(Kind.MALFORMED, "the body is empty: it must be a JSON object")
    try:  # bounded: its size by BodyLimit, its depth here (before the parser and _clean recurse)
        raw = decode_json(data, max_bytes=None, what="the body")
    except OutOfBounds as exc:
        raise ApiError(Kind.INVALID, str(exc)) from None
    except Undecodable as exc:
        raise ApiError(Kind.MALFORMED, f"the body must be a JSON object in UTF-8: {exc}") from None
    _clean(raw)
    try:
        return convert(struct, raw, whole="the body")  # dates read as every surface reads them
    except InvalidInput as exc:
        raise ApiError(Kind.INVALID, f"invalid body: {exc}") from None


def _as_of(request: Request) -> StreamPoint | None:
    """The ``as_of`` query parameter (None when absent)."""
    given = query_params(request.scope.get("query_string", b"")).get(AS_OF)
    if given is None:
        return None
    if len(given) > 1:
        raise ApiError(Kind.MALFORMED, f"query parameters given more than once: {AS_OF}")
    _clean(given[0])
    return parse_stream_point(given[0], AS_OF)


async def _past(api: Api, point: StreamPoint, headers: dict[str, str]) -> Api:
    """The API over the state as of ``point``; ``headers`` get the point it reflects."""
    view = await api.app.as_of(point)
    assert view.point is not None
    headers[AS_OF_SEQ_HEADER] = str(view.point.seq)
    headers[AS_OF_TIME_HEADER] = view.point.time.isoformat()
    return Api(view, api.tokens, api.admission)


def _serve(endpoint: Endpoint, api: Api) -> Callable[[Request], Awaitable[Response]]:
    """The request handler that checks input, calls the endpoint's handler and encodes its answer."""

    async def serve(request: Request) -> Response:
        try:
            principal = (
                Principal("anonymous", None)
                if endpoint.public
                else api.tokens.authenticate(request.headers.get("authorization"))
            )
            admitted = (
                api.admission.admitted(principal.name, time.monotonic())
                if api.admission is not None and not endpoint.public
                else contextlib.nullcontext()
            )
            with admitted:  # a token over its limits is refused before its request is read
                result, headers = await _answer(endpoint, api, request, principal)
        except RateLimited as exc:
            return error_response(Kind.RATE_LIMITED, str(exc), {"Retry-After": str(exc.retry_after)})
        except ApiError as exc:
            return error_response(exc.kind, exc.message, exc.headers)
        except Exception as exc:
            kind = kind_of(exc)
            if kind is Kind.INTERNAL:
                log.exception("request failed", method=request.method, path=request.url.path)
                return error_response(kind, "internal error (logged by the server)")
            return error_response(kind, public_message(exc, kind))
        response = result if isinstance(result, Response) else json_response(result, endpoint.status)
        response.headers.update(headers)
        return response

    return serve


async def _answer(
    endpoint: Endpoint, api: Api, request: Request, principal: Principal
) -> tuple[Any, dict[str, str]]:
    """The handler's answer to an authenticated (and admitted) request, and the headers to send
    with it."""
    check_path(request.scope.get("raw_path") or request.url.path.encode())
    path = dict(request.path_params)
    _clean(path)
    after_seq = (
        parse_after_seq(query_params(request.scope.get("query_string", b"")))
        if endpoint.reads_after
        else None
    )
    as_of = _as_of(request) if endpoint.reads_as_of else None
    query = parse_query(request, endpoint.query, endpoint.reads_after, endpoint.reads_as_of)
    body = await parse_body(request, endpoint.body)
    # Row-level security sees what the token may: its workspace, every one for an
    # all-workspace token, none for a public endpoint (defence in depth under the checks).
    with (
        workspace_scope(NO_WORKSPACE if endpoint.public else (principal.workspace or ALL_WORKSPACES)),
        recording_published() as published,
    ):
        headers = await caught_up(api.pool, after_seq) if after_seq is not None else {}
        past = api if as_of is None else await _past(api, as_of, headers)
        result = _with_next(await endpoint.handler(Req(past, principal, query, body, path)), request, headers)
    if published.seq:
        headers[SEQ_HEADER] = str(published.seq)
    return result, headers


def routes(endpoints: Sequence[Endpoint], api: Api) -> list[Route]:
    """One Starlette route per path, answering every method the path has: a wrong method is then a
    405 whose ``Allow`` lists them all (with a route per endpoint, Starlette names only the first
    route's methods). Routes keep the table's order, which decides between overlapping paths."""
    by_path: dict[str, dict[str, Callable[[Request], Awaitable[Response]]]] = {}
    for e in endpoints:
        by_path.setdefault(e.path, {})[e.method] = _serve(e, api)
    return [_route(path, handlers) for path, handlers in by_path.items()]


def _route(path: str, handlers: Mapping[str, Callable[[Request], Awaitable[Response]]]) -> Route:
    async def dispatch(request: Request) -> Response:
        # Starlette routes only the methods given here, and HEAD with GET.
        return await handlers["GET" if request.method == "HEAD" else request.method](request)

    return Route(path, dispatch, methods=list(handlers))


async def scoped_memory_id(req: Req[Any, Any]) -> str:
    """The full id the path's ``memory_id`` names (an id or a unique prefix of one), looked for in
    the token's workspace only. The full id of another workspace's memory is refused (403); a prefix
    is never looked up elsewhere, so probing by prefix learns nothing of other workspaces."""
    given = req.path["memory_id"]
    try:
        return await req.api.app.resolve_memory(given, req.principal.workspace)
    except NotFound:
        if req.principal.workspace is not None:
            # The one look beyond the token's workspace: which workspace a full id belongs to, so
            # that the answer is 403 (not 404) for another workspace's memory.
            with workspace_scope(ALL_WORKSPACES):
                elsewhere = await req.api.app.memories.workspace_of("memories", given)
            if elsewhere is not None:
                req.principal.check(elsewhere)
        raise
