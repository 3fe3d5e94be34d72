"""An erased memory (docs/privacy.md) is refused by every operator change — correct, retract,
archive, restore, relate — with a conflict that says it was erased; and a correction of content about
a subject carries the subject, so an erasure of it finds the copy. Erasure itself is PostgreSQL's
(tests/integration/test_erasure.py): here the in-memory read model's row is marked as its projection
marks it."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

import pytest

from noema.adapters.memory import InMemoryEventStream, InMemoryKnowledge, InMemoryReads
from noema.application import curation, upkeep
from noema.errors import Conflict
from noema_events import MemoryCreated
from tests.support import T0, memory_created


@pytest.fixture
def knowledge() -> InMemoryKnowledge:
    return InMemoryKnowledge()


@pytest.fixture
def stream(knowledge: InMemoryKnowledge) -> InMemoryEventStream:
    return InMemoryEventStream(knowledge)


@pytest.fixture
def memories(knowledge: InMemoryKnowledge) -> InMemoryReads:
    return InMemoryReads(knowledge.tables, clock=lambda: T0)


async def _erased(stream: InMemoryEventStream, knowledge: InMemoryKnowledge) -> tuple[str, str]:
    gone, other = memory_created("Ann's phone is 555-0199"), memory_created("the deploy key rotates")
    await stream.publish([gone, other])
    row = knowledge.tables.memories[gone.payload.memory_id]
    row.update(status="erased", content="", erased_at=T0)  # as content.erased's projection leaves it
    return gone.payload.memory_id, other.payload.memory_id


@pytest.mark.parametrize("action", ["retract", "archive", "restore", "correct", "relate"])
async def test_every_change_to_an_erased_memory_is_a_conflict_that_says_it_was_erased(
    stream: InMemoryEventStream, memories: InMemoryReads, knowledge: InMemoryKnowledge, action: str
) -> None:
    gone, other = await _erased(stream, knowledge)
    attempt: Coroutine[Any, Any, object]
    match action:
        case "correct":
            attempt = curation.correct(
                memories, stream, gone, actor="operator:root", reason="r", content="Ann: 555-0100", now=T0
            )
        case "relate":
            attempt = upkeep.relate(memories, stream, other, gone, "supports", now=T0)
        case _:
            change = getattr(curation, action)
            attempt = change(memories, stream, gone, actor="operator:root", reason="r", now=T0)
    with pytest.raises(Conflict, match=f"cannot {action} memory {gone}: it was erased"):
        await attempt


class _Links:
    async def subjects(self, workspace: str, key_id: str) -> list[str]:
        return ["person:4711"] if workspace == "acme" else []


async def test_a_correction_carries_the_subjects_of_what_it_corrects(
    stream: InMemoryEventStream, memories: InMemoryReads
) -> None:
    old = memory_created("Ann's phone is 555-0199")
    await stream.publish([old])
    receipt = await curation.correct(
        memories, stream, old.payload.memory_id, actor="operator:root", reason="r",
        content="Ann's phone is 555-0100", now=T0, links=_Links(),
    )  # fmt: skip
    [created] = [e for e in stream.events if isinstance(e, MemoryCreated) and e.id in receipt.events]
    assert created.payload.subjects == ["person:4711"]
