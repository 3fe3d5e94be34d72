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

import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy

from noema.adapters.embedders import Embedder, EmbedderUnavailable
from noema.adapters.jetstream import DeadLetters, Outgoing, publish_batch
from noema.adapters.postgres.tenancy import ALL_WORKSPACES
from noema.adapters.postgres.voices import RecallFilters, RecallStore
from noema.adapters.pull import durable_puller
from noema.adapters.vector_cache import VectorCache
from noema.application.sealing import Sealer
from noema.application.search import Recall, SearchResult
from noema.application.vectors import passage_vectors
from noema.domain.attention import memory_id_for
from noema.domain.documents import observation_document
from noema.ids import derive_id
from noema.runtime.embedding import start_embedder
from noema.runtime.metrics import Metrics
from noema.runtime.settings import Located
from noema.runtime.stopping import StopFlag, StopsHandler, release
from noema.runtime.tasks import cancel_and_wait
from noema.runtime.topology import Topology
from noema.runtime.wiring import open_bus, open_pool, sealer
from noema.runtime.worker import PullWorker, decode_each
from noema_events import (
    ObservationRecorded,
    RecallProposed,
    RecallProposedPayload,
    encode_event,
)

__all__ = ["CHUNK", "CONTENT_CHARS", "MIN_SCORE", "PROPOSALS", "RetrieveHandler", "build"]

log = structlog.get_logger("noema.retrieve")

PROPOSALS = 3
"""Recalled memories proposed per observation."""
MIN_SCORE = 0.3
"""Recalls scoring below this are not worth attention's time."""
CONTENT_CHARS = 500
"""How much of a recalled memory a proposal carries (attention's context relevance and gist)."""
DEPTH = 12
"""Hits asked of each recall voice (a search asks 50): a proposal is one of the best three, and
every further candidate costs database and scoring work (docs/benchmarks.md, *Under load*)."""
TEXT_TERMS = 8
"""The text voice matches an observation on its eight rarest words, not all of them: a whole
observation's ordinary words otherwise match most of its workspace, and scoring those matches was
most of a recall's database time (``python -m bench.recall_cost``; docs/benchmarks.md)."""
CHUNK = 8
"""Observations embedded per call: the unit after which a stop is honoured (well under a second)."""


class RetrieveHandler:
    """Recall for each observation of a batch; publish the proposals; ack."""

    def __init__(
        self,
        nc: NATS,
        recall: Recall,
        topology: Topology,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        stopping: StopFlag | None = None,
        cache: VectorCache | None = None,
        sealer: Sealer | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self._nc = nc
        self._dead_letters = DeadLetters(nc.jetstream(), topology, "retrieve", metrics)
        self._cache = cache
        self._sealer = sealer
        self._recall = recall
        self._topology = topology
        self._clock = clock
        self._stopping = stopping or StopFlag()

    def proposals(
        self, obs: ObservationRecorded, results: list[SearchResult], now: datetime
    ) -> list[RecallProposed]:
        """The candidates for one observation (its own memory excluded), ids derived from both."""
        own = memory_id_for(obs.id)
        out = []
        for r in results:
            if r.id == own or r.score < MIN_SCORE:
                continue
            out.append(
                RecallProposed(
                    id=derive_id("recall.proposed", obs.id, r.id),
                    workspace=obs.workspace,
                    mind=obs.mind,
                    occurred_at=now,
                    causation_id=obs.id,
                    correlation_id=obs.correlation_id,
                    actor="retrieve",
                    payload=RecallProposedPayload(
                        memory_id=r.id,
                        observation_id=obs.id,
                        query=obs.payload.content[:500],
                        score=round(r.score, 6),
                        importance=float(r.memory.get("importance", 0.5)),
                        credibility=float(r.memory.get("credibility", 0.8)),
                        components={k: round(v, 6) for k, v in r.components.items()},
                        content=r.content[:CONTENT_CHARS],
                        subjects=list(obs.payload.subjects),
                    ),
                )
            )
        return out[:PROPOSALS]

    async def __call__(self, msgs: list[Msg]) -> None:
        """Recall, publish proposals (stored before the ack), ack.

        Each observation is recalled with the vector of the passage its memory will be — computed
        once for a chunk of observations and left in the vector cache, where the embed worker finds
        it for that memory (so an observation is embedded once, not twice).

        Failures are :class:`noema.runtime.worker.PullWorker`'s to handle: lost servers are retried with
        backoff; an observation whose recall keeps failing is dead-lettered (``failed``) alone while
        the rest of its batch goes on. Undecodable observations are skipped here: attend, which owns
        the observation stream, dead-letters them. A stop asked for mid-batch ends it after the
        current chunk: the rest is nakked.
        """
        outgoing: list[Outgoing] = []
        done = len(msgs)
        chunks = [_observations(msgs[start : start + CHUNK]) for start in range(0, len(msgs), CHUNK)]
        # Pipelined: the next chunk is embedded (in a thread) while this one's recalls run in
        # PostgreSQL, so neither the cores' embedding nor the database waits for the other.
        upcoming = asyncio.ensure_future(self._vectors(chunks[0])) if chunks else None
        try:
            for k, observations in enumerate(chunks):
                if self._stopping.is_set or upcoming is None:
                    done = k * CHUNK
                    break
                vectors = await upcoming
                upcoming = (
                    asyncio.ensure_future(self._vectors(chunks[k + 1])) if k + 1 < len(chunks) else None
                )
                for obs, vector in zip(observations, vectors, strict=True):
                    results = await self._recall_for(obs, vector)
                    subject = self._topology.recall_subject(obs.workspace, obs.mind)
                    proposals = self.proposals(obs, results, self._clock())
                    if self._sealer is not None:
                        proposals = await self._sealer.seal(proposals)
                    outgoing += [Outgoing(subject, encode_event(p), p.id) for p in proposals]
        finally:
            if upcoming is not None and not upcoming.done():
                upcoming.cancel()  # a stop or a failure: the chunk is redelivered, embedded again
        if outgoing:
            await publish_batch(self._nc, self._nc.jetstream(), outgoing)
        for msg in msgs[:done]:
            await msg.ack()
        await release(msgs[done:])
        log.info("recalled", observations=done, proposals=len(outgoing))

    async def reject(self, msg: Msg, reason: str, kind: str) -> None:
        """Dead-letter an observation recall keeps failing for (it still became memory), and ack it."""
        await self._dead_letters.reject(msg, reason, kind)

    async def _vectors(self, observations: list[ObservationRecorded]) -> list[list[float] | None]:
        embedder = self._recall.embedder
        if not observations or embedder is None or not self._recall.vectors_available:
            return [None] * len(observations)
        documents = [observation_document(obs) for obs in observations]
        try:
            return list((await passage_vectors(embedder, documents, self._cache)).vectors)
        except EmbedderUnavailable as exc:
            # Recall goes on from text and graph while the embedding server is away; the embed
            # worker, which keeps its messages until the server is back, computes these vectors.
            log.warning("embedder unavailable; recalling without vectors", error=str(exc))
            return [None] * len(observations)

    async def _recall_for(self, obs: ObservationRecorded, vector: list[float] | None) -> list[SearchResult]:
        response = await self._recall.search(
            obs.payload.content,
            # The observation's own memory may already be projected: it must not be a candidate,
            # or it would take the top of every normalised voice and push real recalls down.
            RecallFilters(workspace=obs.workspace, mind=obs.mind, exclude_ids=(memory_id_for(obs.id),)),
            limit=PROPOSALS + 1,
            query_vector=vector,
            depth=DEPTH,
            text_terms=TEXT_TERMS,
            details=False,
        )
        return response.results


def _observations(msgs: list[Msg]) -> list[ObservationRecorded]:
    # The undecodable are skipped: attend, which owns the observation stream, dead-letters them.
    return [obs for _, obs in decode_each(msgs).events if isinstance(obs, ObservationRecorded)]


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
        cache = VectorCache(nc, topology, embedder.name, embedder.dimensions)
        # The embed worker waits for the vectors of observations' memories while this mark is fresh.
        marking = asyncio.create_task(cache.announce_producer())

        stack.push_async_callback(cancel_and_wait, marking)
    handler = RetrieveHandler(
        nc, recall, topology, stopping=stopping, cache=cache, sealer=sealer(pool), metrics=metrics
    )
    return StopsHandler(PullWorker("retrieve", puller, handler, 32, metrics=metrics), stopping)
