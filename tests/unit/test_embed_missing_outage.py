"""``embed-missing`` through an embedder that is away for a while: it waits and goes on (every memory
gets its vector, in requests of the embedder's ``chunk``), and gives up only past its patience."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from noema.adapters.embedders import EmbedderUnavailable
from noema.adapters.memory import InMemoryEventStream, InMemoryKnowledge, InMemoryReads
from noema.application import upkeep
from tests.support import T0, memory_created


class Flaky:
    """Away for its first ``down`` calls, then answering; takes ``chunk`` texts at a time."""

    name = "flaky/e5"
    dimensions = 3
    chunk = 4

    def __init__(self, down: int) -> None:
        self.down = down
        self.calls: list[int] = []

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        if self.down:
            self.down -= 1
            raise EmbedderUnavailable("embedding server http://e/v1 unavailable (ConnectionRefusedError)")
        return [[1.0, 0.0, 0.0] for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        return [1.0, 0.0, 0.0]


@pytest.fixture
def no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(upkeep, "OUTAGE_RETRY_S", 0.0)


async def test_embed_missing_waits_through_an_outage_and_embeds_everything(no_wait: None) -> None:
    knowledge = InMemoryKnowledge()
    stream = InMemoryEventStream(knowledge)
    reads = InMemoryReads(knowledge.tables, clock=lambda: T0)
    await stream.publish([memory_created(f"note {i}") for i in range(10)])
    embedder = Flaky(down=3)
    done = await upkeep.embed_missing(reads, stream, embedder, now=lambda: T0, batch=2)
    assert done == 10
    assert await reads.count_unembedded(embedder.name) == 0
    assert max(embedder.calls) == 4  # the embedder's chunk, not the smaller batch asked
    assert embedder.calls[:4] == [4, 4, 4, 4]  # the same texts, tried again


async def test_embed_missing_gives_up_past_its_patience(no_wait: None) -> None:
    knowledge = InMemoryKnowledge()
    stream = InMemoryEventStream(knowledge)
    reads = InMemoryReads(knowledge.tables, clock=lambda: T0)
    await stream.publish([memory_created("a note")])
    with pytest.raises(EmbedderUnavailable):
        await upkeep.embed_missing(reads, stream, Flaky(down=10**6), now=lambda: T0, patience_s=0.0)
