"""The projector's decision without transport (:class:`noema.application.projector.Projecting`): the
position that only advances and continues the stream, the skip that is dead-lettered before the
position moves past it, and the erasure's observations deleted once it is applied — what
:class:`noema_projector.worker.ProjectorHandler` does around NATS and PostgreSQL
(tests/integration/test_poison.py, test_claims.py, test_projector_erasing.py), here over the
in-memory read model. (A refused event on the whole pipeline: tests/contract/test_pipeline_scenarios.py.)"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from noema.adapters.memory import InMemoryKnowledge
from noema.application.deliveries import Delivered
from noema.application.projector import Projecting, StreamGap
from noema.errors import WorkerFatal
from noema.ports import Projected
from noema_events import ContentErased
from noema_events.catalog import ContentErasedPayload
from tests.support import T0, envelope, memory_created


def stored(seq: int, content: str = "the deploy key rotates on Fridays") -> Delivered[Projected]:
    event = memory_created(content, memory_id=f"m-{seq}")
    return Delivered(seq, Projected(seq, "noema.evt.acme.ops.memory_created", event))


class Letters:
    """Dead letters in memory, each with the read model's position when it was written."""

    def __init__(self, read_model: InMemoryKnowledge) -> None:
        self._read_model = read_model
        self.written: list[tuple[int, str, str, int]] = []

    async def dead_letter(self, seq: int, reason: str, kind: str) -> None:
        self.written.append((seq, reason, kind, self._read_model.tables.position))


class Erased:
    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    async def delete(self, erasures: Sequence[ContentErased]) -> int:
        self.asked.append([e.payload.erasure_id for e in erasures])
        return 0


def projector(position: int = 0) -> tuple[Projecting, InMemoryKnowledge, Letters, Erased]:
    read_model, erased = InMemoryKnowledge(), Erased()
    letters = Letters(read_model)
    read_model.tables.position = position
    return Projecting(read_model, letters, position, erased), read_model, letters, erased


async def test_a_batch_is_applied_and_the_position_moves_to_the_last_sequence_it_covers() -> None:
    projecting, read_model, letters, _ = projector()
    # seq 3 did not decode: the consumer dead-lettered it, the batch still covers it
    await projecting([stored(1), stored(2)], 3)
    assert set(read_model.tables.memories) == {"m-1", "m-2"}
    assert projecting.position == read_model.tables.position == 3
    assert letters.written == []


async def test_redelivered_sequences_are_not_applied_again_and_a_gap_stops_the_worker() -> None:
    projecting, _, _, _ = projector(position=5)
    assert projecting.unapplied([4, 5, 6, 7]) == [6, 7]
    assert projecting.unapplied([3, 4, 5]) == []
    with pytest.raises(StreamGap, match="expected seq 6, got 8") as gap:
        projecting.unapplied([5, 8])
    assert isinstance(gap.value, WorkerFatal)  # the worker stops; its restart resumes from 5


async def test_a_skipped_event_is_dead_lettered_before_the_position_moves_past_it() -> None:
    projecting, read_model, letters, _ = projector(position=5)
    await projecting.skip(6, "handler failed: KeyError", "failed")
    assert letters.written == [(6, "handler failed: KeyError", "failed", 5)]
    assert projecting.position == read_model.tables.position == 6
    await projecting.skip(6, "handler failed again", "failed")  # applied already: nothing
    assert len(letters.written) == 1
    with pytest.raises(StreamGap, match="cannot skip seq 9"):
        await projecting.skip(9, "too far", "failed")
    assert projecting.position == 6


async def test_an_erasure_has_its_observations_deleted_once_it_is_applied() -> None:
    projecting, _, _, erased = projector()
    erasure = ContentErased(
        **envelope("acme", "", T0),
        payload=ContentErasedPayload(
            erasure_id="er-1", scope="observation", target="obs-1", reason="asked", observation_seqs=[4]
        ),
    )
    await projecting([stored(1), Delivered(2, Projected(2, "noema.evt.acme._.content_erased", erasure))], 2)
    assert erased.asked == [["er-1"]]
    await projecting([stored(3)], 3)
    assert erased.asked == [["er-1"]]
