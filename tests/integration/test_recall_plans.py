"""The semantic voice's plan does not depend on the read model's statistics: before autovacuum has
analysed a young workspace, each nearest neighbour's memory is still read by its primary key (it
was read through the whole (workspace, mind) scope once per neighbour: 10 ms instead of 1 at 200
memories, and growing with the workspace)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec
import numpy as np
import pytest

from noema.adapters.jetstream import EventPublisher
from noema.adapters.postgres import voices
from noema.adapters.postgres.queries import MemoryQueries
from noema.adapters.postgres.voices import RecallStore
from noema.application import upkeep
from noema.application.search import Recall
from noema.ports import RecallFilters
from noema.runtime.embedded import machine_memory, shared_buffers_mb
from noema_projector.service import build as build_projector
from tests.conftest import Harness, Servers
from tests.integration.test_recall import NOW, given, memory
from tests.support import assert_eventually

pytestmark = pytest.mark.integration


class RandomUnit:
    """Seeded random unit vectors of e5's size under a model name of their own: the plan, not the
    vectors' meaning, is under test (and 200 real embeddings would take seconds)."""

    name = "test/random-unit"
    dimensions = 384

    def __init__(self) -> None:
        self._rng = np.random.default_rng(7)

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        v = self._rng.standard_normal((len(texts), self.dimensions))
        return [list(map(float, row / np.linalg.norm(row))) for row in v]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_passages([text])[0]


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


async def test_each_neighbour_is_read_by_its_primary_key_before_any_statistics(harness: Harness) -> None:
    # Autovacuum may analyse a table at any minute: not these, so the statistics stay missing.
    for table in ("memories", "memory_embeddings"):
        await harness.pool.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    await harness.start(build_projector)
    embedder = RandomUnit()
    await given(
        harness,
        *(memory(f"note {i} about the billing service") for i in range(200)),
        embed=True,
        embedder=embedder,
    )
    store = await RecallStore.open(harness.pool)
    async with harness.pool.acquire() as conn:
        analysed = await conn.fetchval(
            "SELECT last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL FROM pg_stat_user_tables "
            "WHERE relname = 'memories' AND schemaname = current_schema()"
        )
        assert analysed is False, "the case under test is a read model not analysed yet"
        for f in (
            RecallFilters(workspace="acme"),
            RecallFilters(workspace="acme", mind="ops", exclude_ids=("x",)),
        ):
            args: list[Any] = ["[" + ",".join(map(repr, embedder.embed_query("billing"))) + "]"]
            sql = store.semantic_sql(embedder.dimensions, embedder.name, f, args, 50)
            [explained] = json.loads(await conn.fetchval("EXPLAIN (FORMAT JSON) " + sql, *args))
            reads = [n for n in nodes(explained["Plan"]) if n.get("Relation Name") == "memories"]
            assert reads, explained
            for read in reads:
                assert read.get("Index Cond") == "(id = e.memory_id)", json.dumps(read, indent=1)


async def test_a_small_workspace_in_a_large_store_gets_its_true_nearest_neighbours(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The HNSW scan is bounded (hnsw.max_scan_tuples): walking a store where one workspace holds a
    # few percent of the vectors, it meets only a few of that workspace's memories. Scaled down
    # here (a bound of 200 over 1,040 vectors, as 2,000 over 100,000 in a real store).
    monkeypatch.setattr(voices, "EF_SEARCH", 20)
    monkeypatch.setattr(voices, "MAX_SCAN_TUPLES", 200)
    await harness.start(build_projector)
    embedder = RandomUnit()
    others = [msgspec.structs.replace(memory(f"note {i}"), workspace="globex") for i in range(1000)]
    await given(
        harness, *others, *(memory(f"acme note {i}") for i in range(40)), embed=True, embedder=embedder
    )
    await harness.pool.execute("ANALYZE memory_embeddings")
    pool = await RecallStore.create_pool(
        harness.settings.database_url, harness.settings.db_schema, workspace="*", min_size=1, max_size=1
    )
    try:
        store = await RecallStore.open(pool)
        query = embedder.embed_query("a note")
        f = RecallFilters(workspace="acme")
        got = await store.semantic(query, embedder.name, f, 20)
        async with pool.acquire() as conn:
            await conn.execute("SET enable_indexscan = off")  # every acme vector compared: the oracle
            args: list[Any] = ["[" + ",".join(map(repr, query)) + "]"]
            exact = await conn.fetch(
                store.semantic_sql(embedder.dimensions, embedder.name, f, args, 20), *args
            )
            await conn.execute("RESET enable_indexscan")
            assert await conn.fetchval("SHOW hnsw.max_scan_tuples") == "200"
    finally:
        await pool.close()
    assert len(got) == 20
    assert [i for i, _ in got] == [r["id"] for r in exact]
    assert [s for _, s in got] == pytest.approx([r["score"] for r in exact])


async def test_vector_mode_equals_exact_cosine_search_on_a_scope_under_the_threshold(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A narrow HNSW walk (ef_search 10) on random vectors misses true neighbours; a scope under
    # the threshold must not depend on it, whether the store is small or large.
    monkeypatch.setattr(voices, "EF_SEARCH", 10)
    await harness.start(build_projector)
    embedder = RandomUnit()
    others = [msgspec.structs.replace(memory(f"note {i}"), workspace="globex") for i in range(300)]
    await given(
        harness, *others, *(memory(f"acme note {i}") for i in range(300)), embed=True, embedder=embedder
    )
    await harness.pool.execute("ANALYZE memory_embeddings")
    rows = await harness.pool.fetch(
        "SELECT e.memory_id, e.embedding::text AS v FROM memory_embeddings e "
        "JOIN memories m ON m.id = e.memory_id WHERE m.workspace = 'acme'"
    )
    ids = [r["memory_id"] for r in rows]
    matrix = np.asarray([json.loads(r["v"]) for r in rows])
    pool = await RecallStore.create_pool(
        harness.settings.database_url, harness.settings.db_schema, workspace="*", min_size=1, max_size=1
    )
    try:
        recall = Recall(await RecallStore.open(pool), embedder)
        for i in range(5):
            query = embedder.embed_query(f"question {i}")
            got = await recall.search(
                "q", RecallFilters(workspace="acme"), mode="vector", limit=20, query_vector=query
            )
            cosine = matrix @ np.asarray(query) / np.linalg.norm(matrix, axis=1)
            oracle = [ids[j] for j in np.argsort(-cosine, kind="stable")[:20]]
            assert [r.id for r in got.results] == oracle
            assert [r.score for r in got.results] == pytest.approx(sorted(cosine, reverse=True)[:20])
    finally:
        await pool.close()


def test_the_semantic_voice_compares_exactly_only_a_scope_under_the_threshold() -> None:
    assert voices.searched_exactly(300)
    assert voices.searched_exactly(voices.EXACT_SCOPE_MAX)
    assert not voices.searched_exactly(voices.EXACT_SCOPE_MAX + 1)
    assert not voices.searched_exactly(100_000)


async def test_the_embedded_server_runs_with_shared_buffers_sized_to_the_machine(
    harness: Harness, servers: Servers
) -> None:
    if servers.nats is None:
        pytest.skip("containers: PostgreSQL's settings are the container's")
    pages = await harness.pool.fetchval("SELECT setting::int FROM pg_settings WHERE name = 'shared_buffers'")
    assert pages * 8 // 1024 == shared_buffers_mb(machine_memory())


async def test_the_graph_walk_is_planned_once_per_connection(harness: Harness) -> None:
    await harness.start(build_projector)
    a, b, c = await given(harness, memory("alpha"), memory("beta"), memory("gamma"))
    queries, publisher = MemoryQueries(harness.pool), EventPublisher(harness.nc, harness.topology)
    await upkeep.relate(queries, publisher, a, b, "related_to", now=NOW)
    await upkeep.relate(queries, publisher, b, c, "related_to", now=NOW)
    await assert_eventually(lambda: harness.pool.fetchval("SELECT count(*) = 2 FROM relationships"))
    pool = await RecallStore.create_pool(
        harness.settings.database_url, harness.settings.db_schema, workspace="*", min_size=1, max_size=1
    )
    try:
        store = await RecallStore.open(pool)
        for _ in range(3):
            walked, rows = await store.graph({a: 1.0}, RecallFilters(workspace="acme"), 10, None, NOW)
            assert [m for m, _ in walked] == [b, c]
            assert set(rows) == {b, c}
        async with pool.acquire() as conn:
            plans = await conn.fetchrow(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE statement LIKE '%WITH seeds AS%' AND statement NOT LIKE '%pg_prepared_statements%'"
            )
            assert await conn.fetchval("SHOW plan_cache_mode") == "force_custom_plan"
    finally:
        await pool.close()
    assert plans is not None
    assert plans["custom_plans"] == 0
    assert plans["generic_plans"] == 3
