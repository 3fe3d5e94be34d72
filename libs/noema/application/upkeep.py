"""Application operations on memory: each validates up front, then publishes events.

Nothing here writes the read model directly: the projector applies the events, so replay
reproduces every effect. Used by the CLI, the workers and (later) the API alike.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from noema.application.vectors import PassageVectors, passage_vectors
from noema.domain.documents import memory_document
from noema.domain.dynamics import ACTIVATION_FLOOR, FADE_THRESHOLD, HALF_LIFE_DAYS, RECALL_BOOST
from noema.errors import Conflict, NotFound, OperationError
from noema.ids import derive_id, new_id
from noema.ports import Embedder, EventSink, MemoryRecords, VectorCache
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

__all__ = [
    "DEFAULT_TICK_INTERVAL",
    "TICK_LISTED",
    "decay_tick",
    "embed_memories",
    "embed_missing",
    "embedded_event",
    "embedding_work",
    "record_retrieval",
    "refuse_erased",
    "relate",
]


def refuse_erased(row: Mapping[str, Any], action: str) -> None:
    """Raise :class:`Conflict` when the memory of ``row`` was erased: nothing may be done to it."""
    if row["status"] == "erased" or row.get("erased_at") is not None:
        raise Conflict(
            f"cannot {action} memory {row['id']}: it was erased (noemactl erase, docs/privacy.md); "
            "its content is gone for good and nothing can be done to it"
        )


async def relate(
    reads: MemoryRecords,
    publisher: EventSink,
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
    scopes = await reads.scopes([from_id, to_id])
    for mid in (from_id, to_id):
        if mid not in scopes:
            raise NotFound(f"no memory {mid}")
    for mid in (from_id, to_id):
        if (row := await reads.memory(mid)) is not None:
            refuse_erased(row, "relate")
    a, b = scopes[from_id], scopes[to_id]
    if a != b:
        raise OperationError(
            f"relationships stay inside one mind: {from_id} is in {a[0]}/{a[1] or '-'}, "
            f"{to_id} in {b[0]}/{b[1] or '-'}"
        )
    existing = await reads.relationship(from_id, to_id, relation)
    if existing is not None:
        raise Conflict(f"{from_id} already {relation} {to_id} (relationship {existing})")
    rel_id = new_id()
    await publisher.publish(
        [
            RelationshipAdded(
                id=rel_id,
                workspace=a[0],
                mind=a[1],
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
    publisher: EventSink,
    embedder: Embedder,
    memories: Sequence[tuple[str, str, str, str, str]],
    now: datetime,
    cache: VectorCache | None = None,
    *,
    awaited: Collection[str] = (),
    patience_s: float = 0.0,
    stopping: Callable[[], bool] = lambda: False,
) -> PassageVectors:
    """Embed (memory_id, workspace, mind, document, cause) tuples and publish their vectors; returns
    them, with how many texts were embedded here (the others came from the vector ``cache``, waited
    for as :func:`noema.application.vectors.passage_vectors` says).

    The document is the text to embed (see :func:`noema.domain.documents.memory_document`).
    """
    found = await passage_vectors(
        embedder, [m[3] for m in memories], cache, awaited=awaited, patience_s=patience_s, stopping=stopping
    )
    if not memories:
        return found
    await publisher.publish(
        [
            embedded_event(mid, ws, mind, vec, embedder.name, now, cause)
            for (mid, ws, mind, _, cause), vec in zip(memories, found.vectors, strict=True)
        ]
    )
    return found


OUTAGE_PATIENCE_S = 300.0
"""How long ``embed-missing`` waits through an embedding server that does not answer."""
OUTAGE_RETRY_S = 2.0
"""How often ``embed-missing`` tries again meanwhile (the embedder's own circuit answers at once)."""


async def embed_missing(
    reads: MemoryRecords,
    publisher: EventSink,
    embedder: Embedder,
    *,
    now: Callable[[], datetime],
    batch: int = 64,
    progress: Callable[[int, int], None] | None = None,
    limit: int | None = None,
    patience_s: float = OUTAGE_PATIENCE_S,
) -> int:
    """Backfill: embed every memory (at most ``limit``) that has no vector for the embedder's model;
    returns how many. A remote embedder gets its ``chunk`` at a time (requests in flight); while it
    is unavailable the backfill waits and goes on, giving up after ``patience_s`` without an answer."""
    batch = max(batch, int(getattr(embedder, "chunk", batch)))
    total = await reads.count_unembedded(embedder.name)
    if limit is not None:
        total = min(total, limit)
    done, after = 0, ""
    if progress:
        progress(0, total)
    while limit is None or done < limit:
        # Keyset pagination: vectors arrive through the projector, so the rows just sent may still
        # look missing; walking by id never selects them twice.
        size = batch if limit is None else min(batch, limit - done)
        rows = await reads.unembedded(embedder.name, after, size)
        if not rows:
            return done
        work = embedding_work(rows)
        down_since: float | None = None
        while True:
            try:
                done += len((await embed_memories(publisher, embedder, work, now())).vectors)
                break
            except ConnectionError:  # a remote embedder's EmbedderUnavailable
                down_since = down_since or time.monotonic()
                if time.monotonic() - down_since > patience_s:
                    raise
                await asyncio.sleep(OUTAGE_RETRY_S)
        after = rows[-1]["id"]
        if progress:
            progress(done, total)
    return done


TICK_LISTED = 1000
"""The most memory ids a tick lists of each kind (faded, expired); its totals count them all."""

DEFAULT_TICK_INTERVAL = timedelta(hours=1)
"""What a tick covers when no previous tick time is given (``NOEMA_DECAY_INTERVAL``'s default)."""


async def decay_tick(
    reads: MemoryRecords,
    publisher: EventSink,
    tick_at: datetime,
    workspaces: Sequence[str] | None = None,
    *,
    since: datetime | None = None,
) -> list[str]:
    """Publish one decay tick per workspace (all that have memories, by default): which memories
    faded below :data:`~noema.domain.dynamics.FADE_THRESHOLD` and which passed their
    ``valid_until`` between ``since`` (the previous tick; by default an interval before) and
    ``tick_at``. A tick rewrites no memory: activation is computed where it is read."""
    if workspaces is None:
        workspaces = await reads.memory_workspaces()
    since = since if since is not None else tick_at - DEFAULT_TICK_INTERVAL
    stamp = tick_at.isoformat()
    events = []
    for ws in workspaces:
        found = await reads.fading(ws, since, tick_at, FADE_THRESHOLD, TICK_LISTED)
        events.append(
            ActivationDecayed(
                id=derive_id("activation.decayed", ws, stamp),
                workspace=ws,
                occurred_at=tick_at,
                correlation_id=derive_id("decay-tick", stamp),
                actor="decay",
                payload=ActivationDecayedPayload(
                    tick_at=tick_at,
                    half_life_days=HALF_LIFE_DAYS,
                    activation_floor=ACTIVATION_FLOOR,
                    since=since,
                    fade_threshold=FADE_THRESHOLD,
                    faded=found.faded,
                    faded_total=found.faded_total,
                    expired=found.expired,
                    expired_total=found.expired_total,
                ),
            )
        )
    await publisher.publish(events)
    return list(workspaces)


async def record_retrieval(
    reads: MemoryRecords,
    publisher: EventSink,
    memory_id: str,
    *,
    now: datetime,
    query: str = "",
    score: float = 0.0,
    components: dict[str, float] | None = None,
    cause: str | None = None,
) -> None:
    """Publish that a memory was recalled and admitted (the projector reinforces it)."""
    scope = (await reads.scopes([memory_id])).get(memory_id)
    if scope is None:
        raise NotFound(f"no memory {memory_id}")
    event_id = new_id()
    await publisher.publish(
        [
            MemoryRetrieved(
                id=event_id,
                workspace=scope[0],
                mind=scope[1],
                occurred_at=now,
                causation_id=cause,
                correlation_id=cause or event_id,
                actor="retrieve",
                payload=MemoryRetrievedPayload(
                    memory_id=memory_id,
                    query=query,
                    score=score,
                    components=dict(components or {}),
                    boost=RECALL_BOOST,
                    half_life_days=HALF_LIFE_DAYS,
                    activation_floor=ACTIVATION_FLOOR,
                ),
            )
        ]
    )
