"""The operators' reads' own rules (:mod:`noema.application.reads`) over the in-memory adapter
(:class:`noema.adapters.memory.InMemoryReads`): what a listing leaves in, which attention decision a
source observation shows, how event types are named. What both adapters answer alike is
tests/contract/test_memory_reads.py."""

from __future__ import annotations

from datetime import timedelta

import pytest

from noema.adapters.memory import InMemoryEventStream, InMemoryKnowledge, InMemoryReads
from noema.application import curation, reads
from noema.application.views import AuditQuery, ListQuery, TimelineQuery
from noema.errors import InvalidQuery
from noema_events import AttentionDecided, AttentionDecision
from tests.support import T0, attention_decided, memory_created


@pytest.fixture
def knowledge() -> InMemoryKnowledge:
    return InMemoryKnowledge()


@pytest.fixture
def stream(knowledge: InMemoryKnowledge) -> InMemoryEventStream:
    return InMemoryEventStream(knowledge)


@pytest.fixture
def memories(knowledge: InMemoryKnowledge) -> InMemoryReads:
    return InMemoryReads(knowledge.tables, clock=lambda: T0)


def _decided(memory_id: str, admitted: bool, score: float) -> AttentionDecided:
    return attention_decided(
        [AttentionDecision(candidate_id="obs-1", memory_id=memory_id, admitted=admitted, score=score)]
    )


async def test_listings_and_the_timeline_show_expired_and_inactive_memories_too(
    stream: InMemoryEventStream, memories: InMemoryReads
) -> None:
    expired = memory_created("No longer valid", valid_until=T0 - timedelta(days=1))
    retracted = memory_created("Wrong")
    await stream.publish([expired, retracted])
    await curation.retract(
        memories, stream, retracted.payload.memory_id, actor="operator:root", reason="wrong", now=T0
    )
    both = {expired.payload.memory_id, retracted.payload.memory_id}
    listed = await reads.list_memories(memories, ListQuery(workspace="acme"))
    assert {m.id for m in listed.items} == both
    timeline = await reads.timeline(memories, TimelineQuery(workspace="acme"))
    assert {m.id for m in timeline.items} == both
    active = await reads.list_memories(memories, ListQuery(workspace="acme", status="active"))
    assert [m.id for m in active.items] == [expired.payload.memory_id], "expired is not a status"


async def test_a_source_observation_shows_the_newest_decision_about_it(
    stream: InMemoryEventStream, memories: InMemoryReads
) -> None:
    made = memory_created("The pager went off", source_observation_ids=["obs-1"])
    memory_id = made.payload.memory_id
    first, again = _decided(memory_id, False, 0.4), _decided(memory_id, True, 0.8)
    await stream.publish([made, first, again])
    detail = await reads.memory_detail(memories, memory_id)
    (source,) = detail.source_observations
    assert source.decision is not None
    assert (source.id, source.decision["event_id"], source.decision["admitted"]) == ("obs-1", again.id, True)


def test_an_event_type_is_named_with_or_without_its_version() -> None:
    assert reads.event_types("operator.action") == ["operator.action.v1"]
    assert reads.event_types("operator.action.v1") == ["operator.action.v1"]
    for unknown in ("operator.action.v9", "operator.actions"):
        with pytest.raises(InvalidQuery, match=r"unknown event type .*one of: .*attention\.decided"):
            reads.event_types(unknown)


async def test_a_full_audit_page_points_at_the_next_and_the_last_does_not(
    stream: InMemoryEventStream, memories: InMemoryReads
) -> None:
    await stream.publish([memory_created(f"Memory {i}") for i in range(3)])
    first = await reads.audit(memories, AuditQuery(limit=2))
    assert [e.seq for e in first.items] == [3, 2]
    assert first.next_before == 2
    last = await reads.audit(memories, AuditQuery(limit=2, before=first.next_before))
    assert ([e.seq for e in last.items], last.next_before) == ([1], None)
    with pytest.raises(InvalidQuery, match="unknown event type"):
        await reads.audit(memories, AuditQuery(type="memory.forgotten"))
