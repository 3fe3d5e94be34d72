"""Reading memory: search (the agents' ranking), listings, the timeline, detail with provenance.

Every handler calls the application layer (:class:`noema.application.facade.Noema`), as the CLI does;
here only the
token's workspace scope is applied and the answer shaped.
"""

from __future__ import annotations

import msgspec

from noema.application.access import Caller
from noema.application.facade import SearchOptions

from ..endpoint import Endpoint, Req, scoped_memory_id
from ..models import (
    ListQuery,
    MemoryDetail,
    MemoryPage,
    MemorySummary,
    SearchHit,
    SearchQuery,
    SearchResults,
    TimelineQuery,
)

__all__ = ["ENDPOINTS"]


async def search(req: Req[SearchQuery, None]) -> SearchResults:
    """search_memory through :meth:`noema.application.facade.Noema.search`, exactly as agents and the
    CLI rank."""
    q = req.query
    workspace = req.principal.scope(q.workspace)
    # An operator of one workspace, or (a token for all of them, none asked for) of every workspace.
    who = Caller(workspace, req.principal.name, "operator", operator=True) if workspace else None
    options = SearchOptions(
        mode=q.mode,
        limit=q.limit,
        mind=q.mind,
        kinds=(q.kind,) if q.kind else (),
        epistemic_kinds=(q.epistemic_kind,) if q.epistemic_kind else (),
        domains=(q.domain,) if q.domain else (),
        statuses=(q.status,) if q.status else (),
        since=q.since,
        until=q.until,
        repo=q.repo,
    )
    found = await req.api.app.search(who, q.q, options)
    return SearchResults(
        query=found.query,
        mode=found.mode,
        intent=found.intent,
        weights=found.weights,
        unavailable=found.unavailable,
        results=[
            SearchHit(
                id=r.id,
                content=r.content,
                score=r.score,
                components=r.components if q.explain else None,
                memory=msgspec.convert(r.memory, MemorySummary) if r.memory else None,
            )
            for r in found.results
        ],
    )


async def list_(req: Req[ListQuery, None]) -> MemoryPage:
    """Memories with filters, newest first; every status unless one is asked for."""
    q = req.query
    return await req.api.app.list_memories(
        msgspec.structs.replace(q, workspace=req.principal.scope(q.workspace))
    )


async def timeline_(req: Req[TimelineQuery, None]) -> MemoryPage:
    """A workspace's memories in the order things happened."""
    req.principal.check(req.query.workspace)
    return await req.api.app.timeline(req.query)


async def detail(req: Req[None, None]) -> MemoryDetail:
    """One memory (by id or a unique prefix of it) with provenance, edges and citing events."""
    return await req.api.app.memory(await scoped_memory_id(req))


_READ_ERRORS = (400,)

ENDPOINTS = (
    Endpoint(
        "GET",
        "/v1/memories/search",
        search,
        "Search memory with the agents' ranking",
        SearchResults,
        "memories",
        query=SearchQuery,
        errors=_READ_ERRORS,
        description="Same recall as agents and `noemactl memory search`: active, unexpired memories only. "
        "With `explain` every result carries its score components.",
    ),
    Endpoint(
        "GET",
        "/v1/memories",
        list_,
        "List memories with filters",
        MemoryPage,
        "memories",
        query=ListQuery,
        errors=_READ_ERRORS,
        description="Same listing as `noemactl memory list`.",
    ),
    Endpoint(
        "GET",
        "/v1/timeline",
        timeline_,
        "A workspace's memories in the order things happened",
        MemoryPage,
        "memories",
        query=TimelineQuery,
        errors=_READ_ERRORS,
        description="Same timeline as `noemactl memory timeline`.",
    ),
    Endpoint(
        "GET",
        "/v1/memories/{memory_id}",
        detail,
        "One memory with provenance, relationships and the events that cite it",
        MemoryDetail,
        "memories",
        errors=(*_READ_ERRORS, 404),
        description="Same detail as `noemactl memory show`: the record, its origin event, its source "
        "observations with the attention decisions about them, relationships, vectors and (newest "
        "first, at most 200) the events that cite it.",
    ),
)
