"""``why`` as an agent asks it, over the in-memory read model: only the caller's workspace; in
strict mode what the caller's role may not read is a bare step (or not found, when it is the id
asked about); other agents' notes are never shown."""

from __future__ import annotations

import pytest

from noema.application.access import Caller
from noema.application.agent_lineage import why_for
from noema.application.audit_views import Why
from noema.errors import NotFound
from tests.unit.test_audit_questions_in_memory import records
from tests.unit.test_knowledge_in_memory import ALICE, BOB, OPERATOR, World, world

__all__ = ["world"]  # the fixture, imported for pytest

GLOBEX = Caller("globex", "carol", "engineer")


async def agent_why(w: World, caller: Caller, ref: str) -> Why:
    return await why_for(records(w), w.k.access_control, caller, ref)


def event_types(found: Why) -> list[str]:
    return [s.event.type if s.event else s.kind for s in found.steps]


async def test_an_agent_sees_the_whole_chain_of_its_workspace_in_compatible_mode(world: World) -> None:
    old = await world.k.propose_fact(ALICE, "ops", "deploy-day", "Deploys happen on Fridays")
    await world.k.propose_fact(BOB, "ops", "deploy-day", "Deploys happen on Tuesdays")
    found = await agent_why(world, ALICE, old.memory_id)
    assert event_types(found) == [
        "fact.proposed.v2",
        "fact.proposed.v2",
        "memory.superseded.v1",
        "conflict.recorded.v1",
    ]


async def test_an_id_of_another_workspace_is_not_found_without_saying_where_it_is(world: World) -> None:
    elsewhere = await world.k.propose_fact(GLOBEX, "ops", "deploy-day", "Globex deploys on Mondays")
    with pytest.raises(NotFound) as refused:
        await agent_why(world, ALICE, elsewhere.memory_id)
    assert "globex" not in str(refused.value)
    assert (await agent_why(world, GLOBEX, elsewhere.memory_id)).workspace == "globex"


async def test_strict_mode_bares_the_steps_of_a_domain_the_role_may_not_read(world: World) -> None:
    pager = await world.k.propose_fact(OPERATOR, "ops", "pager", "The pager rotates weekly")
    secret = await world.k.propose_fact(OPERATOR, "security", "vault", "The vault key rotates monthly")
    await world.k.propose_policy(
        OPERATOR, "security", "Rotate the pager key with the vault key", source_fact_ids=[pager.memory_id]
    )
    await world.k.set_access_mode(OPERATOR, "strict", reason="confidential")
    await world.k.set_grant(OPERATOR, "engineer", "ops", "read")

    found = await agent_why(world, ALICE, pager.memory_id)
    everything = await agent_why(world, OPERATOR, pager.memory_id)
    assert [s.id for s in found.steps] == [s.id for s in everything.steps], "the tree keeps its shape"
    bare = [s for s in found.steps if s.event is None]
    assert [(s.kind, s.decision) for s in bare] == [("cause", None)] * 2, "the policy and its action"
    assert event_types(found) == ["fact.proposed.v2", "operator.action.v1", "cause", "cause"]
    with pytest.raises(NotFound):
        await agent_why(world, ALICE, secret.memory_id)
    assert (await agent_why(world, OPERATOR, secret.memory_id)).subject == "fact", "operators see all"


async def test_another_agents_notes_are_not_shown(world: World) -> None:
    await world.k.update_my_notes(BOB, "bob's private plan")
    [notes] = [e for e in world.stream.events if e.type == "notes.updated.v1"]
    with pytest.raises(NotFound):
        await agent_why(world, ALICE, notes.id)
    [step] = (await agent_why(world, BOB, notes.id)).steps
    assert step.event is not None
    assert step.event.payload["notes"] == "bob's private plan"
