"""Consolidate's hot tier over the in-memory adapter, pinned whole: given hot-tier items of two agents
in several sessions (one item remembered twice before it was projected, one mentioned again, one
important, some stale, one fresh), when an operator consolidates, then exactly these events, in this
order, with these ids and payloads.

Ids the operations would draw at random are drawn from a counter, so the events compare with a golden
file (``golden/consolidate.json``); rewrite it (``python tests/unit/test_consolidate.py``) only when a
change to consolidate's output is intended.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from unittest import mock

from noema.adapters.memory import InMemoryEventStream, InMemoryKnowledge
from noema.application.access import Caller
from noema.application.knowledge import ConsolidateReport, Knowledge
from noema_events import Event, FactProposed, MemoryCreated, MemoryCreatedPayload, encode_event

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
LATER = T0 + timedelta(days=2)
ALICE = Caller("acme", "alice", "engineer")
BOB = Caller("acme", "bob", "engineer")
OPERATOR = Caller("acme", "root", operator=True)
GOLDEN = Path(__file__).parent / "golden" / "consolidate.json"
DRAWN = ("facts", "events", "maintenance", "context")
"""The modules of noema.application.knowledge that draw random ids on consolidate's path."""


def hot(
    n: int,
    mind: str,
    session: str,
    content: str,
    *,
    at: datetime = T0,
    importance: float = 0.5,
    domain: str | None = None,
    topic: str | None = None,
) -> MemoryCreated:
    """A hot-tier item as ``remember`` records it (published directly: two rows of one item arise
    only when it is remembered again before the first was projected)."""
    return MemoryCreated(
        id=f"created-hot-{n}",
        workspace="acme",
        mind=mind,
        occurred_at=at,
        correlation_id=f"hot-{n}",
        actor=mind,
        payload=MemoryCreatedPayload(
            memory_id=f"hot-{n}",
            kind="episodic",
            epistemic_kind="memory",
            content=content,
            domain=domain,
            topic=topic,
            importance=importance,
            channel="system",
            source=mind,
            source_observation_ids=[f"obs-{n}"],
            session=session,
            tier="hot",
        ),
    )


HOT_TIER = [
    hot(1, "alice", "s1", "The staging database is rebuilt every Sunday"),
    hot(2, "bob", "s1", "the staging database is rebuilt every sunday"),
    hot(3, "alice", "s2", "The staging database is rebuilt every Sunday"),
    hot(4, "alice", "s1", "the staging database is rebuilt every sunday.", domain="ops", topic="staging"),
    hot(5, "alice", "s1", "I looked at the dashboard", at=LATER - timedelta(hours=1)),
    hot(6, "alice", "s1", "The pager rotation moves to Mondays", importance=0.9),
    hot(7, "bob", "s3", "the backups were verified last night"),
    hot(8, "bob", "s3", "bob restarted the flaky runner"),
]


def counter() -> Iterator[str]:
    return (f"id-{n:03d}" for n in itertools.count(1))


async def consolidated(caller: Caller, *, strict: bool = False) -> tuple[ConsolidateReport, list[Event]]:
    """Consolidate the hot tier above as ``caller``, two days on; ``strict``: in strict mode, where
    engineers may write only the ``ops`` domain."""
    clock = [T0]
    reads = InMemoryKnowledge()
    stream = InMemoryEventStream(reads)
    k = Knowledge(reads, stream, lambda: clock[0])
    ids = counter()
    with contextlib.ExitStack() as patches:
        for module in DRAWN:
            patches.enter_context(mock.patch(f"noema.application.knowledge.{module}.new_id", side_effect=ids))
        await stream.publish(HOT_TIER)
        await k.remember(BOB, "s3", "The backups were verified last night")  # a mention of hot-7
        if strict:
            await k.set_access_mode(OPERATOR, "strict")
            await k.set_grant(OPERATOR, "engineer", "ops", "write")
        clock[0] = LATER
        before = len(stream.events)
        report = await k.consolidate(caller)
    return report, stream.events[before:]


def subject(event: Event) -> str:
    """The memory, action target or domain an event is about."""
    p = event.payload  # type: ignore[attr-defined]
    return str(getattr(p, "memory_id", None) or getattr(p, "target_id", None) or p.domain)


def golden_text(events: list[Event]) -> str:
    return json.dumps([json.loads(encode_event(e)) for e in events], indent=2) + "\n"


async def test_consolidate_promotes_archives_and_leaves_the_hot_tier_in_this_order() -> None:
    report, events = await consolidated(OPERATOR)
    assert [(p["hot_ids"], p["outcome"]) for p in report.promoted] == [
        (["hot-1", "hot-4"], "proposed"),
        (["hot-6"], "proposed"),
        (["hot-7"], "proposed"),
    ]
    assert report.archived == ["hot-2", "hot-3", "hot-8"]
    assert (report.merged, report.skipped) == ([], [])
    f1, f2, f3 = (p["fact_id"] for p in report.promoted)
    assert [(e.type, subject(e)) for e in events] == [
        ("domain.created.v1", "ops"),
        ("grant.changed.v1", "ops"),
        ("fact.proposed.v2", f1),
        ("operator.action.v1", f1),
        ("memory.superseded.v1", "hot-1"),
        ("memory.superseded.v1", "hot-4"),
        ("operator.action.v1", "hot-2"),
        ("operator.action.v1", "hot-3"),
        ("domain.created.v1", "general"),
        ("grant.changed.v1", "general"),
        ("fact.proposed.v2", f2),
        ("operator.action.v1", f2),
        ("memory.superseded.v1", "hot-6"),
        ("fact.proposed.v2", f3),
        ("operator.action.v1", f3),
        ("memory.superseded.v1", "hot-7"),
        ("operator.action.v1", "hot-8"),
    ]
    fact = events[2]
    assert isinstance(fact, FactProposed)
    assert (fact.payload.domain, fact.payload.topic, fact.payload.content) == (
        "ops",
        "staging",
        "The staging database is rebuilt every Sunday",
    )
    assert fact.payload.source_observation_ids == ["obs-1", "obs-4", "hot-1", "hot-4"]


async def test_consolidate_yields_exactly_the_golden_events() -> None:
    _, events = await consolidated(OPERATOR)
    assert golden_text(events) == GOLDEN.read_text()


async def test_an_agent_consolidates_only_its_own_hot_tier() -> None:
    report, _ = await consolidated(BOB)
    assert [p["hot_ids"] for p in report.promoted] == [["hot-7"]]
    assert report.archived == ["hot-2", "hot-8"]


async def test_in_strict_mode_a_group_the_agent_may_not_promote_is_skipped_and_the_rest_goes_on() -> None:
    report, _ = await consolidated(ALICE, strict=True)
    assert [p["hot_ids"] for p in report.promoted] == [["hot-1", "hot-4"]]
    assert [s["hot_id"] for s in report.skipped] == ["hot-6"]
    assert report.archived == ["hot-3"]


if __name__ == "__main__":
    GOLDEN.write_text(golden_text(asyncio.run(consolidated(OPERATOR))[1]))
