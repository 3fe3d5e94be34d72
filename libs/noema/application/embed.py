"""The embed worker's decision: the memories of ``memory.created`` and ``fact.proposed`` events
embedded and their vectors published (facts as they are, episodes with their context), over an
embedder, the vector cache and the event sink (ports), without any transport. The NATS consumer
around it (:class:`noema.runtime.consumer.EventConsumer`, in chunks of :data:`CHUNK` messages, a
stop honoured between two) decodes and acks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Protocol, TypeVar

import structlog

from noema.application.deliveries import Delivered
from noema.application.upkeep import embed_memories
from noema.domain.attention import memory_id_for
from noema.domain.documents import memory_document
from noema.ports import Embedder, EventSink, VectorCache
from noema_events import Event, FactProposed, MemoryCreated

__all__ = ["AWAIT_HORIZON_S", "CHUNK", "IMPATIENT_S", "PATIENCE_S", "Embedding", "OpeningSink"]

log = structlog.get_logger("noema.embed")

E = TypeVar("E", bound=Event)

CHUNK = 4
"""Messages embedded per call: the unit after which a stop is honoured (well under a second)."""
PATIENCE_S = 20.0
"""How long an observation's memory waits for retrieve's vector of it (see noema.application.vectors)."""
IMPATIENT_S = 60.0
"""After a wait in vain, how long the worker computes everything itself (retrieve is far behind, or
does not embed these memories): a bound on the time waiting can cost."""
AWAIT_HORIZON_S = 600.0
"""Memories older than this are not waited for: retrieve only handles new observations."""


class OpeningSink(EventSink, Protocol):
    """An event sink that also opens the sealed content of events read
    (:class:`noema.adapters.jetstream.EventPublisher`)."""

    async def opened(self, events: Sequence[E]) -> list[E]:
        """``events`` with their sealed content opened (erased content empty)."""
        ...


class Embedding:
    """Embeds the memories of a batch of events and publishes their vectors."""

    def __init__(
        self,
        publisher: OpeningSink,
        embedder: Embedder,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        stopping: Callable[[], bool] = lambda: False,
        cache: VectorCache | None = None,
        counted: Callable[[int, int], None] = lambda computed, cached: None,
    ) -> None:
        self._publisher = publisher
        self._embedder = embedder
        self._clock = clock
        self._stopping = stopping
        self._cache = cache
        self._counted = counted  # (texts embedded here, vectors from the cache) of each call
        self._impatient_until = 0.0
        self.memories = 0
        """Memories embedded since this was last reset (the consumer's log line)."""
        self.computed = 0
        """Of those, the texts embedded here (the others' vectors came from the cache)."""

    async def __call__(self, batch: Sequence[Delivered[Event]], through: int) -> None:
        """Embed the batch's memories and publish their vectors (stored before this returns)."""
        now = self._clock()
        patient = time.monotonic() >= self._impatient_until
        todo, awaited = await self._todo(batch, now)
        done = await embed_memories(
            self._publisher,
            self._embedder,
            todo,
            now,
            self._cache,
            awaited=awaited,
            patience_s=PATIENCE_S if patient else 0.0,
            stopping=self._stopping,
        )
        if done.gave_up:
            self._impatient_until = time.monotonic() + IMPATIENT_S
            log.info("retrieve's vectors did not come; embedding without waiting", seconds=IMPATIENT_S)
        self.memories += len(done.vectors)
        self.computed += done.embedded
        self._counted(done.embedded, len(done.vectors) - done.embedded)

    async def _todo(
        self, batch: Sequence[Delivered[Event]], now: datetime
    ) -> tuple[list[tuple[str, str, str, str, str]], set[str]]:
        """The memories to embed, and the documents of those retrieve embeds too (a new observation's
        memory, made by attend: retrieve embeds the observation as that very passage)."""
        todo, awaited = [], set()
        # Content comes sealed (docs/privacy.md); erased content has nothing left to embed.
        for ev in await self._publisher.opened([d.event for d in batch]):
            if isinstance(ev, MemoryCreated) and ev.payload.content:
                p = ev.payload
                document = memory_document(p.content, p.participants, p.happened_at)
                todo.append((p.memory_id, ev.workspace, ev.mind, document, ev.id))
                recent = (now - ev.occurred_at).total_seconds() < AWAIT_HORIZON_S
                if recent and any(p.memory_id == memory_id_for(o) for o in p.source_observation_ids):
                    awaited.add(document)
            elif isinstance(ev, FactProposed) and ev.payload.content:
                todo.append((ev.payload.memory_id, ev.workspace, ev.mind, ev.payload.content, ev.id))
        return todo, awaited
