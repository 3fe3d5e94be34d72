"""Contract of :class:`noema.ports.MemoryRecords` and the operator rules built on it: entering,
retracting, correcting and relating memories read alike from both adapters."""

from __future__ import annotations

import pytest

from noema.application import curation, upkeep
from noema.application.curation import KnowledgeEntry
from noema.application.upkeep import Conflict, NotFound, OperationError
from tests.contract.conftest import T0, Backend

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
