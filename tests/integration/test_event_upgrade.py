"""Deploying a release whose events have a second version over a stream the first version wrote: the
new projector reads every v1 event as v2 (the upcasters fill the values the v1 projector applied)
and holds exactly the read model the v1 projector built, its audit copy of each event included;
the new producers then write v2 events beside them, and a replay of the mixed stream still matches
the live read model."""

from __future__ import annotations

from datetime import timedelta

import pytest

from noema.adapters.jetstream import EventPublisher, stream_last_seq
from noema.adapters.postgres import MemoryQueries, ReadModelProjection, checksum
from noema.application import upkeep
from noema.application.access import Caller
from noema.composition.instance import connected_knowledge
from noema.composition.replay import drop_schema, replay_into
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.integration.recorded_stream import (
    V1_ROWS,
    V1_STREAM,
    publish_recorded,
    sorted_rows,
    table_rows,
)
from tests.support import assert_eventually

pytestmark = pytest.mark.integration


async def _caught_up(h: Harness) -> None:
    async def check() -> bool:
        last = await stream_last_seq(h.js, h.topology.event_stream)
        async with h.pool.acquire() as conn:
            return await ReadModelProjection().position(conn) == last

    await assert_eventually(check)


async def _types(h: Harness) -> set[str]:
    return {r["type"] for r in await h.pool.fetch("SELECT DISTINCT type FROM events")}


async def test_the_v2_projector_over_a_v1_stream_holds_what_the_v1_projector_built(harness: Harness) -> None:
    await publish_recorded(harness, V1_STREAM)
    await harness.start(build_projector)
    await _caught_up(harness)

    async with harness.pool.acquire() as conn:
        assert await table_rows(conn, V1_ROWS) == sorted_rows(V1_ROWS)
    assert {
        "memory.retrieved.v1",
        "fact.proposed.v1",
        "fact.mentioned.v1",
        "activation.decayed.v1",
    } <= await _types(harness)
    # What migration 0012 gives the rows of a read model built before it, as defaults, is what
    # projecting the stream writes: so a replay after upgrading still matches, with no rebuild.
    decays_with = await harness.pool.fetch("SELECT DISTINCT half_life_days, activation_floor FROM memories")
    assert [tuple(r) for r in decays_with] == [(14.0, 1e-6)]


async def test_v2_events_written_beside_v1_ones_replay_to_the_live_read_model(harness: Harness) -> None:
    await publish_recorded(harness, V1_STREAM)
    await harness.start(build_projector)
    await _caught_up(harness)
    tick = await harness.pool.fetchval("SELECT max(activation_at) FROM memories WHERE workspace = 'acme'")

    # The new release's producers decide on the same memories: a recall, a decay tick, a fact and a
    # mention of it (in the attic, a workspace in compatible mode).
    publisher, queries = EventPublisher(harness.nc, harness.topology), MemoryQueries(harness.pool)
    await upkeep.record_retrieval(queries, publisher, "mem-deploy-key", now=tick + timedelta(days=1))
    await upkeep.decay_tick(queries, publisher, tick + timedelta(days=3))
    knowledge = connected_knowledge(harness.pool, harness.nc, harness.topology, clock=lambda: tick)
    ann = Caller("attic", "ann", "dev")
    await knowledge.propose_fact(ann, "boxes", "where", "The old box is in the attic", veracity="inferred")
    await _caught_up(harness)
    await knowledge.propose_fact(ann, "boxes", "where", "the old box is in the attic", veracity="tool")
    await _caught_up(harness)
    assert {
        "memory.retrieved.v2",
        "fact.proposed.v2",
        "fact.mentioned.v2",
        "activation.decayed.v2",
    } <= await _types(harness)

    async with harness.pool.acquire() as conn:
        live = await checksum(conn)
    schema = f"replay_{harness.settings.db_schema}"
    url = harness.settings.database_url or ""
    try:
        result = await replay_into(harness.nc, url, harness.topology, schema)
        assert result.checksum == live
    finally:
        await drop_schema(url, schema)
