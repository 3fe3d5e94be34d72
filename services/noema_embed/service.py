"""Composition root of the embed worker: consumes ``memory.created`` and ``fact.proposed`` events,
publishes vectors."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime

import structlog
from nats.aio.msg import Msg

from noema.adapters.embedders import Embedder
from noema.adapters.jetstream import DeadLetters, EventPublisher
from noema.adapters.pull import durable_puller
from noema.adapters.vector_cache import VectorCache
from noema.application.upkeep import embed_memories
from noema.domain.attention import memory_id_for
from noema.domain.documents import memory_document
from noema.runtime import tracing
from noema.runtime.embedding import start_embedder
from noema.runtime.metrics import Metrics
from noema.runtime.settings import Located
from noema.runtime.stopping import StopFlag, StopsHandler, release
from noema.runtime.wiring import open_bus, open_pool, sealer
from noema.runtime.worker import PullWorker, decode_each
from noema_events import FactProposed, MemoryCreated

__all__ = ["EmbedHandler", "build"]

log = structlog.get_logger("noema.embed")

CHUNK = 4
"""Messages embedded per call in process: the unit after which a stop is honoured (well under a
second). A remote embedder takes its ``chunk`` at once (requests in flight on the server)."""
PATIENCE_S = 20.0
"""How long an observation's memory waits for retrieve's vector of it (see noema.application.vectors)."""
IMPATIENT_S = 60.0
"""After a wait in vain, how long the worker computes everything itself (retrieve is far behind, or
does not embed these memories): a bound on the time waiting can cost."""
AWAIT_HORIZON_S = 600.0
"""Memories older than this are not waited for: retrieve only handles new observations."""


class EmbedHandler:
    """Embeds the memories of one batch of ``memory.created`` and ``fact.proposed`` events and publishes
    their vectors (facts are embedded as they are, episodes with their context)."""

    def __init__(
        self,
        publisher: EventPublisher,
        embedder: Embedder,
        dead_letters: DeadLetters,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        stopping: StopFlag | None = None,
        cache: VectorCache | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self._publisher = publisher
        embedded = (metrics or Metrics()).embedded
        self._computed = embedded.labels(embedder.name, "computed")
        self._cached = embedded.labels(embedder.name, "cache")
        self._cache = cache
        self._impatient_until = 0.0
        self._dead_letters = dead_letters
        self._embedder = embedder
        self._clock = clock
        self._stopping = stopping or StopFlag()
        self._chunk = _chunk(embedder)

    async def __call__(self, msgs: list[Msg]) -> None:
        """Embed, publish (stored before the ack), ack — in chunks of :data:`CHUNK` messages, so a stop
        asked for mid-batch ends it after the current chunk (the rest is nakked)."""
        count = computed = 0
        for start in range(0, len(msgs), self._chunk):
            if self._stopping.is_set:
                await release(msgs[start:])
                break
            chunk = msgs[start : start + self._chunk]
            now = self._clock()
            patient = time.monotonic() >= self._impatient_until
            # Each memory.embedded carries the trace of the event that asked for it.
            with tracing.batch("noema.embed") as traces:
                todo, awaited = await self._todo(chunk, now, traces)
                done = await embed_memories(
                    self._publisher,
                    self._embedder,
                    todo,
                    now,
                    self._cache,
                    awaited=awaited,
                    patience_s=PATIENCE_S if patient else 0.0,
                    stopping=lambda: self._stopping.is_set,
                )
            if done.gave_up:
                self._impatient_until = time.monotonic() + IMPATIENT_S
                log.info("retrieve's vectors did not come; embedding without waiting", seconds=IMPATIENT_S)
            count += len(done.vectors)
            computed += done.embedded
            self._computed.inc(done.embedded)
            self._cached.inc(len(done.vectors) - done.embedded)
            for msg in chunk:
                await msg.ack()
        # computed: texts embedded here; the others' vectors came from the cache (retrieve's).
        log.info("batch embedded", memories=count, computed=computed, model=self._embedder.name)

    async def _todo(
        self, msgs: list[Msg], now: datetime, traces: tracing.Batch
    ) -> tuple[list[tuple[str, str, str, str, str]], set[str]]:
        """The memories to embed, and the documents of those retrieve embeds too (a new observation's
        memory, made by attend: retrieve embeds the observation as that very passage)."""
        todo, awaited = [], set()
        events, undecodable = decode_each(msgs)
        for msg, _ in undecodable:
            # The projector, which owns the event stream, dead-letters it (once, for everyone).
            log.warning("undecodable event skipped", seq=msg.metadata.sequence.stream)
        # Content comes sealed (docs/privacy.md); erased content has nothing left to embed.
        for msg, ev in events:
            traces.carry(ev.id, msg.headers, **{"messaging.destination.name": msg.subject})
        for ev in await self._publisher.opened([ev for _, ev in events]):
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

    async def reject(self, msg: Msg, reason: str, kind: str) -> None:
        """Dead-letter an event whose memory cannot be embedded (``memory embed-missing`` retries it)."""
        await self._dead_letters.reject(msg, reason, kind)


async def build(
    settings: Located,
    stack: AsyncExitStack,
    embedder: Embedder | None = None,
    *,
    metrics: Metrics | None = None,
) -> StopsHandler:
    """Connect and bind the durable ``embed`` consumer (memory.created and fact.proposed events)."""
    nc, js, topology = await open_bus(settings, stack, "noema-embed")
    # For the keyring (the memories' text comes sealed in the events it embeds) and the start check.
    pool = await open_pool(settings, stack, "reader", app="noema-embed", max_size=1)
    if embedder is None:
        # Checked before the consumer is bound: a wrong server or model exits 2 having taken nothing.
        embedder = await start_embedder(settings, pool)
    if embedder is None:
        raise RuntimeError("the embed worker needs an embedder (NOEMA_EMBEDDER is 'none')")
    durable = topology.durable("embed")
    # Small batches in process: embedding is the slow part (about 100 texts/s on 2 cores). A remote
    # embedder gets enough at once to keep its requests in flight.
    batch = max(64, _chunk(embedder))
    puller = await durable_puller(
        nc,
        topology.event_stream,
        durable,
        [f"{topology.prefix}.evt.*.*.memory_created", f"{topology.prefix}.evt.*.*.fact_proposed"],
        batch,
        ack_wait=300.0,
        max_ack_pending=max(2_000, 4 * batch),
    )
    stopping = StopFlag()
    handler = EmbedHandler(
        EventPublisher(nc, topology, sealer(pool)),
        embedder,
        DeadLetters(js, topology, "embed", metrics),
        stopping=stopping,
        cache=VectorCache(nc, topology, embedder.name, embedder.dimensions),
        metrics=metrics,
    )
    return StopsHandler(PullWorker("embed", puller, handler, batch, metrics=metrics), stopping)


def _chunk(embedder: Embedder) -> int:
    """Texts per embedding call: :data:`CHUNK` in process, a remote embedder's ``chunk`` (its request
    size times its requests in flight)."""
    return int(getattr(embedder, "chunk", CHUNK))
