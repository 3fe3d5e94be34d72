"""Workspace knowledge through the whole pipeline in memory (:class:`InMemoryPipeline`: operations
publish events, the in-memory read model projects them, the conflicts worker's decision settles
contradictions when the pipeline runs). Moved from tests/integration/test_knowledge.py with their
assertions kept (the read model's rows read from the in-memory tables); the contradiction, concurrent
writers, strict mode and consolidation are copied and stay there too, with the races, replay, the
working memory across a restart of attend and embedding, which need the servers."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from noema.application.knowledge import Caller, InsufficientMemoryPermission, Knowledge
from noema.application.preamble import build_preamble
from noema.application.search import Recall
from noema.composition.pipeline import InMemoryPipeline
from noema.domain.knowledge import slot_relation
from noema.ports import RecallFilters

ALICE = Caller("acme", "alice", "engineer")
BOB = Caller("acme", "bob", "engineer")
OPERATOR = Caller("acme", "root", operator=True)


@pytest.fixture
def harness() -> InMemoryPipeline:
    """The whole pipeline in memory (named as the integration tests name their servers)."""
    return InMemoryPipeline()


async def settled(harness: InMemoryPipeline) -> None:
    """Run the pipeline until its workers have nothing left (decisions are projected as stored)."""
    await harness.run()


async def knowledge(harness: InMemoryPipeline) -> Knowledge:
    return harness.noema().knowledge


async def slot(harness: InMemoryPipeline, domain: str, topic: str) -> list[dict[str, Any]]:
    rows = sorted(
        (
            m
            for m in harness.knowledge.tables.memories.values()
            if m["workspace"] == "acme" and m["domain"] == domain and m["topic"] == topic
        ),
        key=lambda m: m["origin_seq"],
    )
    keys = ("id", "content", "status", "superseded_by", "mention_count", "confidence", "mind")
    return [{k: r[k] for k in keys} for r in rows]


async def test_a_repeated_fact_raises_confidence_instead_of_duplicating(harness: InMemoryPipeline) -> None:
    k = await knowledge(harness)
    first = await k.propose_fact(
        ALICE, "ops", "deploy-key", "The deploy key rotates on Fridays", veracity="inferred"
    )
    await settled(harness)
    again = await k.propose_fact(
        BOB, "ops", "deploy-key", "the deploy keys rotate on Fridays.", veracity="stated"
    )
    await settled(harness)
    assert (first.outcome, again.outcome) == ("proposed", "mentioned")
    assert again.memory_id == first.memory_id
    rows = await slot(harness, "ops", "deploy-key")
    assert len(rows) == 1
    assert rows[0]["mention_count"] == 2
    assert rows[0]["confidence"] > 0.7 + 0.0, "inferred seeds 0.7; a stated re-mention raises it"


async def test_a_contradiction_supersedes_the_loser_and_records_both_sides(harness: InMemoryPipeline) -> None:
    k = await knowledge(harness)
    old = await k.propose_fact(ALICE, "ops", "deploy-day", "Deploys happen on Fridays")
    await settled(harness)
    new = await k.propose_fact(BOB, "ops", "deploy-day", "Deploys happen on Tuesdays")
    await settled(harness)
    rows = {r["id"]: r for r in await slot(harness, "ops", "deploy-day")}
    assert rows[old.memory_id]["status"] == "superseded"
    assert rows[old.memory_id]["superseded_by"] == new.memory_id
    assert rows[new.memory_id]["status"] == "active"
    [conflict] = await k.list_conflicts(ALICE, "ops")
    assert conflict["rule"] == "recency"
    assert (conflict["winner_content"], conflict["loser_content"]) == (
        "Deploys happen on Tuesdays",
        "Deploys happen on Fridays",
    )
    # A weaker source does not displace a stated fact: veracity outranks recency.
    weak = await k.propose_fact(ALICE, "ops", "deploy-day", "Deploys happen on Mondays", veracity="inferred")
    await settled(harness)
    rows = {r["id"]: r for r in await slot(harness, "ops", "deploy-day")}
    assert rows[weak.memory_id]["superseded_by"] == new.memory_id
    assert (await k.list_conflicts(ALICE))[0]["rule"] == "veracity"
    # An explicit supersession wins even against a stronger record.
    fixed = await k.supersede_fact(
        OPERATOR, new.memory_id, "Deploys happen on Wednesdays", veracity="inferred"
    )
    await settled(harness)
    rows = {r["id"]: r for r in await slot(harness, "ops", "deploy-day")}
    assert rows[new.memory_id]["superseded_by"] == fixed.memory_id
    assert [r["id"] for r in rows.values() if r["status"] == "active"] == [fixed.memory_id]
    assert (await k.list_conflicts(ALICE))[0]["rule"] == "explicit"


async def test_concurrent_writers_to_one_topic_have_exactly_one_winner(harness: InMemoryPipeline) -> None:
    k = await knowledge(harness)
    writers = [Caller("acme", f"agent{i}", "engineer") for i in range(6)]
    contents = [f"The primary region is region-{i}" for i in range(6)]
    # Every pair contradicts (a differing value): facts that merely differ would coexist instead.
    assert {slot_relation(a, b) for a in contents for b in contents if a != b} == {"conflict"}
    await asyncio.gather(
        *(k.propose_fact(w, "infra", "primary-region", c) for w, c in zip(writers, contents, strict=True))
    )
    await settled(harness)
    rows = await slot(harness, "infra", "primary-region")
    assert len(rows) == 6
    active = [r for r in rows if r["status"] == "active"]
    assert len(active) == 1
    conflicts = await k.list_conflicts(ALICE, "infra")
    assert len(conflicts) == 5
    assert {c["loser_id"] for c in conflicts} == {r["id"] for r in rows if r["status"] == "superseded"}


async def test_a_policy_needs_write_and_a_refused_one_writes_nothing(harness: InMemoryPipeline) -> None:
    k = await knowledge(harness)
    policy = await k.propose_policy(ALICE, "security", "Rotate secrets every 90 days")
    await k.set_grant(OPERATOR, "intern", "security", "read")
    await settled(harness)
    before = len(harness.stream.events)
    intern = Caller("acme", "ivy", "intern")
    with pytest.raises(InsufficientMemoryPermission, match=r"intern.*read.*needs write"):
        await k.propose_policy(intern, "security", "Secrets never rotate")
    with pytest.raises(InsufficientMemoryPermission):
        await k.supersede_policy(intern, policy, "Secrets never rotate")
    assert len(harness.stream.events) == before
    newer = await k.supersede_policy(ALICE, policy, "Rotate secrets every 30 days")
    await settled(harness)
    policies = await k.list_policies(ALICE, include_inactive=True)
    assert [(p["id"], p["active"], p["superseded_by"]) for p in policies] == [
        (policy, False, newer),
        (newer, True, None),
    ]


async def test_strict_mode_hides_a_confidential_domain_on_every_read_path(harness: InMemoryPipeline) -> None:
    k = await knowledge(harness)
    await k.propose_fact(ALICE, "hr", "salaries", "Salary bands are reviewed every March")
    await k.propose_fact(ALICE, "ops", "salary-tool", "The salary export tool runs on the ops cluster")
    await k.propose_policy(ALICE, "hr", "Never share salary bands outside HR")
    await k.propose_policy(ALICE, "ops", "Page the on-call before restarting the salary export")
    await settled(harness)
    intern = Caller("acme", "ivy", "intern")
    task = "prepare the salary bands review for March"

    async def visible() -> tuple[set[str | None], set[str | None], set[str], str]:
        facts = {f["domain"] for f in await k.list_facts(intern)}
        found = await Recall(harness.voices, None).search(
            "salary", RecallFilters("acme", readable_domains=await k.readable_domains(intern)), mode="keyword"
        )
        searched = {r.memory.get("domain") for r in found.results}
        pre = await build_preamble(
            harness.knowledge,
            "acme",
            "ivy",
            task,
            readable_domains=await k.readable_domains(intern),
        )
        return facts, searched, {p.split("]")[0] for p in pre.policies}, pre.text

    facts, searched, policies, text = await visible()  # compatible mode: reads are not gated
    assert facts == searched == {"hr", "ops"}
    assert policies == {"- [hr", "- [ops"}

    await k.set_access_mode(OPERATOR, "strict")
    await k.set_grant(OPERATOR, "intern", "ops", "read")
    await settled(harness)
    facts, searched, policies, text = await visible()
    assert facts == searched == {"ops"}
    assert policies == {"- [ops"}
    assert "Salary bands" not in text
    assert "salary bands outside HR" not in text
    # ... and a role with read on hr sees it again; fact writes now need write.
    await k.set_grant(OPERATOR, "hr-partner", "hr", "read")
    await settled(harness)
    partner = Caller("acme", "hana", "hr-partner")
    assert {f["domain"] for f in await k.list_facts(partner)} == {"hr"}, "strict: no row for ops means none"
    with pytest.raises(InsufficientMemoryPermission):
        await k.propose_fact(partner, "hr", "salaries", "Salary bands are reviewed every April")


async def test_repo_and_workspace_domains_of_one_name_are_independent(harness: InMemoryPipeline) -> None:
    k = await knowledge(harness)
    ws = await k.propose_fact(ALICE, "architecture", "database", "Services share one PostgreSQL cluster")
    repo = await k.propose_fact(
        ALICE, "architecture", "database", "Billing uses its own SQLite file", repo="billing"
    )
    await settled(harness)
    assert (ws.domain, repo.domain) == ("architecture", "repo:billing/architecture")
    assert await k.list_conflicts(ALICE) == []
    listed = await k.list_facts(ALICE, repo="billing")
    assert [f["id"] for f in listed] == [repo.memory_id, ws.memory_id], (
        "the current repo's memory ranks first"
    )
    assert {d["domain"] for d in await k.list_domains(ALICE)} == {"architecture", "repo:billing/architecture"}


async def test_notes_are_private_and_reach_only_their_agent(harness: InMemoryPipeline) -> None:
    k = await knowledge(harness)
    await k.update_my_notes(ALICE, "I was halfway through the auth refactor")
    await asyncio.gather(*(k.record_observation(ALICE, f"step {i} done") for i in range(5)))
    await settled(harness)
    notes = await k.get_notes(ALICE)
    assert notes.startswith("I was halfway through the auth refactor")
    assert sorted(line.split()[-2] for line in notes.splitlines()[1:]) == ["0", "1", "2", "3", "4"]
    with pytest.raises(InsufficientMemoryPermission, match="private"):
        await k.get_notes(BOB, "alice")
    assert await k.get_notes(OPERATOR, "alice") == notes
    mine = await build_preamble(harness.knowledge, "acme", "alice", "continue the auth refactor please")
    theirs = await build_preamble(harness.knowledge, "acme", "bob", "continue the auth refactor please")
    assert mine.notes == notes
    assert notes in mine.text
    assert theirs.notes is None
    assert "auth refactor" not in theirs.text


async def test_consolidate_promotes_merges_with_provenance_and_archives(harness: InMemoryPipeline) -> None:
    clock = [datetime.now(UTC)]
    harness = InMemoryPipeline(clock=lambda: clock[0])  # the workers on the test's clock too
    k = await knowledge(harness)
    a = await k.propose_fact(
        ALICE,
        "ops",
        "deploys",
        "Deploys happen on Fridays after the standup",
        source_observation_ids=["obs-1"],
    )
    b = await k.propose_fact(
        BOB, "ops", "release-day", "deploys happen on fridays after standup", source_observation_ids=["obs-2"]
    )
    kept = await k.remember(
        ALICE, "s1", "The staging database is rebuilt every Sunday", domain="ops", topic="staging"
    )
    await k.remember(ALICE, "s1", "the staging database is rebuilt every sunday")
    stale = await k.remember(ALICE, "s1", "I looked at the dashboard")
    await settled(harness)
    clock[0] += timedelta(days=2)
    report = await k.consolidate(OPERATOR)
    await settled(harness)
    assert [p["hot_id"] for p in report.promoted] == [kept.memory_id]
    assert report.archived == [stale.memory_id]
    assert report.merged == [{"kept": a.memory_id, "merged": [b.memory_id]}]
    merged = harness.knowledge.tables.memories[b.memory_id]
    assert (merged["status"], merged["superseded_by"]) == ("superseded", a.memory_id)
    keeper = harness.knowledge.tables.memories[a.memory_id]
    assert set(keeper["source_observation_ids"]) == {"obs-1", "obs-2"}
    assert keeper["mention_count"] == 2
    fact = harness.knowledge.tables.memories[report.promoted[0]["fact_id"]]
    assert fact["content"] == "The staging database is rebuilt every Sunday"
    assert kept.memory_id in fact["source_observation_ids"]
    statuses = {
        r["id"]: r["status"] for r in harness.knowledge.tables.memories.values() if r["tier"] == "hot"
    }
    assert statuses[kept.memory_id] == "superseded"
    assert statuses[stale.memory_id] == "archived"
    assert set(statuses.values()) == {"superseded", "archived"}


async def test_harmonize_corroborates_agreement_and_records_contradiction(harness: InMemoryPipeline) -> None:
    k = await knowledge(harness)
    a = await k.propose_fact(ALICE, "infra", "ci", "CI runs on the self-hosted runners", veracity="inferred")
    b = await k.propose_fact(BOB, "infra", "build", "ci runs on self-hosted runners", veracity="inferred")
    c = await k.propose_fact(ALICE, "infra", "billing-db", "Billing uses PostgreSQL 15", veracity="inferred")
    d = await k.propose_fact(BOB, "infra", "database", "Billing uses PostgreSQL 16")
    await settled(harness)
    before = harness.knowledge.tables.memories[a.memory_id]["confidence"]
    report = await k.harmonize(OPERATOR)
    await settled(harness)
    assert report.corroborated == [{"kept": a.memory_id, "merged": [b.memory_id], "agents": ["alice", "bob"]}]
    assert report.conflicts == [{"winner": d.memory_id, "loser": c.memory_id, "rule": "veracity"}]
    after = harness.knowledge.tables.memories[a.memory_id]["confidence"]
    assert after > before
    [conflict] = await k.list_conflicts(ALICE)
    assert conflict["rule"] == "harmonize/veracity"
    assert (conflict["winner_agent"], conflict["loser_agent"]) == ("bob", "alice")


async def test_meeting_decisions_land_in_the_decisions_domain(harness: InMemoryPipeline) -> None:
    k = await knowledge(harness)
    out = await k.record_meeting_decisions(
        ALICE, "weekly sync", ["release-train: Releases ship every second Tuesday", "Adopt ruff for linting"]
    )
    await settled(harness)
    facts = await k.list_facts(ALICE, domain="decisions")
    assert {(f["topic"], f["memory_type"]) for f in facts} == {
        ("release-train", "decision"),
        ("weekly sync #2", "decision"),
    }
    assert {o.outcome for o in out} == {"proposed"}
