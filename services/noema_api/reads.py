"""Read queries behind the operator API: filtered listings, the timeline, provenance, the audit log.

Listing filters reuse :class:`~noema.adapters.postgres.recall.RecallFilters`, so "kind", "domain",
"since" and the rest mean exactly what they mean to recall.
"""

from __future__ import annotations

import re
from typing import Any

import asyncpg
import msgspec

from noema.adapters.postgres.queries import MEMORY_FIELDS
from noema.adapters.postgres.recall import RecallFilters
from noema_events import EVENT_TYPES

from .errors import ApiError
from .models import AuditQuery, EventRecord, Memory, SourceObservation

__all__ = [
    "audit_page",
    "citing_events",
    "event_records",
    "list_memories",
    "memories",
    "source_observations",
    "timeline",
]

EVENT_FIELDS = (
    "seq, id, type, workspace, mind, occurred_at, causation_id, correlation_id, actor, subject, "
    "payload::text AS payload"
)
CITING_LIMIT = 200
_VERSIONED = re.compile(r"\.v[0-9]+$")


def memories(rows: list[asyncpg.Record]) -> list[Memory]:
    """Rows of ``MEMORY_FIELDS`` as Memory structs."""
    return [msgspec.convert(dict(r), Memory, from_attributes=False) for r in rows]


def event_records(rows: list[asyncpg.Record] | list[dict[str, Any]]) -> list[EventRecord]:
    """Rows of ``EVENT_FIELDS`` (payload as JSON text) as EventRecord structs."""
    return [
        msgspec.convert({**dict(r), "payload": msgspec.json.decode(r["payload"])}, EventRecord) for r in rows
    ]


async def list_memories(pool: asyncpg.Pool, filters: RecallFilters, limit: int, offset: int) -> list[Memory]:
    """Memories matching ``filters``, newest first."""
    args: list[Any] = []
    where = filters.where("m", args)
    rows = await pool.fetch(
        f"SELECT {MEMORY_FIELDS} FROM memories m WHERE {where} "
        f"ORDER BY created_at DESC, origin_seq DESC LIMIT ${len(args) + 1} OFFSET ${len(args) + 2}",
        *args,
        limit,
        offset,
    )
    return memories(rows)


async def timeline(
    pool: asyncpg.Pool, filters: RecallFilters, ascending: bool, limit: int, offset: int
) -> list[Memory]:
    """Memories in the order things happened (the ``memories_recent`` index serves it)."""
    args: list[Any] = []
    where = filters.where("m", args)
    direction = "ASC" if ascending else "DESC"
    rows = await pool.fetch(
        f"SELECT {MEMORY_FIELDS} FROM memories m WHERE {where} "
        f"ORDER BY coalesce(happened_at, created_at) {direction}, origin_seq {direction} "
        f"LIMIT ${len(args) + 1} OFFSET ${len(args) + 2}",
        *args,
        limit,
        offset,
    )
    return memories(rows)


async def citing_events(pool: asyncpg.Pool, memory_id: str, workspace: str) -> list[EventRecord]:
    """Events whose payload names the memory (newest first, at most ``CITING_LIMIT``).

    Every event that concerns a memory is published in the memory's workspace, so the
    ``events_workspace_type`` index bounds the scan to that workspace; within it, the payload's text
    is matched for the quoted id (ids are UUIDs, so a quoted match is exact).
    """
    rows = await pool.fetch(
        f"SELECT {EVENT_FIELDS} FROM events WHERE workspace = $1 AND strpos(payload::text, $2) > 0 "
        "ORDER BY seq DESC LIMIT $3",
        workspace,
        f'"{memory_id}"',
        CITING_LIMIT,
    )
    return event_records(rows)


def source_observations(observation_ids: list[str], cited: list[EventRecord]) -> list[SourceObservation]:
    """Each source observation with the attention decision about it found among the citing events."""
    decisions: dict[str, dict[str, Any]] = {}
    for ev in cited:
        if ev.type.startswith("attention.decided."):
            for d in ev.payload.get("decisions", []):
                if isinstance(d, dict) and isinstance(d.get("candidate_id"), str):
                    decisions.setdefault(d["candidate_id"], {**d, "event_id": ev.id, "seq": ev.seq})
    return [SourceObservation(id=oid, decision=decisions.get(oid)) for oid in observation_ids]


def _types(given: str) -> list[str]:
    if _VERSIONED.search(given):
        return [given]
    tags = [tag for tag in EVENT_TYPES if _VERSIONED.sub("", tag) == given]
    if not tags:
        names = sorted({_VERSIONED.sub("", t) for t in EVENT_TYPES})
        raise ApiError(400, f"unknown event type {given!r}; one of: {', '.join(names)}")
    return tags


async def audit_page(pool: asyncpg.Pool, q: AuditQuery, workspace: str | None) -> list[EventRecord]:
    """Events matching the audit query's filters, newest first (keyset-paged by ``before``)."""
    rows = await pool.fetch(
        f"SELECT {EVENT_FIELDS} FROM events "
        "WHERE ($1::text IS NULL OR workspace = $1) AND ($2::text[] IS NULL OR type = ANY($2)) "
        "AND ($3::text IS NULL OR actor = $3) AND ($4::bigint IS NULL OR seq < $4) "
        "ORDER BY seq DESC LIMIT $5",
        workspace,
        _types(q.type) if q.type else None,
        q.actor,
        q.before,
        q.limit,
    )
    return event_records(rows)
