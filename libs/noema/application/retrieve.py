"""The retrieve worker's decision: for each new observation, hybrid recall in its workspace and
mind, the best memories proposed to attention as ``recall.proposed`` candidates (requirements: see
:mod:`noema_retrieve.service`) — over the recall voices, the vector cache and a sink for the
proposals (ports), without any transport. The NATS consumer around it
(:class:`noema.runtime.consumer.EventConsumer`) decodes, acks and releases what a stop left.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Protocol

import structlog

from noema.application.deliveries import Delivered
from noema.application.search import Recall, SearchResult
from noema.application.vectors import passage_vectors
from noema.domain.attention import memory_id_for
from noema.domain.documents import observation_document
from noema.ids import derive_id
from noema.ports import RecallFilters, VectorCache
from noema_events import Event, ObservationRecorded, RecallProposed, RecallProposedPayload

__all__ = ["CHUNK", "CONTENT_CHARS", "MIN_SCORE", "PROPOSALS", "ProposalSink", "Recalling"]

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


class ProposalSink(Protocol):
    """Where proposals go: the candidates' (observation) stream, on each mind's recall subject
    (:class:`noema.adapters.attend_log.JetStreamProposals`; in memory, the in-memory candidates)."""

    async def propose(self, proposals: Sequence[RecallProposed]) -> None:
        """Store ``proposals`` (content sealed) all or none, in order."""
        ...


class Recalling:
    """Recall for each observation of a batch and propose the best memories."""

    def __init__(
        self,
        recall: Recall,
        sink: ProposalSink,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        stopping: Callable[[], bool] = lambda: False,
        cache: VectorCache | None = None,
    ) -> None:
        self._recall = recall
        self._sink = sink
        self._clock = clock
        self._stopping = stopping
        self._cache = cache

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

    async def __call__(self, batch: Sequence[Delivered[Event]], through: int) -> int | None:
        """Recall, store the proposals; returns how many of ``batch`` were handled (None: all).

        Each observation is recalled with the vector of the passage its memory will be — computed
        once for a chunk of observations and left in the vector cache, where the embed worker finds
        it for that memory (so an observation is embedded once, not twice). A stop asked for
        mid-batch ends it after the current chunk.
        """
        proposed: list[RecallProposed] = []
        done: int | None = None
        chunks = [_observations(batch[start : start + CHUNK]) for start in range(0, len(batch), CHUNK)]
        # Pipelined: the next chunk is embedded (in a thread) while this one's recalls run in
        # PostgreSQL, so neither the cores' embedding nor the database waits for the other.
        upcoming = asyncio.ensure_future(self._vectors(chunks[0])) if chunks else None
        try:
            for k, observations in enumerate(chunks):
                if self._stopping() or upcoming is None:
                    done = k * CHUNK
                    break
                vectors = await upcoming
                upcoming = (
                    asyncio.ensure_future(self._vectors(chunks[k + 1])) if k + 1 < len(chunks) else None
                )
                for obs, vector in zip(observations, vectors, strict=True):
                    results = await self._recall_for(obs, vector)
                    proposed += self.proposals(obs, results, self._clock())
        finally:
            if upcoming is not None and not upcoming.done():
                upcoming.cancel()  # a stop or a failure: the chunk is redelivered, embedded again
        if proposed:
            await self._sink.propose(proposed)
        log.info("recalled", observations=len(batch) if done is None else done, proposals=len(proposed))
        return done

    async def _vectors(self, observations: list[ObservationRecorded]) -> list[list[float] | None]:
        embedder = self._recall.embedder
        if not observations or embedder is None or not self._recall.vectors_available:
            return [None] * len(observations)
        documents = [observation_document(obs) for obs in observations]
        try:
            return list((await passage_vectors(embedder, documents, self._cache)).vectors)
        except ConnectionError as exc:  # a remote embedder that does not answer (EmbedderUnavailable)
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


def _observations(batch: Sequence[Delivered[Event]]) -> list[ObservationRecorded]:
    return [d.event for d in batch if isinstance(d.event, ObservationRecorded)]
