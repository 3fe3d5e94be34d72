"""Observations through attend and the projector into the read model, on real NATS + PostgreSQL."""

from __future__ import annotations

import asyncio

import pytest

from noema.adapters.postgres import MemoryQueries, ReadModelProjection, checksum
from noema.adapters.postgres.projection import Projected
from noema.client import publish_observation
from noema.composition.replay import drop_schema, replay_into
from noema_attend.service import build as build_attend
from noema_events import decode_event
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.support import assert_eventually, keyword_search

pytestmark = pytest.mark.integration


async def test_an_observation_becomes_a_searchable_memory_with_its_origin_event(harness: Harness) -> None:
    await harness.start(build_attend)
    await harness.start(build_projector)
    await publish_observation(
        harness.js,
        "the deploy key rotates on Fridays",
        workspace="acme",
        mind="ops",
        topology=harness.topology,
    )
    queries = MemoryQueries(harness.pool)
    hits = await assert_eventually(lambda: keyword_search(harness.pool, "deploy key", workspace="acme"))
    assert hits[0].content == "the deploy key rotates on Fridays"
    detail = await queries.get(hits[0].id)
    assert detail is not None
    assert detail["origin"]["type"] == "memory.created.v1"
    assert detail["origin"]["id"] == detail["origin_event"]
    assert detail["origin"]["causation_id"] == detail["source_observation_ids"][0]


async def test_a_retried_publish_is_stored_once(harness: Harness) -> None:
    first = await publish_observation(
        harness.js,
        "a retried thing",
        workspace="acme",
        mind="ops",
        observation_id="obs-1",
        topology=harness.topology,
    )
    again = await publish_observation(
        harness.js,
        "a retried thing",
        workspace="acme",
        mind="ops",
        observation_id="obs-1",
        topology=harness.topology,
    )
    assert first == again
    info = await harness.js.stream_info(harness.topology.observation_stream)
    assert info.state.messages == 1


async def test_malformed_observations_are_dead_lettered_with_the_reason_and_the_worker_keeps_going(
    harness: Harness,
) -> None:
    await harness.start(build_attend)
    await harness.start(build_projector)
    subject = harness.topology.observation_subject("acme", "ops")
    await harness.js.publish(subject, b"{this is not json")
    await harness.js.publish(subject, b'{"type": "observation.recorded.v1", "id": "x", "workspace": "acme"}')
    await harness.js.publish(
        harness.topology.observation_subject("acme", "other"), (await _valid_observation_bytes("ops"))
    )
    await publish_observation(
        harness.js,
        "the worker is still alive and well",
        workspace="acme",
        mind="ops",
        topology=harness.topology,
    )

    queries = MemoryQueries(harness.pool)
    await assert_eventually(lambda: keyword_search(harness.pool, "alive", workspace="acme"))
    assert await queries.count("acme") == 1

    dlq = await harness.js.pull_subscribe(
        harness.topology.dead_letter_subjects, stream=harness.topology.dead_letter_stream
    )
    msgs = await dlq.fetch(3, timeout=5)
    reasons = [(m.headers or {})["Noema-Error"] for m in msgs]
    assert "not valid JSON" in reasons[0]
    assert "missing required field" in reasons[1]
    assert "does not match" in reasons[2]
    assert msgs[0].data == b"{this is not json"  # nothing lost: the original bytes are kept


async def _valid_observation_bytes(mind: str) -> bytes:
    from noema.client import build_observation
    from noema_events import encode_event

    return encode_event(build_observation("misrouted but valid", workspace="acme", mind=mind))


async def test_a_redelivered_batch_is_a_no_op(harness: Harness) -> None:
    await harness.start(build_attend)
    for i in range(5):
        await publish_observation(
            harness.js,
            f"observation number {i} about the deploy",
            workspace="acme",
            mind="ops",
            topology=harness.topology,
        )
    info = await assert_eventually(lambda: _events_at_least(harness, 6), timeout=10)
    from noema.adapters.jetstream import read_stream

    batch = []
    async for msgs in read_stream(
        harness.nc, harness.topology.event_stream, harness.topology.event_subjects, 1, info
    ):
        batch += [Projected(m.metadata.sequence.stream, m.subject, decode_event(m.data)) for m in msgs]
    projection = ReadModelProjection()
    async with harness.pool.acquire() as conn:
        assert await projection.apply(conn, batch) == len(batch)
        before = await checksum(conn)
        assert await projection.apply(conn, batch) == 0
        assert await projection.apply(conn, batch[:3]) == 0
        assert await checksum(conn) == before
        assert await projection.position(conn) == batch[-1].seq
    assert await MemoryQueries(harness.pool).count() == 5


async def _events_at_least(harness: Harness, n: int) -> int | None:
    info = await harness.js.stream_info(harness.topology.event_stream)
    return int(info.state.last_seq) if info.state.messages >= n else None


async def test_replay_into_fresh_tables_reproduces_the_live_read_model(harness: Harness) -> None:
    await harness.start(build_attend)
    await harness.start(build_projector)
    for i in range(30):
        await publish_observation(
            harness.js,
            f"fact {i}: the service {i} talks to queue {i % 4}",
            workspace="acme",
            mind=f"m{i % 3}",
            channel="operator" if i % 7 == 0 else "user",
            topology=harness.topology,
        )
    queries = MemoryQueries(harness.pool)
    await assert_eventually(lambda: _count_is(queries, 30))
    last = await _events_at_least(harness, 1)
    assert last is not None
    projection = ReadModelProjection()
    await assert_eventually(lambda: _position_is(harness, projection, last))
    async with harness.pool.acquire() as conn:
        live = await checksum(conn)

    schema = f"replay_{harness.settings.db_schema}"
    result = await replay_into(harness.nc, harness.settings.database_url or "", harness.topology, schema)
    try:
        assert result.checksum == live
        assert result.last_seq == last
        assert result.events == last
    finally:
        await drop_schema(harness.settings.database_url or "", schema)

    # Point in time: the state as of an earlier sequence is a different, smaller model.
    early = await replay_into(
        harness.nc, harness.settings.database_url or "", harness.topology, schema, until_seq=4
    )
    await drop_schema(harness.settings.database_url or "", schema)
    assert early.last_seq == 4
    assert early.checksum != live


async def _count_is(queries: MemoryQueries, n: int) -> bool:
    return await queries.count() == n


async def _position_is(harness: Harness, projection: ReadModelProjection, seq: int) -> bool:
    async with harness.pool.acquire() as conn:
        return await projection.position(conn) == seq


async def test_the_checksum_changes_when_any_projected_value_changes(harness: Harness) -> None:
    await harness.start(build_attend)
    await harness.start(build_projector)
    await publish_observation(
        harness.js,
        "something worth remembering here",
        workspace="acme",
        mind="ops",
        topology=harness.topology,
    )
    await assert_eventually(lambda: _count_is(MemoryQueries(harness.pool), 1))
    async with harness.pool.acquire() as conn:
        before = await checksum(conn)
        tx = conn.transaction()
        await tx.start()
        await conn.execute("UPDATE memories SET activation = 0.999999")
        changed = await checksum(conn)
        await tx.rollback()
        assert changed != before
        assert await checksum(conn) == before


async def test_migrations_are_idempotent_and_safe_to_run_concurrently(harness: Harness) -> None:
    from noema.adapters.postgres import migrate

    url = harness.settings.database_url or ""
    results = await asyncio.gather(*(migrate(url, harness.settings.db_schema) for _ in range(4)))
    assert results == [[], [], [], []]


async def test_an_event_the_database_refuses_is_dead_lettered_and_the_projector_goes_on(
    harness: Harness,
) -> None:
    import secrets
    from datetime import UTC, datetime

    from noema.adapters.jetstream import EventPublisher
    from noema.ids import new_id
    from noema_events import MemoryCreated, MemoryCreatedPayload

    def created(content: str, correlation: str) -> MemoryCreated:
        mid = new_id()
        return MemoryCreated(
            id=new_id(),
            workspace="acme",
            mind="ops",
            occurred_at=datetime.now(UTC),
            correlation_id=correlation,
            actor="test",
            payload=MemoryCreatedPayload(
                memory_id=mid, kind="episodic", epistemic_kind="observation", content=content
            ),
        )

    # A correlation id too large for a b-tree index: it decodes, but PostgreSQL can never store it.
    poison = created("the poisoned one", secrets.token_hex(10_000))  # incompressible
    events = [created("before", "c1"), poison, created("after", "c2")]
    await EventPublisher(harness.nc, harness.topology).publish(events)
    await harness.start(build_projector)
    await assert_eventually(
        lambda: harness.pool.fetchval(
            "SELECT count(*) = 2 FROM memories WHERE content IN ('before', 'after')"
        )
    )
    assert (
        await harness.pool.fetchval("SELECT count(*) FROM memories WHERE content = 'the poisoned one'") == 0
    )
    dlq = await harness.js.pull_subscribe(
        harness.topology.dead_letter_subjects, stream=harness.topology.dead_letter_stream
    )
    [msg] = await dlq.fetch(1, timeout=5)
    assert decode_event(msg.data).id == poison.id
    assert "refused by the database" in (msg.headers or {}).get("Noema-Error", "")

    async with harness.pool.acquire() as conn:
        live = await checksum(conn)
    schema = f"replay_{harness.settings.db_schema}"
    result = await replay_into(harness.nc, harness.settings.database_url or "", harness.topology, schema)
    try:
        assert result.checksum == live, "replay skips the refused event exactly as the live projector did"
    finally:
        await drop_schema(harness.settings.database_url or "", schema)
