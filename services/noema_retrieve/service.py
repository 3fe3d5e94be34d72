"""Composition root of the retrieve worker.

For each new observation it runs hybrid recall in the observation's workspace and mind and publishes
the best memories as ``recall.proposed`` candidates on the observation stream, where the attend
worker weighs them against the observations themselves; admitted recalls are reinforced through
``memory.retrieved`` events that carry their scoring components.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime

from noema.adapters.attend_log import JetStreamProposals
from noema.adapters.jetstream import DeadLetters
from noema.adapters.metrics import Metrics
from noema.adapters.postgres.tenancy import ALL_WORKSPACES
from noema.adapters.postgres.voices import RecallStore
from noema.adapters.pull import DeliverPolicy, durable_puller
from noema.adapters.vector_cache import JetStreamVectorCache
from noema.application.retrieve import (
    CHUNK,
    CONTENT_CHARS,
    DEPTH,
    MIN_SCORE,
    PROPOSALS,
    TEXT_TERMS,
    Recalling,
)
from noema.application.search import Recall
from noema.ports import Embedder, Sealer
from noema.runtime.consumer import Connection, EventConsumer
from noema.runtime.embedding import start_embedder
from noema.runtime.settings import Located
from noema.runtime.stopping import StopFlag, StopsHandler
from noema.runtime.tasks import cancel_and_wait
from noema.runtime.wiring import open_bus, open_pool, sealer
from noema.runtime.worker import PullWorker
from noema.topology import Topology
from noema_events import Event

__all__ = [
    "CHUNK",
    "CONTENT_CHARS",
    "DEPTH",
    "MIN_SCORE",
    "PROPOSALS",
    "TEXT_TERMS",
    "RetrieveHandler",
    "build",
]


class RetrieveHandler(EventConsumer[Event]):
    """The NATS consumer around :class:`noema.application.retrieve.Recalling` (:attr:`recalling`):
    recall for each observation of a batch, publish the proposals (stored before the ack), ack.

    Failures are :class:`noema.runtime.worker.PullWorker`'s to handle: lost servers are retried with
    backoff; an observation whose recall keeps failing is dead-lettered (``failed``) alone while
    the rest of its batch goes on. Undecodable observations are skipped here: attend, which owns the
    observation stream, dead-letters them. A stop asked for mid-batch ends it after the current
    chunk: the rest is nakked."""

    def __init__(
        self,
        nc: Connection,
        recall: Recall,
        topology: Topology,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        stopping: StopFlag | None = None,
        cache: JetStreamVectorCache | None = None,
        sealer: Sealer | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        stop = stopping or StopFlag()
        self.recalling = Recalling(
            recall, JetStreamProposals(nc, topology, sealer), clock, lambda: stop.is_set, cache
        )
        super().__init__(
            "retrieve",
            self.recalling,
            DeadLetters(nc.jetstream(), topology, "retrieve", metrics),
            owns=False,
            traced=False,
        )


async def build(
    settings: Located,
    stack: AsyncExitStack,
    embedder: Embedder | None = None,
    *,
    metrics: Metrics | None = None,
) -> StopsHandler:
    """Connect, open the read model for recall, bind the durable ``retrieve`` consumer (``embedder``:
    the one ``NOEMA_EMBEDDER`` names unless given)."""
    # Read-only; it recalls for observations of every workspace (each query names its workspace).
    pool = await open_pool(
        settings,
        stack,
        "reader",
        app="noema-recall",  # its name in pg_stat_activity since it was the recall adapter's default
        workspace=ALL_WORKSPACES,
        max_size=2,
        create=RecallStore.create_pool,
    )
    embedder = embedder or await start_embedder(settings, pool)
    recall = Recall(await RecallStore.open(pool), embedder)
    nc, _, topology = await open_bus(settings, stack, "noema-retrieve")
    durable = topology.durable("retrieve")
    # Only observations from now on: recalling for the whole history would be stale work.
    puller = await durable_puller(
        nc,
        topology.observation_stream,
        durable,
        topology.stored_observations_only,
        32,
        # A crashed retrieve's observations come back after this: a batch takes seconds, not more.
        ack_wait=30.0,
        max_ack_pending=1_000,
        deliver_policy=DeliverPolicy.NEW,
    )
    stopping = StopFlag()
    cache = None
    if embedder is not None and recall.vectors_available:
        cache = JetStreamVectorCache(nc, topology, embedder.name, embedder.dimensions)
        # The embed worker waits for the vectors of observations' memories while this mark is fresh.
        marking = asyncio.create_task(cache.announce_producer())

        stack.push_async_callback(cancel_and_wait, marking)
    handler = RetrieveHandler(
        nc, recall, topology, stopping=stopping, cache=cache, sealer=sealer(pool), metrics=metrics
    )
    return StopsHandler(PullWorker("retrieve", puller, handler, 32, metrics=metrics), stopping)
