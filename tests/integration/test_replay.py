"""``noemactl replay`` on real servers: the comparison is made at one stream sequence for both sides,
so a busy system matches; a real divergence is named row by row; ``until`` takes a time."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from noema.adapters import jetstream
from noema.adapters.jetstream import EventPublisher
from noema.adapters.postgres import ReadModelProjection
from noema.adapters.pull import Puller
from noema.client import publish_observation
from noema.composition.replay import drop_schema, verify_replay
from noema_attend.service import build as build_attend
from noema_events import Event, MemoryEmbedded, MemoryEmbeddedPayload
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.support import assert_eventually, envelope, memory_created

pytestmark = pytest.mark.integration

OBSERVATIONS = 2_000


async def _position(harness: Harness) -> int:
    async with harness.pool.acquire() as conn:
        return await ReadModelProjection().position(conn)


async def _memories(harness: Harness) -> int:
    return int(await harness.pool.fetchval("SELECT count(*) FROM memories"))


async def _observe(harness: Harness, n: int) -> None:
    for i in range(n):
        await publish_observation(
            harness.js,
            f"observation {i}: host-{i % 17} reported status {i % 5} after the deploy",
            workspace="acme",
            mind=f"m{i % 3}",
            topology=harness.topology,
        )


async def test_replay_on_a_system_ingesting_2000_observations_matches(harness: Harness) -> None:
    await harness.start(build_attend)
    await harness.start(build_projector)
    ingesting = asyncio.create_task(_observe(harness, OBSERVATIONS))
    try:
        await assert_eventually(lambda: _position(harness), what="the first projected events")
        report = await verify_replay(harness.settings, harness.nc)
        moved_on = await _position(harness)
    finally:
        await ingesting
    assert report["match"] is True, report.get("differences")
    assert report["checksum"] == report["live_checksum"]
    assert report["last_seq"] == report["live_position"]
    assert moved_on > report["live_position"], "the system kept projecting during the replay"


async def _projected(harness: Harness, n: int) -> None:
    """Attend and the projector running, ``n`` observations observed and projected as memories."""
    await harness.start(build_attend)
    await harness.start(build_projector)
    await _observe(harness, n)
    await assert_eventually(lambda: _count_is(harness, n), what=f"{n} memories")


async def test_a_corrupted_live_row_is_named_with_the_column_that_differs(harness: Harness) -> None:
    await _projected(harness, 5)
    corrupted = await harness.pool.fetchval("SELECT id FROM memories ORDER BY id OFFSET 2 LIMIT 1")
    await harness.pool.execute("UPDATE memories SET activation = 0.125 WHERE id = $1", corrupted)

    report = await verify_replay(harness.settings, harness.nc)

    assert report["match"] is False
    # The update wrote the live row and, through the history's trigger, its open version.
    assert report["differences"]["count"] == {"memories": 1, "memories_history": 1}
    row, version = report["differences"]["rows"]
    assert (row["table"], row["key"], row["in"]) == ("memories", {"id": corrupted}, "both")
    assert (version["table"], version["in"], list(version["columns"])) == (
        "memories_history",
        "both",
        ["activation"],
    )
    assert list(row["columns"]) == ["activation"]
    assert row["columns"]["activation"]["live"] == 0.125
    assert row["columns"]["activation"]["replay"] != 0.125


async def test_a_row_missing_from_the_live_model_is_named(harness: Harness) -> None:
    await _projected(harness, 3)
    first = await harness.pool.fetchval("SELECT min(seq) FROM events")
    await harness.pool.execute("DELETE FROM events WHERE seq = $1", first)

    report = await verify_replay(harness.settings, harness.nc)

    assert report["match"] is False
    assert report["differences"]["count"] == {"events": 1}
    assert report["differences"]["rows"] == [
        {"table": "events", "key": {"seq": str(first)}, "in": "replay only"}
    ]


async def _count_is(harness: Harness, n: int) -> bool:
    return await _memories(harness) == n


async def _published(harness: Harness, events: list[Event]) -> int:
    return await EventPublisher(harness.nc, harness.topology).publish(events)


async def test_replay_until_a_time_stops_at_the_last_event_the_stream_had_stored_by_then(
    harness: Harness,
) -> None:
    early = await _published(harness, [memory_created("before the meeting")])
    stored = await harness.js.get_msg(harness.topology.event_stream, early)
    assert stored.time is not None
    await _published(harness, [memory_created("after the meeting"), memory_created("later still")])

    at = await verify_replay(harness.settings, harness.nc, until=stored.time)
    assert (at["last_seq"], at["events"]) == (early, 1)
    assert at["until"] == {"seq": early, "time": stored.time.isoformat()}

    in_another_zone = stored.time.astimezone(tz=None)  # the same moment, written in the local zone
    assert (await verify_replay(harness.settings, harness.nc, until=in_another_zone))["last_seq"] == early

    before = await verify_replay(harness.settings, harness.nc, until=stored.time - timedelta(microseconds=1))
    assert (before["last_seq"], before["events"]) == (early - 1, 0)

    by_seq = await verify_replay(harness.settings, harness.nc, until=early + 1)
    assert (by_seq["last_seq"], by_seq["until"]) == (early + 1, {"seq": early + 1})


async def test_a_vector_the_live_index_refused_is_refused_by_replay_too(harness: Harness) -> None:
    memory = memory_created("a memory with two vectors of one model")
    vectors = [
        MemoryEmbedded(
            **envelope(),
            payload=MemoryEmbeddedPayload(
                memory_id=memory.payload.memory_id, model="tiny", dimensions=dims, vector=[0.5] * dims
            ),
        )
        for dims in (3, 4)  # the model's index is made for 3 dimensions: the 4-dimensional one is refused
    ]
    last = await _published(harness, [memory, *vectors])
    await harness.start(build_projector)
    await assert_eventually(lambda: _position_is(harness, last), what="the projector at the last event")
    assert await harness.pool.fetchval("SELECT count(*) FROM memory_embeddings") == 1

    report = await verify_replay(harness.settings, harness.nc)
    assert report["match"] is True, report.get("differences")


async def _position_is(harness: Harness, seq: int) -> bool:
    return await _position(harness) == seq


async def test_the_stream_is_read_in_full_batches_whatever_the_server_delivers(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server hands out 7 messages per pull request here; a reader still gets batches of 100.
    monkeypatch.setattr(
        jetstream, "Puller", lambda nc, stream, consumer, batch: Puller(nc, stream, consumer, 7)
    )
    last = await _published(harness, [memory_created(f"memory {i}") for i in range(250)])
    sizes = [
        len(msgs)
        async for msgs in jetstream.read_stream(
            harness.nc, harness.topology.event_stream, harness.topology.event_subjects, 1, last, 100
        )
    ]
    assert sizes == [100, 100, 50]


async def test_a_replay_kept_for_queries_holds_the_live_postings_and_word_counts(harness: Harness) -> None:
    # The bulk load writes the BM25 postings once at the end instead of through their triggers.
    await _projected(harness, 60)
    report = await verify_replay(harness.settings, harness.nc, keep=True)
    try:
        assert report["match"] is True, report.get("differences")
        for table, order in (("memory_postings", "1, 2, 3"), ("memory_terms", "1, 2")):
            live = await harness.pool.fetch(f"SELECT * FROM {table} ORDER BY {order}")
            kept = await harness.pool.fetch(f'SELECT * FROM "{report["schema"]}".{table} ORDER BY {order}')
            assert live, table
            assert [tuple(r) for r in kept] == [tuple(r) for r in live], table
    finally:
        await drop_schema(harness.settings.database_url, report["schema"])
