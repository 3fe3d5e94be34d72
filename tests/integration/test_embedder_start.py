"""A worker pointed at an embedding server it cannot use — a wrong URL, a wrong model, vectors of
another dimension count stored under the model's name — exits 2 saying what to fix, before it binds
its consumer (so it has taken no message)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import UTC, datetime

import pytest
from nats.js.errors import NotFoundError

from noema.adapters.jetstream import EventPublisher
from noema.application import upkeep
from noema.ids import new_id
from noema_events import MemoryCreated, MemoryCreatedPayload
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.embedding_server import MODEL, EmbeddingServer, embedding_server  # noqa: F401 (fixture)
from tests.faults.instance import Instance, temporary_root
from tests.support import assert_eventually

pytestmark = [pytest.mark.integration, pytest.mark.slow]


class Tiny:
    """Vectors of 8 dimensions stored under the server's model name: another space, same name."""

    name = MODEL
    dimensions = 8

    def embed_passages(self, texts: object) -> list[list[float]]:
        return [[1.0] + [0.0] * 7 for _ in texts]  # type: ignore[attr-defined]

    def embed_query(self, text: str) -> list[float]:
        return [1.0] + [0.0] * 7


def _run(h: Harness, module: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA_")}
    return subprocess.run(
        [sys.executable, "-m", module],
        env={**base, **h.settings.to_env(), "NOEMA_LOG_FORMAT": "json", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


async def _consumer_absent(h: Harness, worker: str) -> None:
    stream = h.topology.event_stream if worker == "embed" else h.topology.observation_stream
    with pytest.raises(NotFoundError):
        await h.js.consumer_info(stream, h.topology.durable(worker))


@pytest.mark.parametrize("module", ["noema_embed", "noema_retrieve"])
@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        ({"NOEMA_EMBEDDER": "/v2"}, "must end where /embeddings follows (often /v1)"),
        ({"NOEMA_EMBEDDER_MODEL": "text-embedding-3-small"}, "does not serve model 'text-embedding-3-small'"),
        ({"NOEMA_EMBEDDER_DIMENSIONS": "1024"}, "not NOEMA_EMBEDDER_DIMENSIONS=1024"),
    ],
)
async def test_a_worker_refuses_a_server_it_cannot_use(
    harness: Harness,
    embedding_server: EmbeddingServer,  # noqa: F811
    module: str,
    wrong: dict[str, str],
    says: str,
) -> None:
    env = embedding_server.env()
    if wrong.get("NOEMA_EMBEDDER") == "/v2":
        wrong = {"NOEMA_EMBEDDER": env["NOEMA_EMBEDDER"].removesuffix("/v1") + "/v2"}
    done = await asyncio.to_thread(_run, harness, module, **{**env, **wrong})
    assert done.returncode == 2, done.stderr[-2000:]
    assert says in done.stderr
    assert "Traceback" not in done.stderr
    await _consumer_absent(harness, module.removeprefix("noema_"))


async def test_vectors_of_another_dimension_count_under_the_model_s_name_are_refused(
    harness: Harness,
    embedding_server: EmbeddingServer,  # noqa: F811
) -> None:
    await harness.start(build_projector)
    publisher = EventPublisher(harness.nc, harness.topology)
    mid = new_id()
    created = MemoryCreated(
        id=new_id(),
        workspace="acme",
        mind="ops",
        occurred_at=datetime.now(UTC),
        correlation_id=mid,
        actor="test",
        payload=MemoryCreatedPayload(memory_id=mid, kind="semantic", epistemic_kind="fact", content="a fact"),
    )
    await publisher.publish([created])
    await upkeep.embed_memories(
        publisher, Tiny(), [(mid, "acme", "ops", "a fact", created.id)], datetime.now(UTC)
    )

    async def stored() -> bool:
        return bool(
            await harness.pool.fetchval("SELECT count(*) FROM memory_embeddings WHERE model = $1", MODEL)
        )

    await assert_eventually(stored)
    done = await asyncio.to_thread(_run, harness, "noema_embed", **embedding_server.env())
    assert done.returncode == 2, done.stderr[-2000:]
    assert "gives 384-dimensional vectors, but the vectors stored under that name have 8" in done.stderr
    assert "NOEMA_EMBEDDER_MODEL" in done.stderr
    await _consumer_absent(harness, "embed")


async def test_up_refuses_a_model_the_server_does_not_serve_before_starting_any_worker(
    embedding_server: EmbeddingServer,  # noqa: F811
) -> None:
    with temporary_root() as root:
        instance = Instance(root, {**embedding_server.env(), "NOEMA_EMBEDDER_MODEL": "nomic-embed-text"})
        instance.start()
        assert instance.up is not None
        try:
            code = await asyncio.to_thread(instance.up.wait, 180)
        finally:
            instance.force_stop()
        assert code == 2, instance.tail()
        [refused] = instance.events("embedder unusable")
        assert "does not serve model 'nomic-embed-text'" in refused["error"]
        assert "NOEMA_EMBEDDER_MODEL" in refused["error"]
        assert not instance.events("service started"), "a worker was started"
