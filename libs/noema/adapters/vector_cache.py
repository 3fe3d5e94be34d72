"""Vectors computed recently, shared between processes so that a text is embedded once.

The retrieve worker embeds each new observation as the passage its memory will be (to recall with
it); the embed worker then needs the very same vector for that memory. Embedding is the costliest
step of understanding (tens of milliseconds of CPU per text), so the first worker to compute a vector
leaves it here and the second one takes it.

Which of the two computes a vector is settled by who gets there first, with one nudge: retrieve
marks itself alive in the cache (:meth:`JetStreamVectorCache.mark_producer`), and while that mark is fresh the
embed worker waits a while for the vectors of observations' memories instead of computing them at the
same moment (:func:`noema.application.vectors.passage_vectors`). Without the nudge, a burst has both workers
embedding the same texts in lockstep.

The cache is a JetStream stream in memory (``<PREFIX>_VECTORS``, one message per subject
``<prefix>.vec.<key>``, kept for an hour, bounded in size, oldest dropped first). ``key`` hashes the
model and the exact text, so a vector is found only for the same text under the same model. It is
never the source of truth — the vectors that count are the ``memory.embedded`` events — so every
failure to read or write it (stream missing, server away) is a miss: the caller computes the vector
itself.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import hashlib
import math
import time
from collections.abc import Sequence

import structlog
from nats.aio.client import Client as NATS
from nats.errors import Error as NatsError
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig

from noema.topology import Topology

__all__ = ["VECTOR_CACHE_AGE_S", "VECTOR_CACHE_BYTES", "JetStreamVectorCache", "vector_stream_config"]

log = structlog.get_logger("noema.vector_cache")

VECTOR_CACHE_AGE_S = 3600.0
"""How long a cached vector is kept: long enough for the embed worker to catch up with retrieve."""
VECTOR_CACHE_BYTES = 256 * 1024 * 1024
"""Upper bound of the cache (about 150,000 vectors of 384 dimensions); the oldest go first."""
READ_TIMEOUT_S = 1.0
PRODUCER_FRESH_S = 60.0
"""A producer's mark older than this means it is gone (it renews the mark every few seconds)."""


def vector_stream_config(topology: Topology, replicas: int = 1) -> StreamConfig:
    """The cache stream's configuration (created by :func:`noema.adapters.jetstream.ensure_streams`)."""
    return StreamConfig(
        name=topology.vector_stream,
        subjects=[topology.vector_subjects],
        description="Noema vector cache: recent passage vectors by model and text (not a source of truth)",
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.MEMORY,
        max_age=VECTOR_CACHE_AGE_S,
        max_bytes=VECTOR_CACHE_BYTES,
        max_msgs_per_subject=1,
        discard=DiscardPolicy.OLD,
        duplicate_window=120.0,  # the server's own default, said so that a check finds no difference
        allow_direct=True,
        num_replicas=replicas,
    )


def cache_key(model: str, document: str) -> str:
    """The subject token of ``document``'s passage vector under ``model``."""
    return hashlib.sha256(f"{model}\x00passage\x00{document}".encode()).hexdigest()[:40]


class JetStreamVectorCache:
    """Get and put passage vectors of one model (``dimensions`` floats each)."""

    def __init__(self, nc: NATS, topology: Topology, model: str, dimensions: int) -> None:
        self._nc = nc
        self._topology = topology
        self._model = model
        self._size = dimensions * 4

    async def get_many(self, documents: Sequence[str]) -> list[list[float] | None]:
        """The cached vector of each document, or None where there is none."""
        return list(await asyncio.gather(*(self._get(d) for d in documents)))

    async def put_many(self, documents: Sequence[str], vectors: Sequence[Sequence[float]]) -> None:
        """Leave these vectors for the other workers (best effort: nothing waits for the server)."""
        for document, vector in zip(documents, vectors, strict=True):
            data = array.array("f", vector).tobytes()
            subject = self._topology.vector_subject(cache_key(self._model, document))
            with contextlib.suppress(NatsError, OSError):
                await self._nc.publish(subject, data)

    async def mark_producer(self, now: float) -> None:
        """Say that a worker computing this model's vectors for every new observation is running."""
        with contextlib.suppress(NatsError, OSError):
            await self._nc.publish(self._producer_subject, f"{now:.3f}".encode())

    async def producer_alive(self, now: float) -> bool:
        """Whether such a worker said so within :data:`PRODUCER_FRESH_S`."""
        data = await self._read(self._producer_subject)
        try:
            return data is not None and now - float(data) < PRODUCER_FRESH_S
        except ValueError:
            return False

    async def announce_producer(self, interval_s: float = PRODUCER_FRESH_S / 4) -> None:
        """Renew the producer's mark every ``interval_s`` until cancelled (run it as a task)."""
        while True:
            await self.mark_producer(time.time())
            await asyncio.sleep(interval_s)

    @property
    def _producer_subject(self) -> str:
        model = hashlib.sha256(self._model.encode()).hexdigest()[:16]
        return self._topology.vector_subject(f"producer.{model}")

    async def _get(self, document: str) -> list[float] | None:
        data = await self._read(self._topology.vector_subject(cache_key(self._model, document)))
        if data is None or len(data) != self._size:  # a miss, or not one of ours
            return None
        vector = array.array("f", data).tolist()
        # Anything a publisher left of the right length is not yet a vector: NaN or infinity would
        # make its memory's embedding event refused downstream. Such an entry is a miss.
        return vector if all(map(math.isfinite, vector)) else None

    async def _read(self, subject: str) -> bytes | None:
        try:
            msg = await self._nc.request(
                f"$JS.API.DIRECT.GET.{self._topology.vector_stream}.{subject}", b"", timeout=READ_TIMEOUT_S
            )
        except (NatsError, OSError, TimeoutError) as exc:
            log.debug("vector cache unavailable", error=type(exc).__name__)
            return None
        return msg.data or None  # a miss is a status 404 without data
