"""Contract of :class:`noema.ports.PreambleReads`: the dispatch preamble's policies, notes and
keyword-matched current facts read alike from both adapters."""

from __future__ import annotations

from datetime import timedelta

from noema.application.access import Caller
from tests.contract.conftest import T0, Backend

ALICE = Caller("acme", "alice", "engineer")
OPERATOR = Caller("acme", "root", operator=True)


async def test_the_preamble_reads_active_policies_the_repository_first(backend: Backend) -> None:
    k = backend.knowledge()
    await k.propose_policy(OPERATOR, "arch", "One database per service")
    await k.propose_policy(OPERATOR, "ops", "Deploy from main only", repo="billing")
    gone = await k.propose_policy(OPERATOR, "ops", "Deploy on Fridays")
    await k.supersede_policy(OPERATOR, gone)
    parts = await backend.reads.preamble_parts(
        "acme", "alice", None, repo="billing", readable=None, at=T0, max_facts=5
    )
    assert parts.policies == [
        ("repo:billing/ops", "Deploy from main only"),
        ("arch", "One database per service"),
    ]
    assert parts.facts == []
    assert parts.notes is None
    gated = await backend.reads.preamble_parts(
        "acme", "alice", None, repo=None, readable=["arch"], at=T0, max_facts=5
    )
    assert gated.policies == [("arch", "One database per service")]


async def test_the_preamble_reads_the_agents_own_notes(backend: Backend) -> None:
    k = backend.knowledge()
    await k.update_my_notes(ALICE, "halfway through the auth refactor")
    await k.update_my_notes(Caller("acme", "bob"), "bob's notes")
    parts = await backend.reads.preamble_parts(
        "acme", "alice", None, repo=None, readable=None, at=T0, max_facts=5
    )
    assert parts.notes == "halfway through the auth refactor"


async def test_the_preamble_matches_current_facts_on_the_tasks_words(backend: Backend) -> None:
    k = backend.knowledge()
    await k.propose_fact(ALICE, "ops", "vault", "The vault token expires hourly")
    await k.propose_fact(ALICE, "ops", "lunch", "Lunch is at noon")
    await k.propose_fact(
        ALICE, "ops", "rotation", "The vault rotation window is Sunday", valid_until=T0 + timedelta(hours=1)
    )
    await k.propose_fact(ALICE, "secrets", "vault", "Vault admins sit in Berlin")
    task = "renew the vault token before the release"
    parts = await backend.reads.preamble_parts(
        "acme", "alice", task, repo=None, readable=None, at=T0, max_facts=5
    )
    contents = [c for _, c in parts.facts]
    assert contents[0] == "The vault token expires hourly", "the fact sharing most words ranks first"
    assert set(contents) == {
        "The vault token expires hourly",
        "The vault rotation window is Sunday",
        "Vault admins sit in Berlin",
    }
    later = await backend.reads.preamble_parts(
        "acme", "alice", task, repo=None, readable=["ops"], at=T0 + timedelta(hours=2), max_facts=5
    )
    assert [c for _, c in later.facts] == ["The vault token expires hourly"], (
        "expired and unreadable left out"
    )
    one = await backend.reads.preamble_parts(
        "acme", "alice", task, repo=None, readable=None, at=T0, max_facts=1
    )
    assert len(one.facts) == 1
