"""The rules of a topic through the whole pipeline in memory (:class:`InMemoryPipeline`): only
contradictions conflict; an expired fact controls nothing (judged at each proposal's own time), ids
may be shortened, and a merge counts every merged fact. Moved from
tests/integration/test_knowledge_rules.py with their assertions kept (rows read from the in-memory
read model); the working-memory capacity from the settings stays there, with attend on the servers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from noema.application.knowledge import Knowledge
from noema.composition.pipeline import InMemoryPipeline
from noema.domain.dynamics import initial_confidence, mention_confidence
from noema.errors import InvalidQuery, OperationError
from noema.ids import new_id
from noema_events import FactProposed, FactProposedPayload, PolicyProposed, PolicyProposedPayload
from tests.unit.test_knowledge_pipeline_in_memory import ALICE, BOB, OPERATOR
from tests.unit.test_knowledge_pipeline_in_memory import slot as pipeline_slot


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Clocked:
    """The whole pipeline in memory on a clock a test may set (:func:`knowledge_at`)."""

    now: list[Callable[[], datetime]] = field(default_factory=lambda: [_utcnow])
    pipeline: InMemoryPipeline = field(init=False)

    def __post_init__(self) -> None:
        self.pipeline = InMemoryPipeline(clock=lambda: self.now[0]())


@pytest.fixture
def harness() -> Clocked:
    return Clocked()


async def knowledge_at(harness: Clocked, clock: list[datetime]) -> Knowledge:
    """The knowledge operations, with the workers, on the clock ``clock[0]``."""
    harness.now[0] = lambda: clock[0]
    return harness.pipeline.noema().knowledge


async def settled(harness: Clocked) -> None:
    await harness.pipeline.run()


async def slot(harness: Clocked, domain: str, topic: str) -> list[dict[str, Any]]:
    return await pipeline_slot(harness.pipeline, domain, topic)


async def test_two_facts_about_different_things_in_one_topic_both_stay_active(harness: Clocked) -> None:
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


async def test_an_expired_fact_neither_absorbs_a_restatement_nor_wins_a_conflict(harness: Clocked) -> None:
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


async def test_expiry_is_judged_at_the_proposals_time_not_by_the_wall_clock(harness: Clocked) -> None:
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


async def test_facts_and_policies_are_superseded_by_a_unique_prefix_of_their_id(harness: Clocked) -> None:
    k = await knowledge_at(harness, [datetime.now(UTC)])
    ids = ["abcdef01-0000-4000-8000-000000000001", "abcdef02-0000-4000-8000-000000000002"]
    now = datetime.now(UTC)
    await harness.pipeline.stream.publish(
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
    memories = harness.pipeline.knowledge.tables.memories
    m = memories[ids[0]]
    fact = {"status": m["status"], "content": memories[m["superseded_by"]]["content"]}
    assert (fact["status"], fact["content"]) == ("superseded", "Fact number one, corrected")
    policies = {p["id"]: p for p in await k.list_policies(OPERATOR, include_inactive=True)}
    assert policies["fedcba01-0000-4000-8000-000000000001"]["active"] is False
    assert policies["fedcba02-0000-4000-8000-000000000002"]["active"] is True


async def test_a_merge_counts_a_mention_for_every_merged_fact(harness: Clocked) -> None:
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
    row = harness.pipeline.knowledge.tables.memories[kept.memory_id]
    assert row["mention_count"] == 3
    assert row["confidence"] == mention_confidence(initial_confidence("inferred"), "stated", 2)
