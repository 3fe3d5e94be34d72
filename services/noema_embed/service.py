"""Composition root of the embed worker: consumes ``memory.created`` and ``fact.proposed`` events,
publishes vectors."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime

import structlog

from noema.adapters.jetstream import DeadLetters, EventPublisher
from noema.adapters.metrics import Metrics
from noema.adapters.postgres.tenancy import ALL_WORKSPACES
from noema.adapters.pull import durable_puller
from noema.adapters.vector_cache import JetStreamVectorCache
from noema.application.embed import AWAIT_HORIZON_S, CHUNK, IMPATIENT_S, PATIENCE_S, Embedding
from noema.ports import Embedder
from noema.runtime.consumer import EventConsumer
from noema.runtime.embedding import start_embedder
from noema.runtime.settings import Located
from noema.runtime.stopping import StopFlag, StopsHandler
from noema.runtime.wiring import open_bus, open_pool, sealer
from noema.runtime.worker import PullWorker
from noema_events import Event

__all__ = ["AWAIT_HORIZON_S", "CHUNK", "IMPATIENT_S", "PATIENCE_S", "EmbedHandler", "build"]

log = structlog.get_logger("noema.embed")


class EmbedHandler(EventConsumer[Event]):
    """The NATS consumer around :class:`noema.application.embed.Embedding` (:attr:`embedding`):
    embed, publish (stored before the ack), ack — in chunks of :data:`CHUNK` messages, so a stop
    asked for mid-batch ends it after the current chunk (the rest is nakked). Each memory.embedded
    carries the trace of the event that asked for it; undecodable events are skipped (the
    projector, which owns the event stream, dead-letters them once for everyone)."""

    def __init__(
        self,
        publisher: EventPublisher,
        embedder: Embedder,
        dead_letters: DeadLetters,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        stopping: StopFlag | None = None,
        cache: JetStreamVectorCache | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        embedded = (metrics or Metrics()).embedded
        computed, cached = embedded.labels(embedder.name, "computed"), embedded.labels(embedder.name, "cache")

        def counted(here: int, from_cache: int) -> None:
            computed.inc(here)
            cached.inc(from_cache)

        stop = stopping or StopFlag()
        self._model = embedder.name
        self.embedding = Embedding(publisher, embedder, clock, lambda: stop.is_set, cache, counted)
        super().__init__(
            "embed",
            self.embedding,
            dead_letters,
            owns=False,
            chunk=_chunk(embedder),
            stopping=lambda: stop.is_set,
            done=self._logged,
        )

    def _logged(self, seqs: list[int], fresh: int, decoded: int) -> None:
        # computed: texts embedded here; the others' vectors came from the cache (retrieve's).
        log.info(
            "batch embedded",
            memories=self.embedding.memories,
            computed=self.embedding.computed,
            model=self._model,
        )
        self.embedding.memories = self.embedding.computed = 0


async def build(
    settings: Located,
    stack: AsyncExitStack,
    embedder: Embedder | None = None,
    *,
    metrics: Metrics | None = None,
) -> StopsHandler:
    """Connect and bind the durable ``embed`` consumer (memory.created and fact.proposed events)."""
    nc, js, topology = await open_bus(settings, stack, "noema-embed")
    # For the keyring (the memories' text comes sealed in the events it embeds, of every workspace:
    # the keyring's row security lets it see every workspace's keys) and the start check.
    pool = await open_pool(settings, stack, "reader", app="noema-embed", workspace=ALL_WORKSPACES, max_size=1)
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
        cache=JetStreamVectorCache(nc, topology, embedder.name, embedder.dimensions),
        metrics=metrics,
    )
    return StopsHandler(PullWorker("embed", puller, handler, batch, metrics=metrics), stopping)


def _chunk(embedder: Embedder) -> int:
    """Texts per embedding call: :data:`CHUNK` in process, a remote embedder's ``chunk`` (its request
    size times its requests in flight)."""
    return int(getattr(embedder, "chunk", CHUNK))
