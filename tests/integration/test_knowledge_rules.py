"""The rules of a topic through the real pipeline: only contradictions conflict; an expired fact
controls nothing (judged at each proposal's own time)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from noema.knowledge import Knowledge
from noema_conflicts.service import build as build_conflicts
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.integration.test_knowledge import ALICE, BOB, settled, slot

pytestmark = pytest.mark.integration


async def knowledge_at(harness: Harness, clock: list[datetime]) -> Knowledge:
    """Projector and conflicts worker running; the knowledge layer's clock is ``clock[0]``."""
    await harness.start(build_projector)
    await harness.start(build_conflicts)
    return Knowledge(harness.pool, harness.nc, harness.topology, clock=lambda: clock[0])


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
