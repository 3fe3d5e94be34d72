"""Reads as of a past sequence, on both adapters: the read model's history answers what the present
answered at that sequence — facts (one superseded since), policies, notes, grants and the access
mode, domains and a memory's record."""

from __future__ import annotations

from typing import Any

from noema.application.access import Caller
from noema.application.knowledge import Knowledge
from noema.ports import KnowledgeReadModel, MemoryReads
from tests.contract.conftest import Backend

OPERATOR = Caller("acme", "root", operator=True)


async def _reads(
    backend: Backend, reads: KnowledgeReadModel, records: MemoryReads, fact: str
) -> dict[str, Any]:
    """What the reads answer over ``reads`` and ``records`` (the present's, or those of a point)."""
    knowledge = Knowledge(reads, backend.sink, lambda: backend.clock[0], appends=backend.sink)
    return {
        "facts": await knowledge.list_facts(OPERATOR, include_inactive=True),
        "policies": await knowledge.list_policies(OPERATOR, include_inactive=True),
        "notes": await knowledge.get_notes(OPERATOR, "intern"),
        "grants": await knowledge.list_grants("acme"),
        "access_mode": await knowledge.access_mode("acme"),
        "domains": await knowledge.list_domains(OPERATOR),
        "fact": await records.memory(fact),
    }


async def test_a_read_as_of_a_sequence_answers_what_the_present_answered_then(backend: Backend) -> None:
    knowledge = backend.knowledge()
    fact = (
        await knowledge.propose_fact(OPERATOR, "ops", "deploy-day", "Deploys happen on Fridays")
    ).memory_id
    seen: dict[int, dict[str, Any]] = {}

    async def step() -> None:
        seen[await backend.position()] = await _reads(backend, backend.reads, backend.records, fact)

    await step()
    await knowledge.propose_policy(OPERATOR, "ops", "Never deploy without a rollback plan")
    await knowledge.set_notes(OPERATOR, "intern", "halfway through the key rotation")
    await step()
    await knowledge.supersede_fact(OPERATOR, fact, "Deploys happen on Tuesdays")
    await knowledge.set_notes(OPERATOR, "intern", "done with the key rotation")
    await step()
    await knowledge.set_access_mode(OPERATOR, "strict")
    await knowledge.set_grant(OPERATOR, "intern", "ops", "read")
    await step()

    assert len(seen) == 4
    first, last = seen[min(seen)], seen[max(seen)]
    assert len(first["facts"]) < len(last["facts"])
    assert (first["notes"], first["access_mode"]) != (last["notes"], last["access_mode"])
    for seq, then in seen.items():
        reads, records = backend.as_of(seq)
        assert await _reads(backend, reads, records, fact) == then, seq
