"""Contract of :class:`noema.ports.EventReads`: the audit copy of the stream read alike from both
adapters by reference (id, causation, correlation or payload), by causation and correlation, and by
range of sequences or times — what ``why`` and ``audit diff`` read."""

from __future__ import annotations

from datetime import timedelta

from noema.application.access import Caller
from noema.ids import new_id
from noema.ports import StreamPoint
from noema_events import (
    ConflictRecorded,
    ConflictRecordedPayload,
    MemorySuperseded,
    MemorySupersededPayload,
)
from tests.contract.conftest import T0, Backend
from tests.support import memory_created

MINUTE = timedelta(minutes=1)


def _ids(rows: list[dict[str, object]]) -> list[object]:
    return [r["id"] for r in rows]


async def test_events_are_found_by_reference_causation_correlation_and_payload(backend: Backend) -> None:
    memory, winner = new_id(), new_id()
    root = memory_created("The deploy key rotates on Fridays", memory_id=memory)
    superseded = MemorySuperseded(
        id=new_id(),
        workspace="acme",
        mind="ops",
        occurred_at=T0 + MINUTE,
        causation_id=root.id,
        correlation_id=root.id,
        actor="conflicts",
        payload=MemorySupersededPayload(memory_id=memory, superseded_by=winner, reason="conflict: recency"),
    )
    conflict = ConflictRecorded(
        id=new_id(),
        workspace="acme",
        occurred_at=T0 + MINUTE,
        causation_id=superseded.id,
        correlation_id=root.id,
        actor="conflicts",
        payload=ConflictRecordedPayload(conflict_id=new_id(), winner_id=winner, loser_id="x", rule="recency"),
    )
    elsewhere = memory_created("Seen in globex", workspace="globex", source_observation_ids=[memory])
    unrelated = memory_created("Unrelated", at=T0 + 2 * MINUTE)
    await backend.sink.publish([root, superseded, conflict, elsewhere, unrelated])
    reads = backend.records

    assert _ids(await reads.events_naming("acme", memory, 10)) == [root.id, superseded.id]
    assert _ids(await reads.events_naming(None, memory, 10)) == [root.id, superseded.id, elsewhere.id]
    assert _ids(await reads.events_naming("acme", root.id, 10)) == [root.id, superseded.id, conflict.id]
    assert _ids(await reads.events_naming("acme", root.id, 2)) == [root.id, superseded.id]
    assert await reads.events_naming("acme", memory[:8], 10) == [], "a part of an id is no reference"
    [row] = await reads.events_naming("acme", conflict.id, 10)
    assert (row["type"], row["causation_id"], row["correlation_id"]) == (
        "conflict.recorded.v1",
        superseded.id,
        root.id,
    )
    assert isinstance(row["payload"], str)

    assert _ids(await reads.events_with_ids("acme", [conflict.id, "nope", elsewhere.id, root.id])) == [
        root.id,
        conflict.id,
    ]
    assert _ids(await reads.correlation_starts("acme", [root.id, unrelated.id, "nope"])) == [
        root.id,
        unrelated.id,
    ]
    assert _ids(await reads.events_caused_by("acme", [root.id, superseded.id], 10)) == [
        superseded.id,
        conflict.id,
    ]
    assert _ids(await reads.events_caused_by("acme", [root.id, superseded.id], 1)) == [superseded.id]
    assert await reads.events_caused_by("globex", [root.id], 10) == []

    assert await reads.reference_workspaces(root.id) == ["acme"]
    assert await reads.reference_workspaces(memory) == ["acme"], "a memory's id"
    assert await reads.reference_workspaces(elsewhere.payload.memory_id) == ["globex"]
    assert await reads.reference_workspaces(winner) == [], "named in a payload only: not an indexed reference"


async def test_events_between_two_points_are_read_by_sequence_or_by_time(backend: Backend) -> None:
    made = [memory_created(f"Memory {i}", at=T0 + i * MINUTE) for i in range(4)]
    other = memory_created("Another workspace's", workspace="globex", at=T0 + 2 * MINUTE)
    last = await backend.sink.publish([*made, other])
    first = last - 4  # the sequence of made[0]
    types = ["memory.created.v1"]
    reads = backend.records

    async def between(
        after: StreamPoint, through: StreamPoint, workspace: str | None = "acme"
    ) -> list[object]:
        return _ids(await reads.events_between(workspace, types, after, through, 10))

    assert await between(StreamPoint(seq=first), StreamPoint(seq=first + 2)) == [made[1].id, made[2].id]
    assert await between(StreamPoint(at=T0), StreamPoint(at=T0 + 2 * MINUTE)) == [made[1].id, made[2].id]
    assert await between(StreamPoint(seq=first), StreamPoint(at=T0 + 2 * MINUTE), None) == [
        made[1].id,
        made[2].id,
        other.id,
    ]
    assert await between(StreamPoint(seq=0), StreamPoint(seq=last)) == [m.id for m in made]
    assert _ids(await reads.events_between("acme", types, StreamPoint(seq=0), StreamPoint(seq=last), 2)) == [
        made[0].id,
        made[1].id,
    ]
    assert (
        _ids(
            await reads.events_between(
                "acme", ["operator.action.v1"], StreamPoint(seq=0), StreamPoint(seq=last), 9
            )
        )
        == []
    )


async def test_a_unique_prefix_names_a_memory_a_policy_or_an_event(backend: Backend) -> None:
    memory = new_id()
    created = memory_created("The deploy key rotates on Fridays", memory_id=memory)
    await backend.sink.publish([created])
    policy = await backend.knowledge().propose_policy(
        Caller("acme", "root", operator=True), "ops", "Deploy on Tuesdays"
    )
    reads = backend.records

    for full in (memory, policy, created.id):
        assert await reads.resolve_reference(full) == full
        assert await reads.resolve_reference(full[:8], "acme") == full
        assert await reads.resolve_reference(full[:8], "globex") is None  # another workspace's
    assert await reads.resolve_reference("00000000-dead") is None
    assert await reads.resolve_reference("abc") is None  # too short to be a prefix
