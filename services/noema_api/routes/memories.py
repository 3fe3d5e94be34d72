"""Reading memory: search (the agents' ranking), listings, the timeline, detail with provenance."""

from __future__ import annotations

import asyncpg
import msgspec

from noema.adapters.postgres import MemoryQueries
from noema.adapters.postgres.recall import RecallFilters

from ..endpoint import Endpoint, Req
from ..errors import ApiError
from ..models import (
    ListQuery,
    Memory,
    MemoryDetail,
    MemoryPage,
    MemorySummary,
    Relationship,
    SearchHit,
    SearchQuery,
    SearchResults,
    TimelineQuery,
)
from ..reads import citing_events, event_records, list_memories, source_observations, timeline

__all__ = ["ENDPOINTS"]


async def search(req: Req[SearchQuery, None]) -> SearchResults:
    """search_memory through :class:`noema.recall.Recall`, exactly as agents and the CLI rank."""
    q = req.query
    filters = RecallFilters(
        workspace=req.principal.scope(q.workspace), mind=q.mind, kinds=(q.kind,) if q.kind else ()
    )
    try:
        found = await req.api.recall.search(q.q, filters, mode=q.mode, limit=q.limit, now=req.api.clock())
    except ValueError as exc:
        raise ApiError(400, str(exc)) from None
    except asyncpg.PostgresSyntaxError as exc:
        raise ApiError(400, f"query not understood: {exc}") from None
    return SearchResults(
        query=found.query,
        mode=found.mode,
        intent=found.intent,
        weights=found.weights,
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
    filters = RecallFilters(
        workspace=req.principal.scope(q.workspace),
        mind=q.mind,
        kinds=(q.kind,) if q.kind else (),
        epistemic_kinds=(q.epistemic_kind,) if q.epistemic_kind else (),
        domains=(q.domain,) if q.domain else (),
        statuses=(q.status,) if q.status else (),
        since=q.since,
        until=q.until,
        include_expired=True,
    )
    items = await list_memories(req.api.pool, filters, q.limit, q.offset)
    return MemoryPage(items=items, limit=q.limit, offset=q.offset)


async def timeline_(req: Req[TimelineQuery, None]) -> MemoryPage:
    """A workspace's memories in the order things happened."""
    q = req.query
    req.principal.check(q.workspace)
    filters = RecallFilters(
        workspace=q.workspace, mind=q.mind, statuses=(), since=q.since, until=q.until, include_expired=True
    )
    items = await timeline(req.api.pool, filters, q.order == "asc", q.limit, q.offset)
    return MemoryPage(items=items, limit=q.limit, offset=q.offset)


async def detail(req: Req[None, None]) -> MemoryDetail:
    """One memory (by id or a unique prefix of it) with provenance, edges and citing events."""
    try:
        found = await MemoryQueries(req.api.pool).get(req.path["memory_id"])
    except LookupError as exc:
        raise ApiError(400, str(exc)) from None
    if found is None:
        raise ApiError(404, f"no memory {req.path['memory_id']}")
    memory = msgspec.convert(found, Memory)
    req.principal.check(memory.workspace)
    cited = await citing_events(req.api.pool, memory.id, memory.workspace)
    return MemoryDetail(
        memory=memory,
        origin=event_records([found["origin"]])[0] if found["origin"] else None,
        source_observations=source_observations(memory.source_observation_ids, cited),
        relationships=[msgspec.convert(r, Relationship) for r in found["relationships"]],
        citing_events=cited,
    )


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
    ),
    Endpoint(
        "GET",
        "/v1/memories/{memory_id}",
        detail,
        "One memory with provenance, relationships and the events that cite it",
        MemoryDetail,
        "memories",
        errors=(*_READ_ERRORS, 404),
    ),
)
