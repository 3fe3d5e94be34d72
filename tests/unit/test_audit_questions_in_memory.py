"""The audit questions over the in-memory read model, fed as the workers feed the real one: ``why``
follows an id through causation and correlation ids (a superseded fact back to the proposal that
beat it and the rule that decided; a memory back to its observation and on to its recalls), and
``audit diff`` lists exactly the changes between two points."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noema.adapters.memory import InMemoryReads
from noema.application import curation
from noema.application.audit_views import POINT_PATTERN, DiffQuery, Why, WhyStep
from noema.application.changes import audit_diff, stream_point
from noema.application.lineage import why
from noema.client import build_observation
from noema.domain.attention import AttentionConfig, decide_cycle, memory_id_for
from noema.errors import InvalidQuery, NotFound
from noema.ids import derive_id
from noema_events import FactProposed, RecallProposed, RecallProposedPayload
from tests.support import T0
from tests.unit.test_knowledge_in_memory import ALICE, BOB, OPERATOR, World, world

__all__ = ["world"]  # the fixture, imported for pytest


def records(w: World) -> InMemoryReads:
    """The operators' reads over the world's read model."""
    return InMemoryReads(w.reads.tables)


def tick(w: World) -> None:
    w.clock[0] += timedelta(minutes=1)


def _types(steps: Sequence[WhyStep]) -> list[str]:
    return [s.event.type if s.event else s.kind for s in steps]


def _step(found: Why, event_type: str) -> WhyStep:
    [step] = [s for s in found.steps if s.event and s.event.type == event_type]
    return step


async def test_why_a_superseded_fact_shows_its_proposal_the_rule_and_the_proposal_that_won(
    world: World,
) -> None:
    old = await world.k.propose_fact(ALICE, "ops", "deploy-day", "Deploys happen on Fridays")
    tick(world)
    new = await world.k.propose_fact(BOB, "ops", "deploy-day", "Deploys happen on Tuesdays")

    found = await why(records(world), old.memory_id)

    assert (found.subject, found.workspace, found.truncated) == ("fact", "acme", False)
    assert _types(found.steps) == [
        "fact.proposed.v2",
        "fact.proposed.v2",
        "memory.superseded.v1",
        "conflict.recorded.v1",
    ]
    proposal, winner, superseded, conflict = found.steps
    assert proposal.event
    assert proposal.event.payload["memory_id"] == old.memory_id
    assert (proposal.parent, proposal.event.actor) == (None, "alice")
    assert winner.event
    assert winner.event.payload["memory_id"] == new.memory_id
    # The supersession is caused by the winning fact's id: the correlation its proposal starts.
    assert (superseded.parent, superseded.link) == (winner.id, "correlation")
    assert superseded.event
    assert superseded.event.payload["superseded_by"] == new.memory_id
    assert (conflict.parent, conflict.link) == (winner.id, "causation")
    assert conflict.event
    assert conflict.event.payload["rule"] == "recency"
    assert conflict.event.payload["loser_id"] == old.memory_id


async def test_why_an_event_shows_what_it_caused_and_not_its_causes_other_effects(world: World) -> None:
    old = await world.k.propose_fact(ALICE, "ops", "deploy-day", "Deploys happen on Fridays")
    tick(world)
    new = await world.k.propose_fact(BOB, "ops", "deploy-day", "Deploys happen on Tuesdays")
    [proposal] = [
        e for e in world.stream.events if isinstance(e, FactProposed) and e.payload.memory_id == new.memory_id
    ]

    found = await why(records(world), proposal.id)

    assert found.subject == "event"
    assert _types(found.steps) == ["fact.proposed.v2", "memory.superseded.v1", "conflict.recorded.v1"]
    assert {s.parent for s in found.steps[1:]} == {proposal.id}
    assert old.memory_id not in {s.id for s in found.steps}


async def test_why_a_memory_shows_the_observation_and_attention_decision_and_its_later_recall(
    world: World,
) -> None:
    config = AttentionConfig()
    seen = build_observation("the deploy key rotates on Fridays", workspace="acme", mind="ops")
    await world.stream.publish(decide_cycle([seen], T0, config))
    key = memory_id_for(seen.id)
    question = build_observation("who rotates the deploy key this Friday?", workspace="acme", mind="ops")
    recall = RecallProposed(
        id=derive_id("recall.proposed", question.id, key),
        workspace="acme",
        mind="ops",
        occurred_at=T0,
        causation_id=question.id,
        correlation_id=question.correlation_id,
        actor="retrieve",
        payload=RecallProposedPayload(
            memory_id=key,
            observation_id=question.id,
            query=question.payload.content,
            score=0.9,
            components={"lexical": 0.6, "recency": 0.3},
            content=seen.payload.content,
        ),
    )
    await world.stream.publish(decide_cycle([question, recall], T0 + timedelta(minutes=1), config))

    found = await why(records(world), key)

    assert found.subject == "memory"
    by_id = {s.id: s for s in found.steps}
    origin = by_id[seen.id]
    assert origin.kind == "observation"
    assert origin.parent is None
    assert origin.decision
    assert origin.decision["admitted"]
    assert "salience" in origin.decision["components"]
    created = _step(found, "memory.created.v1")
    assert (created.parent, created.link) == (seen.id, "causation")
    # The recall: a step of its own, with attention's decision, under the observation it was for.
    proposal = by_id[recall.id]
    assert (proposal.kind, proposal.parent) == ("recall", question.id)
    assert proposal.decision
    assert proposal.decision["candidate_kind"] == "recall"
    retrieved = _step(found, "memory.retrieved.v2")
    assert retrieved.parent == recall.id
    assert retrieved.event
    assert retrieved.event.payload["components"]["lexical"] == 0.6
    assert by_id[question.id].kind == "observation"
    order = [s.id for s in found.steps]
    assert order.index(seen.id) < order.index(created.id) < order.index(recall.id) < order.index(retrieved.id)

    from_observation = await why(records(world), seen.id)
    assert from_observation.subject == "observation"
    assert created.id in {s.id for s in from_observation.steps}


async def test_why_refuses_an_unknown_id_and_resolves_a_memory_prefix(world: World) -> None:
    fact = await world.k.propose_fact(ALICE, "ops", "deploy-day", "Deploys happen on Fridays")
    with pytest.raises(NotFound, match="nothing is recorded about no-such-id"):
        await why(records(world), "no-such-id")
    with pytest.raises(NotFound, match="in workspace globex"):
        await why(records(world), fact.memory_id, "globex")
    assert (await why(records(world), fact.memory_id[:8])).id == fact.memory_id


async def test_audit_diff_lists_exactly_the_changes_between_two_points(world: World) -> None:
    before = await world.k.propose_fact(ALICE, "ops", "deploy-day", "Deploys happen on Fridays")
    start, since = len(world.stream.events), world.clock[0]
    tick(world)
    winner = await world.k.propose_fact(BOB, "ops", "deploy-day", "Deploys happen on Tuesdays")
    tick(world)
    entry = curation.KnowledgeEntry(workspace="acme", content="The on-call phone is 555-0100")
    now = world.clock[0]
    made = await curation.create_memory(world.stream, entry, actor="operator:root", reason="runbook", now=now)
    await curation.retract(
        records(world), world.stream, made.memory_id, actor="operator:root", reason="no", now=now
    )
    tick(world)
    await world.k.set_access_mode(OPERATOR, "strict", reason="audit")
    end, until = len(world.stream.events), world.clock[0]
    tick(world)
    await world.k.propose_fact(OPERATOR, "ops", "freeze", "The release freeze holds")

    found = await audit_diff(records(world), DiffQuery(from_=str(start), to=str(end)))

    kinds = {g.kind: [c.target for c in g.changes] for g in found.groups}
    [conflict] = kinds["conflict.recorded"]
    assert kinds == {
        "memory.created": [made.memory_id],
        "memory.retracted": [made.memory_id],
        "memory.superseded": [before.memory_id],
        "fact.proposed": [winner.memory_id],
        "conflict.recorded": [conflict],
        "access_mode.changed": ["acme"],
    }
    assert (found.first_seq, found.last_seq) == (start + 1, end)
    every = [e.seq for g in found.groups for c in g.changes for e in c.events]
    assert min(every) > start
    assert max(every) <= end
    [superseded] = next(g for g in found.groups if g.kind == "memory.superseded").changes
    assert [e.type for e in superseded.events] == ["memory.superseded.v1", "conflict.recorded.v1"]
    [entered] = next(g for g in found.groups if g.kind == "memory.created").changes
    assert [(e.type, e.actor) for e in entered.events] == [
        ("memory.created.v1", "operator:root"),
        ("operator.action.v1", "operator:root"),
    ]
    # The same two points written as times (compared with each event's occurred_at).
    by_time = await audit_diff(records(world), DiffQuery(from_=since.isoformat(), to=until.isoformat()))
    assert by_time.groups == found.groups


@pytest.mark.parametrize(
    "given", ["2026-03-01", "2026-03-01T09:30:00", "yesterday", "-3", "2026-13-01T00:00:00Z", "1e3"]
)
def test_a_point_is_a_sequence_or_a_time_with_its_zone(given: str) -> None:
    with pytest.raises(InvalidQuery, match="neither a stream sequence nor a time with its zone; give"):
        stream_point(given, "from")


def test_points_are_read_as_sequences_and_zoned_times() -> None:
    assert stream_point(" 42 ", "to").seq == 42
    at = stream_point("2026-03-01T09:30:00+01:00", "to").at
    assert at is not None
    assert at.isoformat() == "2026-03-01T08:30:00+00:00"


async def test_nothing_is_between_a_from_and_an_earlier_to(world: World) -> None:
    await world.k.propose_fact(ALICE, "ops", "deploy-day", "Deploys happen on Fridays")
    found = await audit_diff(records(world), DiffQuery(from_="2", to="1"))
    assert (found.groups, found.first_seq, found.last_seq) == ([], None, None)
    assert (await audit_diff(records(world), DiffQuery(from_="1", to="2"))).last_seq == 2


@settings(max_examples=300, deadline=None)
@given(st.from_regex(POINT_PATTERN, fullmatch=True))
def test_every_point_the_document_declares_is_read(given: str) -> None:
    point = stream_point(given, "from")
    assert (point.seq is None) != (point.at is None)
