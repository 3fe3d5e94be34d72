"""Application operations on memory: each validates up front, then publishes events.

Nothing here writes the read model directly: the projector applies the events, so replay
reproduces every effect. Used by the CLI, the workers and (later) the API alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, cast

import asyncpg

from noema_events import (
    ActivationDecayed,
    ActivationDecayedPayload,
    MemoryEmbedded,
    MemoryEmbeddedPayload,
    MemoryRetrieved,
    MemoryRetrievedPayload,
    RelationshipAdded,
    RelationshipAddedPayload,
)
from noema_events.vocabulary import RELATIONS, Relation

from .adapters.embedders import Embedder
from .adapters.jetstream import EventPublisher
from .domain.documents import memory_document
from .domain.dynamics import HALF_LIFE_DAYS
from .errors import Kind, NoemaError
from .ids import derive_id, new_id
from .threads import in_daemon_thread

__all__ = [
    "Conflict",
    "InvalidQuery",
    "NotFound",
    "OperationError",
    "decay_tick",
    "embed_memories",
    "embed_missing",
    "embedded_event",
    "embedding_work",
    "record_retrieval",
    "relate",
]


class OperationError(NoemaError, ValueError):
    """The operation cannot be done; the message says why (shown to users as is). Kind ``invalid``
    unless a subclass says otherwise (see :mod:`noema.errors`)."""

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


async def relate(
    pool: asyncpg.Pool,
    publisher: EventPublisher,
    from_id: str,
    to_id: str,
    relation: str,
    *,
    now: datetime,
    confidence: float = 1.0,
    source: str = "",
    actor: str = "operator",
) -> str:
    """Add an edge between two memories of the same mind; returns the relationship id."""
    if relation not in RELATIONS:
        raise OperationError(f"unknown relation {relation!r}; one of: {', '.join(RELATIONS)}")
    if not 0.0 <= confidence <= 1.0:
        raise OperationError("confidence must be between 0 and 1")
    if from_id == to_id:
        raise OperationError("a memory cannot be related to itself")
    rows = {
        r["id"]: r
        for r in await pool.fetch(
            "SELECT id, workspace, mind FROM memories WHERE id = ANY($1::text[])", [from_id, to_id]
        )
    }
    for mid in (from_id, to_id):
        if mid not in rows:
            raise NotFound(f"no memory {mid}")
    a, b = rows[from_id], rows[to_id]
    if (a["workspace"], a["mind"]) != (b["workspace"], b["mind"]):
        raise OperationError(
            f"relationships stay inside one mind: {from_id} is in {a['workspace']}/{a['mind'] or '-'}, "
            f"{to_id} in {b['workspace']}/{b['mind'] or '-'}"
        )
    existing = await pool.fetchval(
        "SELECT id FROM relationships WHERE from_id = $1 AND to_id = $2 AND relation = $3",
        from_id,
        to_id,
        relation,
    )
    if existing is not None:
        raise Conflict(f"{from_id} already {relation} {to_id} (relationship {existing})")
    rel_id = new_id()
    await publisher.publish(
        [
            RelationshipAdded(
                id=rel_id,
                workspace=a["workspace"],
                mind=a["mind"],
                occurred_at=now,
                correlation_id=rel_id,
                actor=actor,
                payload=RelationshipAddedPayload(
                    relationship_id=rel_id,
                    from_id=from_id,
                    to_id=to_id,
                    relation=cast(Relation, relation),
                    confidence=confidence,
                    source=source,
                ),
            )
        ]
    )
    return rel_id


def embedded_event(
    memory_id: str, workspace: str, mind: str, vector: list[float], model: str, now: datetime, cause: str
) -> MemoryEmbedded:
    """The event carrying one memory's vector (its id derived from memory and model: stored once)."""
    return MemoryEmbedded(
        id=derive_id("memory.embedded", memory_id, model),
        workspace=workspace,
        mind=mind,
        occurred_at=now,
        causation_id=cause,
        correlation_id=cause,
        actor="embed",
        payload=MemoryEmbeddedPayload(
            memory_id=memory_id, model=model, dimensions=len(vector), vector=vector
        ),
    )


def embedding_work(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, str, str, str]]:
    """(memory_id, workspace, mind, document, cause) for memory rows with ``id``, ``workspace``,
    ``mind``, ``content``, ``participants``, ``happened_at`` and ``origin_event``: what
    :func:`embed_memories` takes, the document built as the embed worker builds it."""
    return [
        (
            r["id"],
            r["workspace"],
            r["mind"],
            memory_document(r["content"], r["participants"], r["happened_at"]),
            r["origin_event"],
        )
        for r in rows
    ]


async def embed_memories(
    publisher: EventPublisher,
    embedder: Embedder,
    memories: Sequence[tuple[str, str, str, str, str]],
    now: datetime,
) -> int:
    """Embed (memory_id, workspace, mind, document, cause) tuples and publish their vectors.

    The document is the text to embed (see :func:`noema.domain.documents.memory_document`).
    """
    if not memories:
        return 0
    # In a thread: embedding is seconds of CPU, and the event loop must keep answering NATS pings
    # and signals meanwhile.
    texts = [m[3] for m in memories]
    vectors = await in_daemon_thread(lambda: embedder.embed_passages(texts))
    await publisher.publish(
        [
            embedded_event(mid, ws, mind, vec, embedder.name, now, cause)
            for (mid, ws, mind, _, cause), vec in zip(memories, vectors, strict=True)
        ]
    )
    return len(memories)


async def embed_missing(
    pool: asyncpg.Pool,
    publisher: EventPublisher,
    embedder: Embedder,
    *,
    now: Callable[[], datetime],
    batch: int = 64,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Backfill: embed every memory that has no vector for the embedder's model; returns how many."""
    total = await pool.fetchval(
        "SELECT count(*) FROM memories m WHERE NOT EXISTS "
        "(SELECT 1 FROM memory_embeddings e WHERE e.memory_id = m.id AND e.model = $1)",
        embedder.name,
    )
    done, after = 0, ""
    if progress:
        progress(0, int(total))
    while True:
        # Keyset pagination: vectors arrive through the projector, so the rows just sent may still
        # look missing; walking by id never selects them twice.
        rows = await pool.fetch(
            "SELECT id, workspace, mind, content, participants, happened_at, origin_event "
            "FROM memories m WHERE id > $2 AND NOT EXISTS "
            "(SELECT 1 FROM memory_embeddings e WHERE e.memory_id = m.id AND e.model = $1) "
            "ORDER BY id LIMIT $3",
            embedder.name,
            after,
            batch,
        )
        if not rows:
            return done
        done += await embed_memories(publisher, embedder, embedding_work(rows), now())
        after = rows[-1]["id"]
        if progress:
            progress(done, int(total))


async def decay_tick(
    pool: asyncpg.Pool, publisher: EventPublisher, tick_at: datetime, workspaces: Sequence[str] | None = None
) -> list[str]:
    """Publish one activation-decay tick per workspace (all that have memories, by default)."""
    if workspaces is None:
        workspaces = [
            r["workspace"] for r in await pool.fetch("SELECT DISTINCT workspace FROM memories ORDER BY 1")
        ]
    stamp = tick_at.isoformat()
    await publisher.publish(
        [
            ActivationDecayed(
                id=derive_id("activation.decayed", ws, stamp),
                workspace=ws,
                occurred_at=tick_at,
                correlation_id=derive_id("decay-tick", stamp),
                actor="decay",
                payload=ActivationDecayedPayload(tick_at=tick_at, half_life_days=HALF_LIFE_DAYS),
            )
            for ws in workspaces
        ]
    )
    return list(workspaces)


async def record_retrieval(
    pool: asyncpg.Pool,
    publisher: EventPublisher,
    memory_id: str,
    *,
    now: datetime,
    query: str = "",
    score: float = 0.0,
    components: dict[str, float] | None = None,
    cause: str | None = None,
) -> None:
    """Publish that a memory was recalled and admitted (the projector reinforces it)."""
    row = await pool.fetchrow("SELECT workspace, mind FROM memories WHERE id = $1", memory_id)
    if row is None:
        raise NotFound(f"no memory {memory_id}")
    event_id = new_id()
    await publisher.publish(
        [
            MemoryRetrieved(
                id=event_id,
                workspace=row["workspace"],
                mind=row["mind"],
                occurred_at=now,
                causation_id=cause,
                correlation_id=cause or event_id,
                actor="retrieve",
                payload=MemoryRetrievedPayload(
                    memory_id=memory_id, query=query, score=score, components=dict(components or {})
                ),
            )
        ]
    )
