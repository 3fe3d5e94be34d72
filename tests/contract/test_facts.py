"""Contract of :class:`noema.ports.FactReads`: current facts, listings, conflicts and the hot tier
read alike from both adapters."""

from __future__ import annotations

from datetime import timedelta

from noema.application.access import Caller
from noema.application.knowledge.events import conflict_events
from noema.domain.knowledge import decide_conflict
from tests.contract.conftest import T0, Backend

ALICE = Caller("acme", "alice", "engineer")
OPERATOR = Caller("acme", "root", operator=True)


async def test_current_facts_are_active_and_unexpired_at_the_given_instant(backend: Backend) -> None:
    k = backend.knowledge()
    lasting = await k.propose_fact(ALICE, "ops", "deploy", "Deploys run on Tuesdays")
    brief = await k.propose_fact(
        ALICE, "ops", "freeze", "The release freeze is on", valid_until=T0 + timedelta(hours=1)
    )
    current = await backend.reads.current_facts("acme", at=T0)
    assert [f.id for f in current] == [lasting.memory_id, brief.memory_id], "in stream order"
    later = await backend.reads.current_facts("acme", at=T0 + timedelta(hours=1))
    assert [f.id for f in later] == [lasting.memory_id], "expired at valid_until itself"
    only = await backend.reads.current_facts("acme", at=T0, domain="ops", topic="freeze")
    assert [f.content for f in only] == ["The release freeze is on"]
    assert await backend.reads.current_facts("other", at=T0) == []


async def test_a_fact_view_carries_what_the_conflict_rules_decide_on(backend: Backend) -> None:
    k = backend.knowledge()
    made = await k.propose_fact(ALICE, "ops", "deploy", "Deploys run on Tuesdays", veracity="inferred")
    (fact,) = await backend.reads.current_facts("acme", at=T0)
    assert (fact.id, fact.agent, fact.domain, fact.topic) == (made.memory_id, "alice", "ops", "deploy")
    assert (fact.veracity, fact.mention_count, fact.created_at) == ("inferred", 1, T0)
    by_id = await backend.reads.facts_with_status([made.memory_id, "missing"])
    assert list(by_id) == [made.memory_id]
    assert by_id[made.memory_id][1] == "active"


async def test_a_mention_raises_confidence_and_count_and_supersession_ends_currency(backend: Backend) -> None:
    k = backend.knowledge()
    first = await k.propose_fact(ALICE, "ops", "deploy", "Deploys run on Tuesdays", veracity="inferred")
    again = await k.propose_fact(ALICE, "ops", "deploy", "deploys run on tuesdays.")
    assert (again.outcome, again.memory_id) == ("mentioned", first.memory_id)
    (fact,) = await backend.reads.current_facts("acme", at=T0)
    assert fact.mention_count == 2
    assert fact.confidence > 0.7
    newer = await k.supersede_fact(OPERATOR, first.memory_id, "Deploys run on Wednesdays", reason="moved")
    # The explicit supersession is the conflicts worker's to settle; settle it as it would.
    views = await backend.reads.facts_with_status([first.memory_id, newer.memory_id])
    verdict = decide_conflict(views[newer.memory_id][0], views[first.memory_id][0], explicit=True)
    await backend.sink.publish(
        conflict_events(
            "acme", verdict, domain="ops", topic="deploy", actor="conflicts", now=T0, cause=newer.memory_id
        )
    )
    assert [f.id for f in await backend.reads.current_facts("acme", at=T0)] == [newer.memory_id]
    listed = await backend.reads.list_facts(
        "acme", at=T0, domain=None, topic=None, include_inactive=True, readable=None, repo=None, limit=10
    )
    assert {(r["id"], r["status"]) for r in listed} == {
        (first.memory_id, "superseded"),
        (newer.memory_id, "active"),
    }
    (conflict,) = await backend.reads.list_conflicts("acme", None, None, 10)
    assert (conflict["winner_id"], conflict["loser_id"]) == (newer.memory_id, first.memory_id)
    assert conflict["loser_content"] == "Deploys run on Tuesdays"


async def test_listings_mark_expired_facts_and_put_the_repository_first(backend: Backend) -> None:
    k = backend.knowledge()
    await k.propose_fact(ALICE, "ops", "b-topic", "Workspace-wide rule about builds")
    scoped = await k.propose_fact(ALICE, "ops", "z-topic", "Billing builds use the cache", repo="billing")
    brief = await k.propose_fact(
        ALICE, "ops", "a-topic", "The cache is cold", valid_until=T0 + timedelta(minutes=5)
    )
    later = T0 + timedelta(hours=1)
    listed = await backend.reads.list_facts(
        "acme",
        at=later,
        domain=None,
        topic=None,
        include_inactive=False,
        readable=None,
        repo="billing",
        limit=10,
    )
    assert listed[0]["id"] == scoped.memory_id, "the current repository's facts first"
    assert brief.memory_id not in {r["id"] for r in listed}
    everything = await backend.reads.list_facts(
        "acme", at=later, domain=None, topic=None, include_inactive=True, readable=None, repo=None, limit=10
    )
    assert {r["id"]: r["status"] for r in everything}[brief.memory_id] == "expired"
    gated = await backend.reads.list_facts(
        "acme", at=later, domain=None, topic=None, include_inactive=True, readable=[], repo=None, limit=10
    )
    assert gated == []


async def test_fact_ids_resolve_exact_ids_and_unique_prefixes(backend: Backend) -> None:
    k = backend.knowledge()
    made = await k.propose_fact(ALICE, "ops", "deploy", "Deploys run on Tuesdays")
    assert await backend.reads.fact_ids("acme", made.memory_id) == [made.memory_id]
    assert await backend.reads.fact_ids("acme", made.memory_id[:8]) == [made.memory_id]
    assert await backend.reads.fact_ids("other", made.memory_id) == []
    assert await backend.reads.memory_kind("acme", made.memory_id[:8]) == (made.memory_id, "semantic")
    row = await backend.reads.fact("acme", made.memory_id)
    assert row is not None
    assert (row["domain"], row["topic"], row["status"]) == ("ops", "deploy", "active")


async def test_the_hot_tier_is_read_per_session_and_per_mind(backend: Backend) -> None:
    k = backend.knowledge()
    item = await k.remember(ALICE, "s1", "the flaky test is in auth", importance=0.9)
    await k.remember(Caller("acme", "bob"), "s1", "bob's own item")
    mine = await backend.reads.hot_items("acme", "alice", "s1")
    assert [i.id for i in mine] == [item.memory_id]
    assert await backend.reads.hot_items("acme", "alice", "s2") == []
    alices = await backend.reads.hot_tier("acme", None, "alice")
    assert [r["id"] for r in alices] == [item.memory_id]
    assert alices[0]["importance"] == 0.9
    assert len(await backend.reads.hot_tier("acme", None, None)) == 2
    assert await backend.reads.current_facts("acme", at=T0) == [], "hot-tier items are not facts"


async def test_fact_and_conflict_listings_page_by_offset_in_their_order(backend: Backend) -> None:
    k = backend.knowledge()
    for topic in ("a", "b", "c"):
        await k.propose_fact(ALICE, "ops", topic, f"fact {topic}")
    whole = await backend.reads.list_facts(
        "acme", at=T0, domain=None, topic=None, include_inactive=False, readable=None, repo=None, limit=10
    )
    pages = [
        await backend.reads.list_facts(
            "acme",
            at=T0,
            domain=None,
            topic=None,
            include_inactive=False,
            readable=None,
            repo=None,
            limit=2,
            offset=offset,
        )
        for offset in (0, 2, 4)
    ]
    assert [len(p) for p in pages] == [2, 1, 0]
    assert [f["id"] for p in pages for f in p] == [f["id"] for f in whole]
    for topic in ("a", "b"):
        views = await backend.reads.current_facts("acme", at=T0, domain="ops", topic=topic)
        newer = await k.supersede_fact(OPERATOR, views[0].id, f"fact {topic}, corrected", reason="fix")
        settled = await backend.reads.facts_with_status([views[0].id, newer.memory_id])
        verdict = decide_conflict(settled[newer.memory_id][0], settled[views[0].id][0], explicit=True)
        await backend.sink.publish(
            conflict_events(
                "acme", verdict, domain="ops", topic=topic, actor="conflicts", now=T0, cause=newer.memory_id
            )
        )
    conflicts = await backend.reads.list_conflicts("acme", None, None, 10)
    assert len(conflicts) == 2
    assert await backend.reads.list_conflicts("acme", None, None, 1, 1) == conflicts[1:]
    assert await backend.reads.list_conflicts("acme", None, None, 1, 2) == []
