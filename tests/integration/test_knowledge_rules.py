"""The rules of a topic through the real pipeline: only contradictions conflict; an expired fact
controls nothing (judged at each proposal's own time), ids may be shortened, the working-memory
capacity comes from the settings, and a merge counts every merged fact."""

from __future__ import annotations

import dataclasses
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from noema.adapters.jetstream import EventPublisher, stream_last_seq
from noema.adapters.postgres import ReadModelProjection
from noema.application.knowledge import Knowledge
from noema.composition.instance import connected_knowledge
from noema.domain.dynamics import initial_confidence, mention_confidence
from noema.errors import InvalidQuery, OperationError
from noema.ids import new_id
from noema.runtime.settings import Settings
from noema_attend.service import build as build_attend
from noema_conflicts.service import build as build_conflicts
from noema_events import FactProposed, FactProposedPayload, PolicyProposed, PolicyProposedPayload
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.integration.test_knowledge import ALICE, BOB, OPERATOR, observe_migration_steps, settled, slot
from tests.support import assert_eventually

pytestmark = pytest.mark.integration


async def knowledge_at(harness: Harness, clock: list[datetime]) -> Knowledge:
    """Projector and conflicts worker running; the knowledge layer's clock is ``clock[0]``."""
    await harness.start(build_projector)
    await harness.start(build_conflicts)
    return connected_knowledge(harness.pool, harness.nc, harness.topology, clock=lambda: clock[0])


async def test_two_facts_about_different_things_in_one_topic_both_stay_active(harness: Harness) -> None:
    k = await knowledge_at(harness, [datetime.now(UTC)])
    when = await k.propose_fact(ALICE, "ops", "backups", "Backups run nightly at 02:00")
    await settled(harness)
    where = await k.propose_fact(BOB, "ops", "backups", "Backups are stored in S3")
    await settled(harness)
    rows = {r["id"]: r for r in await slot(harness, "ops", "backups")}
    assert {rows[f.memory_id]["status"] for f in (when, where)} == {"active"}
    assert await k.list_conflicts(ALICE) == []
    # ... while a contradicting one is still settled against the statement it contradicts only.
    later = await k.propose_fact(BOB, "ops", "backups", "Backups run nightly at 03:00")
    await settled(harness)
    rows = {r["id"]: r for r in await slot(harness, "ops", "backups")}
    assert rows[when.memory_id]["superseded_by"] == later.memory_id
    assert rows[where.memory_id]["status"] == "active"
    [conflict] = await k.list_conflicts(ALICE)
    assert (conflict["winner_id"], conflict["loser_id"]) == (later.memory_id, when.memory_id)


async def test_an_expired_fact_neither_absorbs_a_restatement_nor_wins_a_conflict(harness: Harness) -> None:
    clock = [datetime(2026, 3, 2, 9, 0, tzinfo=UTC)]
    k = await knowledge_at(harness, clock)
    until = clock[0] + timedelta(hours=1)
    freeze = await k.propose_fact(ALICE, "ops", "freeze", "The release freeze holds", valid_until=until)
    deploys = await k.propose_fact(ALICE, "ops", "deploy-day", "Deploys happen on Fridays", valid_until=until)
    await settled(harness)
    clock[0] += timedelta(hours=2)
    again = await k.propose_fact(BOB, "ops", "freeze", "the release freeze holds")
    # An inferred statement loses to a stated one by veracity, unless the stated one has expired.
    weaker = await k.propose_fact(BOB, "ops", "deploy-day", "Deploys happen on Tuesdays", veracity="inferred")
    await settled(harness)
    assert again.outcome == "proposed", "the expired fact did not take the mention"
    rows = {r["id"]: r for r in await slot(harness, "ops", "freeze")}
    assert rows[freeze.memory_id]["mention_count"] == 1
    assert rows[again.memory_id]["status"] == "active", "nor did the worker merge it into the expired one"
    rows = {r["id"]: r for r in await slot(harness, "ops", "deploy-day")}
    assert rows[weaker.memory_id]["status"] == "active"
    assert rows[deploys.memory_id]["superseded_by"] is None
    assert await k.list_conflicts(ALICE) == []
    # Listed: the current facts; with everything, the expired ones say so.
    current = {f["id"] for f in await k.list_facts(ALICE, domain="ops")}
    assert current == {again.memory_id, weaker.memory_id}
    every = {f["id"]: f["status"] for f in await k.list_facts(ALICE, domain="ops", include_inactive=True)}
    assert (every[freeze.memory_id], every[deploys.memory_id]) == ("expired", "expired")


async def test_expiry_is_judged_at_the_proposals_time_not_by_the_wall_clock(harness: Harness) -> None:
    # Everything happens ten days ago: by the wall clock the first fact has long expired, but it was
    # current when the second was proposed, so the two conflict and the stated one wins.
    clock = [datetime.now(UTC) - timedelta(days=10)]
    k = await knowledge_at(harness, clock)
    stated = await k.propose_fact(
        ALICE, "ops", "deploy-day", "Deploys happen on Fridays", valid_until=clock[0] + timedelta(hours=1)
    )
    await settled(harness)
    clock[0] += timedelta(minutes=30)
    inferred = await k.propose_fact(
        BOB, "ops", "deploy-day", "Deploys happen on Tuesdays", veracity="inferred"
    )
    await settled(harness)
    [conflict] = await k.list_conflicts(ALICE)
    assert (conflict["winner_id"], conflict["loser_id"], conflict["rule"]) == (
        stated.memory_id,
        inferred.memory_id,
        "veracity",
    )


async def test_facts_and_policies_are_superseded_by_a_unique_prefix_of_their_id(harness: Harness) -> None:
    k = await knowledge_at(harness, [datetime.now(UTC)])
    ids = ["abcdef01-0000-4000-8000-000000000001", "abcdef02-0000-4000-8000-000000000002"]
    now = datetime.now(UTC)
    await EventPublisher(harness.nc, harness.topology).publish(
        [
            *(
                FactProposed(
                    id=new_id(),
                    workspace="acme",
                    mind="alice",
                    occurred_at=now,
                    correlation_id=memory_id,
                    actor="alice",
                    payload=FactProposedPayload(
                        memory_id=memory_id,
                        domain="ops",
                        topic=f"topic-{n}",
                        content=f"Fact number {n}",
                        credibility=1.0,
                        importance=0.5,
                        salience=0.5,
                    ),
                )
                for n, memory_id in enumerate(ids)
            ),
            *(
                PolicyProposed(
                    id=new_id(),
                    workspace="acme",
                    occurred_at=now,
                    correlation_id=policy_id,
                    actor="alice",
                    payload=PolicyProposedPayload(policy_id=policy_id, domain="ops", rule=f"Rule number {n}"),
                )
                for n, policy_id in enumerate(i.replace("abcdef", "fedcba") for i in ids)
            ),
        ]
    )
    await settled(harness)
    for what, supersede in (
        ("fact", lambda given: k.supersede_fact(OPERATOR, given, "Fact number one, corrected")),
        ("policy", lambda given: k.supersede_policy(OPERATOR, given, "Rule number one, corrected")),
    ):
        prefix = "abcdef0" if what == "fact" else "fedcba0"
        with pytest.raises(
            OperationError, match=rf"{prefix} matches several {what} ids; give more of the id"
        ):
            await supersede(prefix)
        with pytest.raises(
            InvalidQuery, match=rf"no {what} {prefix[:5]} in workspace acme \(give at least 6"
        ):
            await supersede(prefix[:5])  # under six characters a prefix is not enough (a bad request)
        await supersede(f"{prefix}1".upper())
    await settled(harness)
    fact = await harness.pool.fetchrow(
        "SELECT m.status, n.content FROM memories m JOIN memories n ON n.id = m.superseded_by "
        "WHERE m.id = $1",
        ids[0],
    )
    assert (fact["status"], fact["content"]) == ("superseded", "Fact number one, corrected")
    policies = {p["id"]: p for p in await k.list_policies(OPERATOR, include_inactive=True)}
    assert policies["fedcba01-0000-4000-8000-000000000001"]["active"] is False
    assert policies["fedcba02-0000-4000-8000-000000000002"]["active"] is True


async def test_the_working_memory_capacity_comes_from_the_settings(harness: Harness) -> None:
    settings = dataclasses.replace(harness.settings, wm_capacity=3)

    async def attend(_: Settings, stack: AsyncExitStack) -> Any:
        return await build_attend(settings, stack)

    await harness.start(build_projector)
    await harness.start(attend)
    await observe_migration_steps(harness, 5)

    async def caught_up() -> bool:
        if await harness.pool.fetchval("SELECT count(*) FROM memories WHERE workspace = 'acme'") < 5:
            return False
        async with harness.pool.acquire() as conn:
            position = await ReadModelProjection().position(conn)
        return position == await stream_last_seq(harness.js, harness.topology.event_stream)

    await assert_eventually(caught_up)
    wm = await connected_knowledge(harness.pool, harness.nc, harness.topology).working_memory("acme", "ops")
    assert (wm["capacity"], len(wm["items"])) == (3, 3)


async def test_a_merge_counts_a_mention_for_every_merged_fact(harness: Harness) -> None:
    k = await knowledge_at(harness, [datetime.now(UTC)])
    # Near-duplicates in three topics: the conflicts worker leaves them be, consolidate merges them.
    kept = await k.propose_fact(
        ALICE, "ops", "deploys", "Deploys happen on Fridays after the standup", veracity="inferred"
    )
    b = await k.propose_fact(
        BOB, "ops", "release-day", "deploys happen on fridays after standup", veracity="inferred"
    )
    c = await k.propose_fact(
        BOB, "ops", "cadence", "Deploys happen on Fridays after the daily standup", veracity="inferred"
    )
    await settled(harness)
    report = await k.consolidate(OPERATOR)
    await settled(harness)
    assert report.merged == [{"kept": kept.memory_id, "merged": [b.memory_id, c.memory_id]}]
    row = await harness.pool.fetchrow(
        "SELECT mention_count, confidence FROM memories WHERE id = $1", kept.memory_id
    )
    assert row["mention_count"] == 3
    assert row["confidence"] == mention_confidence(initial_confidence("inferred"), "stated", 2)
