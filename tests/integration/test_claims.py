"""Claims with failover (issue 13, one partition): one owner at a time, a standby takes over when
the owner's session ends, and the former owner can no longer write — neither attend's decisions to
NATS nor the projector's rows to PostgreSQL.

The owner's "death" is its claim session ended by the server (``pg_terminate_backend``), which is
what PostgreSQL does on its own when the owner's process dies; its process, here, goes on and
tries to write.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from typing import TypeVar

import asyncpg
import pytest
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from noema.adapters.jetstream import stream_last_seq
from noema.adapters.postgres import ReadModelProjection, create_pool
from noema.adapters.postgres.claims import AdvisoryClaim
from noema.adapters.postgres.tenancy import ALL_WORKSPACES
from noema.adapters.pull import Puller
from noema.client import publish_observation
from noema.domain.attention import AttentionConfig
from noema.runtime.claims import ClaimedService, ClaimLost
from noema.runtime.wiring import POOL_CLOSE_S, open_pool
from noema_attend.worker import AttendHandler
from noema_events import AttentionDecided, Event, WorkingMemoryUpdated, decode_event
from noema_projector.worker import ProjectorHandler
from tests.conftest import Harness
from tests.support import assert_eventually

pytestmark = pytest.mark.integration

TAKEOVER_S = 10.0

E = TypeVar("E", bound=Event)


async def _read(h: Harness, stream: str, subjects: str, count: int) -> list[Msg]:
    """The first ``count`` messages of ``stream`` as a fresh consumer delivers them."""
    info = await h.js.add_consumer(
        stream,
        ConsumerConfig(
            deliver_policy=DeliverPolicy.ALL,
            ack_policy=AckPolicy.EXPLICIT,
            filter_subject=subjects,
            inactive_threshold=30,
        ),
    )
    assert info.name is not None
    puller = await Puller(h.nc, stream, info.name, count).start()
    msgs: list[Msg] = []
    while len(msgs) < count:
        got = await puller.fetch(timeout=5)
        assert got, f"the stream stopped delivering after {len(msgs)} of {count}"
        msgs += got
    await puller.stop()
    return msgs[:count]


async def _backend_of(claim: AdvisoryClaim) -> int:
    async with claim.connection() as conn:
        return int(await conn.fetchval("SELECT pg_backend_pid()"))


@pytest.fixture
async def pools(harness: Harness) -> AsyncIterator[tuple[asyncpg.Pool, asyncpg.Pool]]:
    """Two instances' pools, as the projector opens them (its role, every workspace)."""
    made = [
        await create_pool(
            harness.settings.database_url_for("projector"),
            harness.settings.db_schema,
            app=f"noema-test-{i}",
            workspace=ALL_WORKSPACES,
            min_size=1,
            max_size=2,
        )
        for i in (1, 2)
    ]
    yield made[0], made[1]
    for pool in made:
        pool.terminate()  # claims hold connections to the end, as a process does until it exits


async def _owner_and_standby(
    harness: Harness, pools: tuple[asyncpg.Pool, asyncpg.Pool], worker: str
) -> tuple[AdvisoryClaim, AdvisoryClaim, asyncio.Task[bool], asyncio.Event]:
    stopping = asyncio.Event()
    first = AdvisoryClaim(pools[0], harness.settings.db_schema, worker, poll_s=0.1)
    second = AdvisoryClaim(pools[1], harness.settings.db_schema, worker, poll_s=0.1)
    assert await first.acquire(stopping)
    standing_by = asyncio.create_task(second.acquire(stopping))
    done, _ = await asyncio.wait({standing_by}, timeout=1.0)
    assert not done, "a second instance took a claim that was held"
    assert (first.state, second.state) == ("owner", "standby")
    return first, second, standing_by, stopping


async def _take_over(harness: Harness, first: AdvisoryClaim, standing_by: asyncio.Task[bool]) -> float:
    """End the owner's claim session as the server would on its death; the standby's takeover time."""
    backend = await _backend_of(first)
    killed = time.monotonic()
    assert await harness.pool.fetchval("SELECT pg_terminate_backend($1)", backend)
    assert await asyncio.wait_for(standing_by, TAKEOVER_S)
    return time.monotonic() - killed


async def test_a_standby_owns_the_claim_once_the_owners_session_ends_and_attend_fenced_cannot_publish(
    harness: Harness, pools: tuple[asyncpg.Pool, asyncpg.Pool]
) -> None:
    t = harness.topology
    for i in range(5):
        await publish_observation(
            harness.js, f"the deploy key rotates on day {i}", workspace="acme", mind="ops", topology=t
        )
    msgs = await _read(harness, t.observation_stream, t.observation_subjects, 5)
    config = AttentionConfig(threshold=0.0, capacity=50)
    first, second, standing_by, _ = await _owner_and_standby(harness, pools, "attend")

    takeover_s = await _take_over(harness, first, standing_by)
    print(f"takeover_s={takeover_s:.2f}")
    assert second.state == "owner"

    # The former owner's process runs on and decides a cycle: the fence stops it before publishing.
    with pytest.raises(ClaimLost):
        await AttendHandler(harness.nc, t, config, fence=first.check)(msgs)
    assert first.state == "lost"
    assert await stream_last_seq(harness.js, t.event_stream) == 0, "a former owner published"

    # The new owner decides the same observations and publishes.
    await AttendHandler(harness.nc, t, config, fence=second.check)(msgs)
    assert await stream_last_seq(harness.js, t.event_stream) > 0


async def _events_of(harness: Harness, kind: type[E]) -> list[E]:
    t = harness.topology
    last = await stream_last_seq(harness.js, t.event_stream)
    return [
        event
        for m in await _read(harness, t.event_stream, t.event_subjects, last)
        if isinstance(event := decode_event(m.data), kind)
    ]


class StalledFormerOwner:
    """Five observations of one mind, attend's claim taken over while its former owner stalls
    between its claim check and its publish of the first three (a pause of the process: GC, CPU
    starvation); ``resume()`` lets that publish go on."""

    config = AttentionConfig(threshold=0.0, capacity=50)
    new_owner: AdvisoryClaim
    _stale: asyncio.Task[None]

    def __init__(self, harness: Harness, msgs: list[Msg], again: list[Msg]) -> None:
        self.harness, self.again = harness, again
        self.stale_ids = {decode_event(m.data).id for m in msgs[:3]}
        self.resumed = asyncio.Event()

    @classmethod
    async def start(cls, harness: Harness, pools: tuple[asyncpg.Pool, asyncpg.Pool]) -> StalledFormerOwner:
        t = harness.topology
        for i in range(5):
            await publish_observation(harness.js, f"rotation {i}", workspace="acme", mind="ops", topology=t)
        # Each instance's deliveries of the same observations.
        msgs = await _read(harness, t.observation_stream, t.observation_subjects, 5)
        stalled = cls(harness, msgs, await _read(harness, t.observation_stream, t.observation_subjects, 5))
        first, stalled.new_owner, standing_by, _ = await _owner_and_standby(harness, pools, "attend")
        checked = asyncio.Event()

        async def check_then_stall() -> None:
            await first.check()  # still the owner here
            checked.set()
            await stalled.resumed.wait()

        stalled._stale = asyncio.create_task(
            AttendHandler(harness.nc, t, cls.config, fence=check_then_stall)(msgs[:3])
        )
        await checked.wait()
        await _take_over(harness, first, standing_by)
        return stalled

    async def resume(self) -> None:
        """Let the former owner publish, and wait for its cycle to end."""
        self.resumed.set()
        await self._stale

    async def new_owners_cycle(self, fence: Callable[[], Awaitable[None]] | None = None) -> None:
        """The new owner's first cycle, of all five observations."""
        t = self.harness.topology
        await AttendHandler(self.harness.nc, t, self.config, fence=fence or self.new_owner.check)(self.again)


async def test_a_former_owner_stalled_between_its_claim_check_and_its_publish_decides_nothing_twice(
    harness: Harness, pools: tuple[asyncpg.Pool, asyncpg.Pool]
) -> None:
    """The stale cycle comes after the new owner's: the server refuses it (the mind's last decision
    is not the one the former owner read), and read again, everything in it was decided."""
    stalled = await StalledFormerOwner.start(harness, pools)
    await stalled.new_owners_cycle()
    await stalled.resume()

    decisions = await _events_of(harness, AttentionDecided)
    decided = [d.candidate_id for event in decisions for d in event.payload.decisions]
    assert len(decided) == len(set(decided)) == 5, "an observation was decided twice"
    assert len(decisions) == 1, "the stale cycle stored a decision"


async def test_a_new_owners_cycle_refused_after_a_stale_one_landed_decides_only_the_rest(
    harness: Harness, pools: tuple[asyncpg.Pool, asyncpg.Pool]
) -> None:
    """The stale cycle lands between the new owner's reading of the mind and its publish: the new
    owner's cycle is refused, it reads the mind again and decides only what the stale one did not,
    continuing the working memory the stale cycle left (no fork)."""
    stalled = await StalledFormerOwner.start(harness, pools)

    async def check_then_let_the_stale_one_publish() -> None:
        await stalled.new_owner.check()
        if not stalled.resumed.is_set():  # only before the new owner's first attempt
            await stalled.resume()  # the stale cycle is stored now, after the new owner read the mind

    await stalled.new_owners_cycle(check_then_let_the_stale_one_publish)

    decisions = await _events_of(harness, AttentionDecided)
    assert [len(event.payload.decisions) for event in decisions] == [3, 2]
    decided = [d.candidate_id for event in decisions for d in event.payload.decisions]
    assert set(decided[:3]) == stalled.stale_ids
    assert len(decided) == len(set(decided)) == 5, "an observation was decided twice"
    updates = await _events_of(harness, WorkingMemoryUpdated)
    assert len(updates) == 2
    held_first = {i.memory_id for i in updates[0].payload.items}
    assert held_first <= {i.memory_id for i in updates[1].payload.items}, "the working memory forked"


async def test_a_former_projector_owner_cannot_commit_rows_or_its_position(
    harness: Harness, pools: tuple[asyncpg.Pool, asyncpg.Pool]
) -> None:
    t = harness.topology
    for i in range(3):
        await publish_observation(
            harness.js, f"the backup ran at {i} am", workspace="acme", mind="ops", topology=t
        )
    observations = await _read(harness, t.observation_stream, t.observation_subjects, 3)
    await AttendHandler(harness.nc, t, AttentionConfig(threshold=0.0, capacity=50))(observations)
    events = await _read(
        harness, t.event_stream, t.event_subjects, await stream_last_seq(harness.js, t.event_stream)
    )
    first, second, standing_by, _ = await _owner_and_standby(harness, pools, "projector")
    projection = ReadModelProjection()

    def handler(pool: asyncpg.Pool, claim: AdvisoryClaim) -> ProjectorHandler:
        return ProjectorHandler(harness.js, pool, t, projection, 0, connection=claim.connection)

    await _take_over(harness, first, standing_by)
    with pytest.raises(ClaimLost):
        await handler(pools[0], first)(events)
    async with harness.pool.acquire() as conn:
        assert await projection.position(conn) == 0, "a former owner moved the position"
        assert await conn.fetchval("SELECT count(*) FROM memories") == 0, "a former owner wrote rows"

    await handler(pools[1], second)(events)
    async with harness.pool.acquire() as conn:
        assert await projection.position(conn) == events[-1].metadata.sequence.stream
        assert await conn.fetchval("SELECT count(*) FROM memories") == 3


async def test_a_claimed_worker_stops_with_claim_lost_when_its_session_ends(
    harness: Harness, pools: tuple[asyncpg.Pool, asyncpg.Pool]
) -> None:
    claim = AdvisoryClaim(pools[0], harness.settings.db_schema, "conflicts", poll_s=0.1)
    started = asyncio.Event()

    class Idle:
        name = "idle"

        def __init__(self) -> None:
            self._stop = asyncio.Event()

        async def run(self) -> None:
            started.set()
            await self._stop.wait()

        def shutdown(self) -> None:
            self._stop.set()

    async def start() -> Idle:
        return Idle()

    service = ClaimedService("conflicts", harness.nc, claim, start, check_s=0.1)
    running = asyncio.create_task(service.run())
    await asyncio.wait_for(started.wait(), 5)
    assert service.claim_state == "owner"
    async with harness.pool.acquire() as conn:
        await assert_eventually(
            lambda: _terminated(conn, "noema-test-1"), 5, what="the claim session terminated"
        )
    with pytest.raises(ClaimLost):
        await asyncio.wait_for(running, TAKEOVER_S)
    assert str(service.claim_state) == "lost"  # (mypy narrowed it to "owner" above)


async def _terminated(conn: asyncpg.Connection, app: str) -> bool:
    """End every session of ``app`` that holds an advisory lock; True once one was ended."""
    return bool(
        await conn.fetchval(
            "SELECT bool_or(pg_terminate_backend(a.pid)) FROM pg_stat_activity a JOIN pg_locks l USING (pid) "
            "WHERE l.locktype = 'advisory' AND a.application_name = $1",
            app,
        )
    )


class _Idle:
    """A claimed worker that does nothing until it is shut down."""

    name = "idle"

    def __init__(self, started: asyncio.Event) -> None:
        self._started = started
        self._stop = asyncio.Event()

    async def run(self) -> None:
        self._started.set()
        await self._stop.wait()

    def shutdown(self) -> None:
        self._stop.set()


async def test_a_worker_that_lost_its_claim_gives_the_connection_back_so_its_pool_closes(
    harness: Harness, pools: tuple[asyncpg.Pool, asyncpg.Pool]
) -> None:
    # Seen in the PostgreSQL outage fault test: the projector lost its claim, and its process hung
    # for ever in the pool's close, which waits for the claim's connection, never given back.
    claim = AdvisoryClaim(pools[0], harness.settings.db_schema, "conflicts", poll_s=0.1)
    started = asyncio.Event()

    async def start() -> _Idle:
        return _Idle(started)

    service = ClaimedService("conflicts", harness.nc, claim, start, check_s=0.1)
    running = asyncio.create_task(service.run())
    await asyncio.wait_for(started.wait(), 5)
    async with claim.connection() as conn:  # the session lives on; the lock is gone
        await conn.execute("SELECT pg_advisory_unlock_all()")
    with pytest.raises(ClaimLost):
        await asyncio.wait_for(running, TAKEOVER_S)
    assert pools[0].get_size() == pools[0].get_idle_size(), "a connection is still out of the pool"
    await asyncio.wait_for(pools[0].close(), 10)


async def test_a_services_pool_closes_even_with_a_connection_never_given_back(harness: Harness) -> None:
    stack = AsyncExitStack()
    pool = await open_pool(harness.settings, stack, "projector", app="noema-test-leak", max_size=2)
    await pool.acquire()  # never released
    await asyncio.wait_for(stack.aclose(), POOL_CLOSE_S + 10)
    assert pool.is_closing()


async def test_a_claims_connection_left_in_a_broken_protocol_state_loses_the_claim(
    harness: Harness, pools: tuple[asyncpg.Pool, asyncpg.Pool]
) -> None:
    # After a PostgreSQL restart a connection can come back in a state asyncpg's protocol refuses:
    # the session's state is unknown, so the owner must not write on it again.
    claim = AdvisoryClaim(pools[0], harness.settings.db_schema, "conflicts", poll_s=0.1)
    assert await claim.acquire(asyncio.Event())
    broken = asyncpg.InternalClientError("cannot switch to state 15; another operation (2) is in progress")
    with pytest.raises(ClaimLost, match="cannot switch to state"):
        async with claim.connection():
            raise broken
    assert claim.state == "lost"
    await claim.release()
    assert pools[0].get_size() == pools[0].get_idle_size(), "a connection is still out of the pool"
