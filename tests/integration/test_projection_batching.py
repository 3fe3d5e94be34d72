"""A batch applied at once gives the same rows as its events applied one by one: the projection
groups events that commute into bulk runs (noema.adapters.postgres.commuting), and that must never
show in the read model, whatever the batch boundaries."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import asyncpg
import pytest

from noema.adapters.postgres import ReadModelProjection, checksum, connect, migrate
from noema.adapters.postgres.projection import Projected
from noema.composition.replay import drop_schema
from noema_events import (
    ActivationDecayed,
    ConflictRecorded,
    DomainCreated,
    Event,
    FactMentioned,
    FactProposed,
    GrantChanged,
    MemoryCreated,
    MemoryEmbedded,
    MemoryReinforced,
    MemoryRetrieved,
    MemorySuperseded,
    NotesUpdated,
    OperatorAction,
    PolicyProposed,
    PolicySuperseded,
    RelationshipAdded,
    WorkingMemoryUpdated,
    WorkspaceConfigured,
)
from noema_events.catalog import (
    ActivationDecayedPayload,
    ConflictRecordedPayload,
    DomainCreatedPayload,
    FactMentionedPayload,
    FactProposedPayload,
    GrantChangedPayload,
    MemoryCreatedPayload,
    MemoryEmbeddedPayload,
    MemoryReinforcedPayload,
    MemoryRetrievedPayload,
    MemorySupersededPayload,
    NotesUpdatedPayload,
    OperatorActionPayload,
    PolicyProposedPayload,
    PolicySupersededPayload,
    RelationshipAddedPayload,
    WorkingMemoryItem,
    WorkingMemoryUpdatedPayload,
    WorkspaceConfiguredPayload,
)
from tests.conftest import Harness
from tests.support import T0, envelope

pytestmark = pytest.mark.integration

MINDS = ("ops", "dev")


class Stream:
    """Random events over a few memories and keys, so that they collide often."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.n = 0
        self.minds: dict[str, str] = {}
        """Memory → its mind, once created (a later creation of the same id is skipped)."""

    def envelope(self, mind: str = "ops") -> dict[str, Any]:
        self.n += 1
        return envelope("acme", mind, T0 + timedelta(minutes=self.n), "tester")

    def memory(self) -> str:
        return f"m{self.rng.randrange(6)}"

    def mind(self) -> str:
        return MINDS[self.rng.randrange(2)]

    def event(self) -> Event:
        event = self.rng.choice(self.makers())()
        if isinstance(event, MemoryCreated | FactProposed):
            self.minds.setdefault(event.payload.memory_id, event.mind)
        return event

    def created(self) -> Event:
        memory = self.memory()
        return MemoryCreated(
            **self.envelope(MINDS[int(memory[1:]) % 2]),
            payload=MemoryCreatedPayload(
                memory_id=memory, kind="episodic", epistemic_kind="observation", content="deploy"
            ),
        )

    def edge(self) -> Event:
        """An edge between two existing memories of one mind (the foreign keys would refuse others,
        and a refusal makes the projection apply its batch one by one, which is not tested here)."""
        mind = self.mind()
        ends = sorted(m for m, held in self.minds.items() if held == mind)
        if len(ends) < 2:
            return self.event()
        from_id, to_id = self.rng.sample(ends, 2)
        return RelationshipAdded(
            **self.envelope(mind),
            payload=RelationshipAddedPayload(
                relationship_id=f"r{self.rng.randrange(4)}", from_id=from_id, to_id=to_id, relation="supports"
            ),
        )

    def makers(self) -> list[Callable[[], Event]]:
        r = self.rng
        return [
            self.created,
            lambda: FactProposed(
                **self.envelope(),
                payload=FactProposedPayload(
                    memory_id=self.memory(),
                    domain="infra",
                    topic="deploys",
                    content="deploys on Friday",
                    credibility=r.random(),
                    importance=r.random(),
                    salience=r.random(),
                ),
            ),
            lambda: MemoryEmbedded(
                **self.envelope(),
                payload=MemoryEmbeddedPayload(
                    memory_id=self.memory(), model="tiny", dimensions=3, vector=[r.random() for _ in range(3)]
                ),
            ),
            lambda: MemoryRetrieved(
                **self.envelope(),
                payload=MemoryRetrievedPayload(
                    memory_id=self.memory(),
                    boost=r.random() + 0.01,
                    half_life_days=r.choice([3.5, 14.0]),
                    activation_floor=r.choice([1e-6, 0.01]),
                ),
            ),
            lambda: MemoryReinforced(
                **self.envelope(), payload=MemoryReinforcedPayload(memory_id=self.memory(), amount=r.random())
            ),
            lambda: FactMentioned(
                **self.envelope(),
                payload=FactMentionedPayload(memory_id=self.memory(), rate=r.random(), confidence_cap=0.99),
            ),
            lambda: MemorySuperseded(
                **self.envelope(),
                payload=MemorySupersededPayload(memory_id=self.memory(), superseded_by=self.memory()),
            ),
            lambda: OperatorAction(
                **self.envelope(),
                payload=OperatorActionPayload(
                    action=r.choice(["retract", "archive", "restore"]), target_id=self.memory(), reason="test"
                ),
            ),
            self.edge,
            lambda: ActivationDecayed(
                **self.envelope(""),
                # An earlier release's tick rewrites the workspace (a barrier); today's lists only.
                payload=ActivationDecayedPayload(
                    tick_at=T0 + timedelta(minutes=self.n, seconds=30), rewrite=r.random() < 0.5
                ),
            ),
            lambda: WorkingMemoryUpdated(
                **self.envelope(self.mind()),
                payload=WorkingMemoryUpdatedPayload(
                    items=[WorkingMemoryItem(memory_id=self.memory(), weight=r.random(), entered_at=T0)]
                ),
            ),
            lambda: NotesUpdated(
                **self.envelope(), payload=NotesUpdatedPayload(agent=self.mind(), notes=f"n{r.random()}")
            ),
            lambda: DomainCreated(
                **self.envelope(), payload=DomainCreatedPayload(domain=f"d{r.randrange(2)}")
            ),
            lambda: GrantChanged(
                **self.envelope(),
                payload=GrantChangedPayload(
                    role="dev", domain=f"d{r.randrange(2)}", access=r.choice(["none", "read", "write"])
                ),
            ),
            lambda: WorkspaceConfigured(
                **self.envelope(),
                payload=WorkspaceConfiguredPayload(access_mode=r.choice(["compatible", "strict"])),
            ),
            lambda: PolicyProposed(
                **self.envelope(),
                payload=PolicyProposedPayload(policy_id=f"p{r.randrange(3)}", domain="infra", rule="review"),
            ),
            lambda: PolicySuperseded(
                **self.envelope(), payload=PolicySupersededPayload(policy_id=f"p{r.randrange(3)}")
            ),
            lambda: ConflictRecorded(
                **self.envelope(),
                payload=ConflictRecordedPayload(
                    conflict_id=f"c{r.randrange(3)}",
                    winner_id=self.memory(),
                    loser_id=self.memory(),
                    rule="newer",
                ),
            ),
        ]


async def _build(url: str, schema: str, batches: list[list[Projected]]) -> str:
    await drop_schema(url, schema)
    await migrate(url, schema)
    conn: asyncpg.Connection = await connect(url, schema)
    try:
        projection = ReadModelProjection()
        for batch in batches:
            assert await projection.apply(conn, batch) == len(batch)  # nothing refused
        return await checksum(conn)
    finally:
        await conn.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_a_batch_gives_the_rows_its_events_give_one_by_one(harness: Harness, seed: int) -> None:
    stream = Stream(seed)
    events = [Projected(seq, "noema.acme.x", stream.event()) for seq in range(1, 301)]
    url = harness.settings.database_url
    one_by_one = f"replay_{harness.settings.db_schema}_a"
    at_once = f"replay_{harness.settings.db_schema}_b"
    try:
        expected = await _build(url, one_by_one, [[p] for p in events])
        assert await _build(url, at_once, [events]) == expected
        assert await _build(url, at_once, [events[:137], events[137:]]) == expected
    finally:
        await drop_schema(url, one_by_one)
        await drop_schema(url, at_once)


@pytest.mark.parametrize(
    "refused",
    [
        pytest.param(0, id="the table's check refuses it"),
        # Beyond the column's 32 bits the driver refuses it before the statement is sent (asyncpg's
        # client-side DataError, a subclass of its InterfaceError): the event's fault, never the
        # server's, so refused the same way — never retried as an outage.
        pytest.param(2**31, id="the driver cannot send it"),
    ],
)
async def test_a_working_memory_the_database_refuses_is_refused_alone_within_its_run(
    harness: Harness, refused: int
) -> None:
    # A run of one mind's states is written as its last state; a capacity that cannot be stored
    # (here the middle one) must still be refused, alone, as when applied one by one.
    states = [
        Projected(
            seq,
            "noema.acme.x",
            WorkingMemoryUpdated(
                **envelope("acme", "ops", T0 + timedelta(minutes=seq)),
                payload=WorkingMemoryUpdatedPayload(items=[], capacity=capacity),
            ),
        )
        for seq, capacity in ((1, 9), (2, refused), (3, 5))
    ]
    url, schema = harness.settings.database_url, f"replay_{harness.settings.db_schema}_wm"
    await drop_schema(url, schema)
    await migrate(url, schema)
    conn: asyncpg.Connection = await connect(url, schema)
    try:
        projection = ReadModelProjection()
        assert await projection.apply(conn, states) == 2
        assert [p.seq for p, _ in projection.refused] == [2]
        assert await conn.fetchval("SELECT capacity FROM working_memory") == 5
        assert await conn.fetch("SELECT seq FROM events ORDER BY seq") == [(1,), (3,)]
    finally:
        await conn.close()
        await drop_schema(url, schema)
