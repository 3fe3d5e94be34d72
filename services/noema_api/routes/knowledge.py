"""Workspace knowledge for operators: facts, policies, conflicts, grants and the access mode,
domains, working memory and agents' notes. Every write goes through :mod:`noema.application.knowledge` as an
operator (the token's name), which adds the operator_action that names the actor and reason."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from noema.application.access import Caller
from noema.application.knowledge import Knowledge
from noema.errors import Kind

from ..endpoint import Endpoint, Req
from ..errors import ApiError
from ..knowledge_models import (
    AccessMode,
    AccessModeBody,
    ConflictPage,
    ConflictQuery,
    DomainPage,
    FactBody,
    FactPage,
    FactQuery,
    FactResult,
    GrantBody,
    GrantPage,
    GrantResult,
    Notes,
    NotesQuery,
    PolicyBody,
    PolicyPage,
    PolicyQuery,
    PolicyResult,
    SupersedeFactBody,
    SupersedePolicyBody,
    WorkingMemory,
    WorkingMemoryQuery,
    WorkspaceQuery,
)

__all__ = ["ENDPOINTS"]


def _knowledge(req: Req[Any, Any], write: bool = False) -> Knowledge:
    if write:
        req.api.bus()  # 503 while NATS is not connected
    return req.api.app.knowledge


def _operator(req: Req[Any, Any], workspace: str) -> Caller:
    """The token as an operator of ``workspace`` (403 outside the token's workspace)."""
    req.principal.check(workspace)
    return Caller(workspace, req.principal.name, "operator", operator=True)


async def _workspace_of(req: Req[Any, Any], table: Literal["memories", "policies"], key: str) -> str:
    """The workspace a fact or policy id (or unique prefix) is resolved in: the token's own; for a
    token of every workspace, the one holding that id or prefix. The full id of another workspace's
    record is refused (403); prefixes are never looked for outside the token's workspace."""
    if req.principal.workspace is not None:
        elsewhere = await req.api.app.memories.workspace_of(table, key)
        if elsewhere is not None:
            req.principal.check(elsewhere)
        return req.principal.workspace
    found = await req.api.app.memories.workspaces_of(table, key)
    what = "fact" if table == "memories" else "policy"
    if not found:
        raise ApiError(Kind.NOT_FOUND, f"no {what} {key}")
    if len(found) > 1:
        raise ApiError(Kind.MALFORMED, f"{key} matches {what} ids in several workspaces; give more of the id")
    return found[0]


def _page(rows: list[dict[str, Any]], page: type[Any]) -> Any:
    """A complete list, with its length."""
    return msgspec.convert({"items": rows, "total": len(rows)}, page, from_attributes=True)


def _paged(rows: list[dict[str, Any]], page: type[Any], limit: int, offset: int) -> Any:
    """One page of rows fetched with one more than ``limit``: that one says another page follows."""
    more = len(rows) > limit
    return msgspec.convert(
        {"items": rows[:limit], "next_offset": offset + limit if more else None}, page, from_attributes=True
    )


async def facts(req: Req[FactQuery, None]) -> FactPage:
    """Facts, the current repository's first."""
    q = req.query
    rows = await _knowledge(req).list_facts(
        _operator(req, q.workspace),
        domain=q.domain,
        topic=q.topic,
        repo=q.repo,
        include_inactive=q.include_inactive,
        limit=q.limit + 1,
        offset=q.offset,
    )
    return _paged(rows, FactPage, q.limit, q.offset)  # type: ignore[no-any-return]


async def propose_fact(req: Req[None, FactBody]) -> FactResult:
    """Enter a fact as an operator (conflicts are decided like any other fact)."""
    b = req.body
    out = await _knowledge(req, write=True).propose_fact(
        _operator(req, b.workspace),
        b.domain,
        b.topic,
        b.content,
        veracity=b.veracity,
        memory_type=b.memory_type,
        repo=b.repo,
        valid_until=b.valid_until,
        reason=b.reason,
        subjects=b.subjects,
    )
    return msgspec.convert(out, FactResult, from_attributes=True)


async def supersede_fact(req: Req[None, SupersedeFactBody]) -> FactResult:
    """Replace a fact explicitly (rule ``explicit``)."""
    fact_id = req.path["fact_id"]
    caller = _operator(req, await _workspace_of(req, "memories", fact_id))
    b = req.body
    out = await _knowledge(req, write=True).supersede_fact(
        caller, fact_id, b.content, reason=b.reason, veracity=b.veracity
    )
    return msgspec.convert(out, FactResult, from_attributes=True)


async def policies(req: Req[PolicyQuery, None]) -> PolicyPage:
    """Policies by domain."""
    rows = await _knowledge(req).list_policies(
        _operator(req, req.query.workspace), include_inactive=req.query.include_inactive
    )
    return _page(rows, PolicyPage)  # type: ignore[no-any-return]


async def propose_policy(req: Req[None, PolicyBody]) -> PolicyResult:
    """Enter a policy as an operator."""
    b = req.body
    policy_id = await _knowledge(req, write=True).propose_policy(
        _operator(req, b.workspace),
        b.domain,
        b.rule,
        repo=b.repo,
        required_role=b.required_role,
        reason=b.reason,
    )
    return PolicyResult(policy_id=policy_id)


async def supersede_policy(req: Req[None, SupersedePolicyBody]) -> PolicyResult:
    """Replace a policy with a new rule, or deactivate it."""
    caller = _operator(req, await _workspace_of(req, "policies", req.path["policy_id"]))
    knowledge = _knowledge(req, write=True)
    policy_id = await knowledge.resolve_policy_id(caller, req.path["policy_id"])
    new = await knowledge.supersede_policy(caller, policy_id, req.body.rule, reason=req.body.reason)
    return PolicyResult(policy_id=new, superseded=policy_id)


async def conflicts(req: Req[ConflictQuery, None]) -> ConflictPage:
    """Recorded conflicts with both sides."""
    q = req.query
    rows = await _knowledge(req).list_conflicts(_operator(req, q.workspace), q.domain, q.limit + 1, q.offset)
    return _paged(rows, ConflictPage, q.limit, q.offset)  # type: ignore[no-any-return]


async def grants(req: Req[WorkspaceQuery, None]) -> GrantPage:
    """The access mode and every grant."""
    k = _knowledge(req)
    ws = _operator(req, req.query.workspace).workspace
    return msgspec.convert(
        {"access_mode": await k.access_mode(ws), "grants": await k.list_grants(ws)},
        GrantPage,
        from_attributes=True,
    )


async def set_grant(req: Req[None, GrantBody]) -> GrantResult:
    """Set (role, domain) → access."""
    b = req.body
    out = await _knowledge(req, write=True).set_grant(
        _operator(req, b.workspace), b.role, b.domain, b.access, repo=b.repo, reason=b.reason
    )
    return GrantResult(role=out["role"], domain=out["domain"], access=out["access"], previous=out["previous"])


async def set_access_mode(req: Req[None, AccessModeBody]) -> AccessMode:
    """Compatible (no grant row means read) or strict (means none; every read path honours grants)."""
    b = req.body
    await _knowledge(req, write=True).set_access_mode(_operator(req, b.workspace), b.mode, reason=b.reason)
    return AccessMode(workspace=b.workspace, access_mode=b.mode)


async def domains(req: Req[WorkspaceQuery, None]) -> DomainPage:
    """Domains, created on first use."""
    rows = await _knowledge(req).list_domains(_operator(req, req.query.workspace))
    return _page(rows, DomainPage)  # type: ignore[no-any-return]


async def working_memory(req: Req[WorkingMemoryQuery, None]) -> WorkingMemory:
    """What a mind holds, heaviest first."""
    ws = _operator(req, req.query.workspace).workspace
    data = await _knowledge(req).working_memory(ws, req.query.mind)
    return msgspec.convert(data, WorkingMemory, from_attributes=True)


async def notes(req: Req[NotesQuery, None]) -> Notes:
    """An agent's private notes (operators may read them)."""
    q = req.query
    text = await _knowledge(req).get_notes(_operator(req, q.workspace), q.agent)
    return Notes(workspace=q.workspace, agent=q.agent, notes=text)


_READ = (400, 422, 503)
_WRITE = (400, 404, 409, 422, 503)


def _get(path: str, handler: Any, summary: str, response: Any, query: Any) -> Endpoint:
    return Endpoint("GET", path, handler, summary, response, "knowledge", query=query, errors=_READ)


def _write(method: str, path: str, handler: Any, summary: str, response: Any, body: Any) -> Endpoint:
    return Endpoint(
        method, path, handler, summary, response, "knowledge", body=body, status=202, errors=_WRITE
    )


ENDPOINTS = (
    _get("/v1/facts", facts, "List facts", FactPage, FactQuery),
    _write(
        "POST",
        "/v1/facts",
        propose_fact,
        "Enter a fact (conflicts decided by the rules)",
        FactResult,
        FactBody,
    ),
    _write(
        "POST",
        "/v1/facts/{fact_id}/supersede",
        supersede_fact,
        "Supersede a fact",
        FactResult,
        SupersedeFactBody,
    ),
    _get("/v1/policies", policies, "List policies", PolicyPage, PolicyQuery),
    _write("POST", "/v1/policies", propose_policy, "Enter a policy", PolicyResult, PolicyBody),
    _write(
        "POST",
        "/v1/policies/{policy_id}/supersede",
        supersede_policy,
        "Supersede or deactivate a policy",
        PolicyResult,
        SupersedePolicyBody,
    ),
    _get("/v1/conflicts", conflicts, "List recorded conflicts", ConflictPage, ConflictQuery),
    _get("/v1/grants", grants, "The access mode and grants", GrantPage, WorkspaceQuery),
    _write("PUT", "/v1/grants", set_grant, "Set an access grant", GrantResult, GrantBody),
    _write(
        "PUT", "/v1/access-mode", set_access_mode, "Set a workspace's access mode", AccessMode, AccessModeBody
    ),
    _get("/v1/domains", domains, "List domains", DomainPage, WorkspaceQuery),
    _get("/v1/working-memory", working_memory, "A mind's working memory", WorkingMemory, WorkingMemoryQuery),
    _get("/v1/notes", notes, "An agent's notes (operator read)", Notes, NotesQuery),
)
