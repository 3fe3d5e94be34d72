"""The backends every contract suite runs against: the in-memory adapter (the fast tier, no servers)
and PostgreSQL fed by the real projector from real JetStream (marked ``integration``).

A suite asks for ``backend``: a read model, the memory records and operators' reads, and a sink whose
``publish`` (and optimistic ``publish_expecting``) returns once the events are applied (in memory at
once; through NATS and the projector, by waiting for the projection position).
State is made with the application's own operations (:class:`noema.application.knowledge.Knowledge` over that
sink), then the port is read directly, so the suite checks the adapter and not a hand-made fixture.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg
import pytest

from noema.adapters.jetstream import EventPublisher
from noema.adapters.memory import InMemoryEventStream, InMemoryKnowledge, InMemoryReads
from noema.adapters.postgres import MemoryQueries, ReadModelProjection, create_pool, history
from noema.adapters.postgres.knowledge import PostgresKnowledge
from noema.application.knowledge import Knowledge
from noema.ports import ExpectingSink, KnowledgeReadModel, MemoryReads
from noema.topology import Topology
from noema_events import Event
from tests.conftest import Harness
from tests.support import T0 as T0  # the clock of every contract test
from tests.support import assert_eventually


@dataclass
class Backend:
    """One adapter under test."""

    name: str
    reads: KnowledgeReadModel
    records: MemoryReads
    """The memory records and the operators' reads."""
    sink: ExpectingSink
    topology: Topology
    """The subjects the sink stores events on."""
    clock: list[datetime]
    as_of: Callable[[int], tuple[KnowledgeReadModel, MemoryReads]]
    """The read model and the operators' reads as of a stream sequence (the history's versions)."""
    position: Callable[[], Awaitable[int]]
    """The last stream sequence the read model applied."""

    def knowledge(self, sink: ExpectingSink | None = None) -> Knowledge:
        """The knowledge operations over this backend (publishing to ``sink`` when given), at the
        backend's clock."""
        sink = sink or self.sink
        return Knowledge(self.reads, sink, lambda: self.clock[0], appends=sink)


class _Projected:
    """Publish to JetStream, then wait until the projector applied what was published."""

    def __init__(self, harness: Harness) -> None:
        self._harness = harness
        self._publisher = EventPublisher(harness.nc, harness.topology)

    async def _applied(self, seq: int) -> int:
        async def applied() -> bool:
            async with self._harness.pool.acquire() as conn:
                return await ReadModelProjection().position(conn) >= seq

        await assert_eventually(applied)
        return seq

    async def publish(self, events: Sequence[Event]) -> int:
        return await self._applied(await self._publisher.publish(events))

    async def last_on_subject(self, like: Event) -> tuple[int, Event] | None:
        return await self._publisher.last_on_subject(like)

    async def publish_expecting(self, event: Event, expected_last: int) -> int:
        return await self._applied(await self._publisher.publish_expecting(event, expected_last))


@pytest.fixture(params=["memory", pytest.param("postgres", marks=pytest.mark.integration)])
def servers_if_needed(request: pytest.FixtureRequest) -> Harness | None:
    """The real servers' harness for the PostgreSQL half only (a sync fixture: pytest sets the async
    ``harness`` up from here, outside the test's event loop)."""
    if request.param == "memory":
        return None
    harness: Harness = request.getfixturevalue("harness")
    return harness


@pytest.fixture
async def backend(servers_if_needed: Harness | None) -> AsyncIterator[Backend]:
    """Each contract test once per adapter."""
    clock = [T0]
    if servers_if_needed is None:
        reads = InMemoryKnowledge()
        stream = InMemoryEventStream(reads)
        # Activations are read at the backend's clock (the facade's), as PostgreSQL's are below.
        records = InMemoryReads(reads.tables, lambda: clock[0])

        async def applied() -> int:
            return reads.tables.position

        def past(seq: int) -> tuple[KnowledgeReadModel, MemoryReads]:
            return reads.as_of(seq), records.as_of(seq)

        yield Backend("memory", reads, records, stream, stream.topology, clock, past, applied)
        return
    from noema_projector.service import build as build_projector

    await servers_if_needed.start(build_projector)
    h = servers_if_needed
    pool = h.pool
    sink = _Projected(h)
    # The as-of reads' connections: the as-of views first on the search path, each lent pinned to a point.
    asof = await create_pool(
        h.settings.database_url,
        h.settings.db_schema,
        settings={"search_path": history.search_path(h.settings.db_schema)},
        workspace="*",
        min_size=1,
        max_size=2,
    )
    h.stack.push_async_callback(asof.close)

    async def position() -> int:
        async with pool.acquire() as conn:
            return await ReadModelProjection().position(conn)

    def pinned(seq: int) -> tuple[KnowledgeReadModel, MemoryReads]:
        point: asyncpg.Pool = history.PointPool(asof, seq)
        return PostgresKnowledge(point), MemoryQueries(point, lambda: clock[0])

    yield Backend(
        "postgres",
        PostgresKnowledge(pool),
        MemoryQueries(pool, lambda: clock[0]),
        sink,
        h.topology,
        clock,
        pinned,
        position,
    )
