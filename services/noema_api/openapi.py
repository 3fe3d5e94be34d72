"""The OpenAPI 3.1 document of a route table, generated from its endpoints and their msgspec Structs.

``python -m noema_api.routes`` (``make openapi``) writes the API's to ``schemas/openapi.json``; a unit
test fails when the committed file differs from what the code generates.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from noema.errors import PROBLEM_JSON
from noema.ids import ID_PREFIX_MIN

from .consistency import AFTER_SEQ_PARAMETER, AS_OF_HEADERS, AS_OF_PARAMETER, READ_HEADERS, WRITE_HEADERS
from .endpoint import Endpoint, is_paged
from .errors import Problem
from .models import SPACE

__all__ = ["OPENAPI_PATH", "OPERATION_IDS", "build_openapi", "render"]

OPENAPI_PATH = Path(__file__).resolve().parents[2] / "schemas" / "openapi.json"
_REF = "#/components/schemas/{name}"
_REASONS = {
    200: "OK",
    202: "Accepted: the events are stored; the read model shows them once projected",
    400: "Bad request (malformed or unknown parameters)",
    401: "Missing or invalid token",
    403: "The token's workspace does not cover this",
    404: "Not found",
    409: "The target's state does not allow this",
    413: "The body is larger than the server's limit (NOEMA_API_MAX_BODY, default 1 MiB)",
    415: "The body is not JSON by its Content-Type (send application/json)",
    422: "The body does not match the schema, or the operation is not possible",
    429: "The token is over its rate or concurrency limit (NOEMA_RATE_LIMIT, NOEMA_RATE_BURST, "
    "NOEMA_CONCURRENCY_LIMIT); retry after Retry-After seconds",
    503: "A server Noema depends on is unavailable",
}
INFO = {
    "title": "Noema operator API",
    "version": "1",
    "description": "Operate an event-sourced memory workspace: search and inspect memories, enter and "
    "correct knowledge, read the audit log. Every write publishes an `operator.action` event naming the "
    "token's name as actor. Authenticate with `Authorization: Bearer <token>` "
    "(`noemactl api token` prints the local operator token).",
}


OPERATION_IDS: dict[tuple[str, str], str] = {
    ("GET", "/openapi.json"): "getOpenApiDocument",
    ("GET", "/healthz"): "getLiveness",
    ("GET", "/readyz"): "getReadiness",
    ("GET", "/v1/status"): "getStatus",
    ("GET", "/v1/audit"): "listAuditEvents",
    ("GET", "/v1/replay/status"): "getReplayStatus",
    ("GET", "/v1/audit/diff"): "diffAudit",
    ("GET", "/v1/why/{id}"): "explainId",
    ("GET", "/v1/memories/search"): "searchMemories",
    ("GET", "/v1/memories"): "listMemories",
    ("GET", "/v1/timeline"): "listTimeline",
    ("GET", "/v1/memories/{memory_id}"): "getMemory",
    ("GET", "/v1/vocabulary"): "getVocabulary",
    ("GET", "/v1/memories/{memory_id}/neighbourhood"): "getMemoryNeighbourhood",
    ("POST", "/v1/memories"): "createMemory",
    ("POST", "/v1/memories/{memory_id}/retract"): "retractMemory",
    ("POST", "/v1/memories/{memory_id}/archive"): "archiveMemory",
    ("POST", "/v1/memories/{memory_id}/restore"): "restoreMemory",
    ("POST", "/v1/memories/{memory_id}/correct"): "correctMemory",
    ("GET", "/v1/facts"): "listFacts",
    ("POST", "/v1/facts"): "proposeFact",
    ("POST", "/v1/facts/{fact_id}/supersede"): "supersedeFact",
    ("GET", "/v1/policies"): "listPolicies",
    ("POST", "/v1/policies"): "proposePolicy",
    ("POST", "/v1/policies/{policy_id}/supersede"): "supersedePolicy",
    ("GET", "/v1/conflicts"): "listConflicts",
    ("GET", "/v1/grants"): "listGrants",
    ("PUT", "/v1/grants"): "setGrant",
    ("PUT", "/v1/access-mode"): "setAccessMode",
    ("GET", "/v1/domains"): "listDomains",
    ("GET", "/v1/working-memory"): "getWorkingMemory",
    ("GET", "/v1/notes"): "getNotes",
    ("GET", "/v1/dead-letters"): "listDeadLetters",
    ("GET", "/v1/dead-letters/{seq}"): "getDeadLetter",
    ("POST", "/v1/dead-letters/{seq}/retry"): "retryDeadLetter",
    ("POST", "/v1/dead-letters/{seq}/drop"): "dropDeadLetter",
    ("POST", "/v1/erasures"): "eraseContent",
}
"""Each operation's ``operationId``: what generated clients name their methods (``listMemories``,
not ``get_v1_memories``); stable, so a client regenerated later keeps its names. A new endpoint
needs one here (building the document fails without it)."""
SERVERS = [
    {
        "url": "http://127.0.0.1:8765",
        "description": "`noemactl up` on this machine (NOEMA_API_HOST, NOEMA_API_PORT)",
    },
]
LICENSE = {"name": "Apache-2.0", "identifier": "Apache-2.0"}


_NEXT_LINK = {
    "description": 'The next page, as the body\'s `next`: `<URL>; rel="next"` (RFC 8288); absent on the '
    "last page.",
    "schema": {"type": "string"},
}

_RETRY_AFTER = {
    "description": "Seconds to wait before the token's next request is admitted (a whole number).",
    "schema": {"type": "integer", "minimum": 1},
}
_CHALLENGE = {
    "description": 'The scheme to authenticate with: `Bearer realm="noema"`, with `error="invalid_token"` '
    "when the token given is wrong.",
    "schema": {"type": "string"},
}


def _json(schema: Any) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _is_struct(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, msgspec.Struct)


def _ref(t: Any) -> dict[str, Any]:
    if _is_struct(t):
        return {"$ref": _REF.format(name=t.__name__)}
    return msgspec.json.schema(t)


_NO_NUL = "^[^\\u0000]*$"
_SPACE = SPACE
_NOT_BLANK = f"^[^\\u0000]*[^{_SPACE}\\u0000][^\\u0000]*$"
_ID = {"type": "string", "pattern": f"^[^{_SPACE}\\u0000/]{{{ID_PREFIX_MIN},200}}$"}
"""A record's id or a unique prefix of it (at least six characters); a shorter prefix is refused."""


_DATES = [
    {"type": "string", "format": "date-time"},
    {"type": "string", "format": "date"},
    {
        "type": "string",
        # Without a zone (taken as UTC). Days past the 28th are left to the other two forms: a
        # pattern cannot tell the length of a month.
        "pattern": "^[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])[Tt ]([01][0-9]|2[0-3]):[0-5][0-9]"
        "(:[0-5][0-9](\\.[0-9]{1,9})?)?$",
    },
]
"""The forms :func:`noema.inputs.convert` reads a date or time in: an RFC 3339 timestamp, a plain
date, or a timestamp without a zone."""


def _as_input(schema: Any) -> Any:
    """An input's JSON Schema with the rules every input obeys (see ``endpoint._clean``) declared:
    text never holds NUL (PostgreSQL cannot store it), so every free-text string says so in its
    pattern; and a date-time is read by :func:`noema.inputs.convert`, which takes an RFC 3339
    timestamp, a plain date or a timestamp without a zone (:data:`_DATES`)."""
    if isinstance(schema, list):
        return [_as_input(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    if schema.get("format") == "date-time":
        rest = {k: v for k, v in schema.items() if k not in ("type", "format")}
        return {**rest, "anyOf": _DATES}
    out = {k: _as_input(v) for k, v in schema.items()}
    if out.get("type") == "string" and "enum" not in out and "format" not in out:
        pattern = out.get("pattern")
        if pattern is None:
            out["pattern"] = _NO_NUL
        elif pattern == "\\S":
            out["pattern"] = _NOT_BLANK
        elif not (pattern.startswith("^") and pattern.endswith("$")):
            # The other patterns are anchored, of a safe alphabet (names, slugs): no NUL already.
            # A new unanchored one must be given its NUL-free form here.
            raise ValueError(f"unanchored input pattern {pattern!r}: declare how it excludes NUL")
    return out


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A query parameter is absent or a value: its schema drops the ``null`` alternative."""
    if schema.get("default", ...) is None:
        schema = {k: v for k, v in schema.items() if k != "default"}
    options = [o for o in schema.get("anyOf", []) if o != {"type": "null"}]
    if len(options) == 1:
        schema = {**{k: v for k, v in schema.items() if k != "anyOf"}, **options[0]}
    return _as_input(schema)  # type: ignore[no-any-return]


_TEXT = {"type": "string", "minLength": 1}
_PATH_SCHEMAS: dict[str, dict[str, Any]] = {"seq": {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}}
"""Path parameters that are not text: a dead letter's stream sequence."""


def _parameters(endpoint: Endpoint, components: dict[str, Any]) -> list[dict[str, Any]]:
    params: list[dict[str, Any]] = [
        {"name": p, "in": "path", "required": True, "schema": _PATH_SCHEMAS.get(p, _ID)}
        for p in endpoint.path_params
    ]
    if endpoint.query is not None:
        # The query Struct's properties become query parameters (the Struct itself is no component).
        schema = components[endpoint.query.__name__]
        for name, prop in schema["properties"].items():
            param = {"name": name, "in": "query", "required": name in schema.get("required", [])}
            params.append({**param, "schema": _not_null(prop)})
    if endpoint.reads_after:
        params.append(AFTER_SEQ_PARAMETER)
    if endpoint.reads_as_of:
        params.append(AS_OF_PARAMETER)
    return params


def _operation_id(endpoint: Endpoint) -> str:
    try:
        return OPERATION_IDS[(endpoint.method, endpoint.path)]
    except KeyError:
        raise ValueError(f"{endpoint.method} {endpoint.path} has no operationId in OPERATION_IDS") from None


def _problem() -> dict[str, Any]:
    return {PROBLEM_JSON: {"schema": _ref(Problem)}}


def _operation(endpoint: Endpoint, components: dict[str, Any]) -> dict[str, Any]:
    responses: dict[str, Any] = {
        str(endpoint.status): {
            "description": _REASONS[endpoint.status],
            "content": _json(_ref(endpoint.response)),
        }
    }
    if endpoint.reads_after:
        headers = {**READ_HEADERS, **(AS_OF_HEADERS if endpoint.reads_as_of else {})}
        if is_paged(endpoint.response):
            headers["Link"] = _NEXT_LINK
        responses[str(endpoint.status)]["headers"] = headers
    elif endpoint.method != "GET":
        responses[str(endpoint.status)]["headers"] = WRITE_HEADERS
    for status, body in endpoint.other:
        responses[str(status)] = {"description": _REASONS[status], "content": _json(_ref(body))}
    implied = (
        {400}
        | ({401, 403, 429} if not endpoint.public else set())
        | ({413, 415, 422} if endpoint.body else set())
        | ({404, 409, 422} if endpoint.reads_as_of else set())  # as_of: no such point, before the history
    )
    for status in sorted(implied | set(endpoint.errors)):
        responses[str(status)] = {"description": _REASONS[status], "content": _problem()}
    if "401" in responses:
        responses["401"]["headers"] = {"WWW-Authenticate": _CHALLENGE}
    if "429" in responses:
        responses["429"]["headers"] = {"Retry-After": _RETRY_AFTER}
    op: dict[str, Any] = {
        "summary": endpoint.summary,
        "tags": [endpoint.tag],
        "parameters": _parameters(endpoint, components),
        "responses": responses,
    }
    op = {"operationId": _operation_id(endpoint), **op}
    if endpoint.description:
        op["description"] = endpoint.description
    if endpoint.body is not None:
        op["requestBody"] = {"required": True, "content": _json(_ref(endpoint.body))}
    if endpoint.public:
        op["security"] = []
    return op


def build_openapi(endpoints: Sequence[Endpoint]) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``endpoints``."""
    types: list[Any] = [Problem]
    for e in endpoints:
        types += [t for t in (e.response, e.query, e.body, *(b for _, b in e.other)) if _is_struct(t)]
    _, components = msgspec.json.schema_components(dict.fromkeys(types), ref_template=_REF)
    paths: dict[str, dict[str, Any]] = {}
    for e in endpoints:
        paths.setdefault(e.path, {})[e.method.lower()] = _operation(e, components)
    for e in endpoints:
        if e.query is not None:
            components.pop(e.query.__name__, None)  # inlined as parameters, no component
    for e in endpoints:
        if e.body is not None:
            components[e.body.__name__] = _as_input(components[e.body.__name__])
    return {
        "openapi": "3.1.0",
        "info": {**INFO, "license": LICENSE},
        "servers": SERVERS,
        "paths": paths,
        "components": {
            "schemas": dict(sorted(components.items())),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }


def render(document: dict[str, Any]) -> str:
    """The document as committed: indented JSON, keys in a stable order, a final newline."""
    return msgspec.json.format(msgspec.json.encode(document), indent=2).decode() + "\n"
