"""Operator reads of the read model: filtered listings, the timeline, one memory's detail with its
provenance, and the audit log. The HTTP API and ``noemactl`` both call these (through
:class:`~noema.application.facade.Noema`), so they list, order and refuse alike.

Listing filters become :class:`~noema.adapters.postgres.voices.RecallFilters`, so "kind", "domain",
"since" and the rest mean exactly what they mean to recall. No grants are applied: these are the
operators' reads, and each surface limits the workspace to what its caller may see.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from noema.application.views import (
    AuditPage,
    AuditQuery,
    Embedding,
    EventRecord,
    ListQuery,
    Memory,
    MemoryDetail,
    MemoryPage,
    Relationship,
    SourceObservation,
    TimelineQuery,
)
from noema.errors import InvalidQuery, NotFound
from noema.ids import short_prefix_hint
from noema.ports import MemoryOrder, MemoryReads, RecallFilters, Row
from noema_events import KNOWN_TAGS
from noema_events.bounded import decode_json

__all__ = [
    "CITING_LIMIT",
    "audit",
    "event_records",
    "event_types",
    "list_memories",
    "memory_detail",
    "resolve_memory",
    "timeline",
    "workspace_exists",
]

CITING_LIMIT = 200
"""At most this many citing events are shown with a memory (newest first)."""
_VERSIONED = re.compile(r"\.v[0-9]+$")


def _memories(rows: list[Row]) -> list[Memory]:
    return [msgspec.convert(dict(r), Memory) for r in rows]


def event_records(rows: list[Row]) -> list[EventRecord]:
    """Event rows (payload as JSON text) as EventRecord structs."""
    return [
        msgspec.convert({**dict(r), "payload": decode_json(r["payload"], max_bytes=None)}, EventRecord)
        for r in rows
    ]


async def _page(
    reads: MemoryReads, filters: RecallFilters, order: MemoryOrder, limit: int, offset: int
) -> MemoryPage:
    # One row more than asked says whether another page follows, without counting them all.
    rows = await reads.page(filters, order, limit + 1, offset)
    more = len(rows) > limit
    return MemoryPage(
        items=_memories(rows[:limit]),
        limit=limit,
        offset=offset,
        next_offset=offset + limit if more else None,
    )


async def workspace_exists(reads: MemoryReads, workspace: str) -> bool:
    """Whether any event names ``workspace`` (an index lookup): an empty answer for a workspace that
    does not exist is then told apart from one that has nothing matching."""
    return await reads.workspace_exists(workspace)


async def list_memories(reads: MemoryReads, q: ListQuery) -> MemoryPage:
    """Memories matching the filters, newest first; every status unless one is asked for."""
    filters = RecallFilters(
        workspace=q.workspace,
        mind=q.mind,
        kinds=(q.kind,) if q.kind else (),
        epistemic_kinds=(q.epistemic_kind,) if q.epistemic_kind else (),
        domains=(q.domain,) if q.domain else (),
        statuses=(q.status,) if q.status else (),
        since=q.since,
        until=q.until,
        include_expired=True,
    )
    return await _page(reads, filters, "newest", q.limit, q.offset)


async def timeline(reads: MemoryReads, q: TimelineQuery) -> MemoryPage:
    """A workspace's memories in the order things happened."""
    filters = RecallFilters(
        workspace=q.workspace, mind=q.mind, statuses=(), since=q.since, until=q.until, include_expired=True
    )
    order: MemoryOrder = "happened_asc" if q.order == "asc" else "happened_desc"
    return await _page(reads, filters, order, q.limit, q.offset)


async def _citing_events(reads: MemoryReads, memory_id: str, workspace: str) -> list[EventRecord]:
    """Events whose payload names the memory (newest first, at most ``CITING_LIMIT``)."""
    return event_records(await reads.citing_events(memory_id, workspace, CITING_LIMIT))


def _source_observations(observation_ids: list[str], cited: list[EventRecord]) -> list[SourceObservation]:
    """Each source observation with the attention decision about it found among the citing events."""
    decisions: dict[str, dict[str, Any]] = {}
    for ev in cited:
        if ev.type.startswith("attention.decided."):
            for d in ev.payload.get("decisions", []):
                if isinstance(d, dict) and isinstance(d.get("candidate_id"), str):
                    decisions.setdefault(d["candidate_id"], {**d, "event_id": ev.id, "seq": ev.seq})
    return [SourceObservation(id=oid, decision=decisions.get(oid)) for oid in observation_ids]


def _unknown(id_or_prefix: str) -> NotFound | InvalidQuery:
    hint = short_prefix_hint(id_or_prefix)
    if hint:  # too short to be looked up: the request is wrong (400), not the memory unknown (404)
        return InvalidQuery(f"no memory {id_or_prefix}{hint}")
    return NotFound(f"no memory {id_or_prefix}")


async def resolve_memory(reads: MemoryReads, id_or_prefix: str, workspace: str | None = None) -> str:
    """The full id of the memory ``id_or_prefix`` names (a unique prefix of at least 6 characters
    will do), looked for in ``workspace`` when given; every surface's writes resolve ids here.

    Raises :class:`NotFound`, or :class:`InvalidQuery` when a prefix matches several memories or
    is too short.
    """
    try:
        found = await reads.resolve(id_or_prefix, workspace)
    except LookupError as exc:
        raise InvalidQuery(str(exc)) from None
    if found is None:
        raise _unknown(id_or_prefix)
    return found


async def memory_detail(reads: MemoryReads, id_or_prefix: str, workspace: str | None = None) -> MemoryDetail:
    """One memory (by id or a unique prefix of at least 6 characters; in ``workspace`` when given)
    with its origin event, source observations and the attention decisions about them,
    relationships, vectors and citing events.

    Raises :class:`NotFound`, or :class:`InvalidQuery` when a prefix matches several memories.
    """
    found = await reads.get(await resolve_memory(reads, id_or_prefix, workspace))
    if found is None:
        raise _unknown(id_or_prefix)  # resolved, then gone: not possible while nothing is deleted
    memory = msgspec.convert(found, Memory)
    cited = await _citing_events(reads, memory.id, memory.workspace)
    return MemoryDetail(
        memory=memory,
        origin=event_records([found["origin"]])[0] if found["origin"] else None,
        source_observations=_source_observations(memory.source_observation_ids, cited),
        relationships=msgspec.convert(found["relationships"], list[Relationship]),
        citing_events=cited,
        embeddings=msgspec.convert(found["embeddings"], list[Embedding]),
    )


def event_types(given: str) -> list[str]:
    """The versioned event types ``given`` names (``operator.action`` → every version of it, earlier
    ones included: the audit copy keeps each event as recorded).

    Raises :class:`InvalidQuery` listing the known names when it names none.
    """
    if _VERSIONED.search(given):
        if given in KNOWN_TAGS:
            return [given]
        tags = []
    else:
        tags = sorted(tag for tag in KNOWN_TAGS if _VERSIONED.sub("", tag) == given)
    if not tags:
        names = sorted({_VERSIONED.sub("", t) for t in KNOWN_TAGS})
        raise InvalidQuery(f"unknown event type {given!r}; one of: {', '.join(names)}")
    return tags


async def audit(reads: MemoryReads, q: AuditQuery) -> AuditPage:
    """Events matching the filters, newest first (keyset-paged by ``before``): who changed what,
    when, why and from which event."""
    rows = await reads.audit(q.workspace, event_types(q.type) if q.type else None, q.actor, q.before, q.limit)
    items = event_records(rows)
    return AuditPage(items=items, next_before=items[-1].seq if len(items) == q.limit else None)
