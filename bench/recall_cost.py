"""Where a recall's time goes, step by step: the retrieve worker's recall and a search's.

    python -m bench.recall_cost [--memories 2000] [--queries 300] [--out FILE]

On bench.recall_latency's synthetic workspace (``--memories``, the size of a bench.load run's;
Zipf-distributed words, random unit vectors, as many relationships), times each database step of
``Recall.search`` (client side: a query's round trip, its planning and execution) for ``--queries``
observation-like texts of 10–20 words with a query vector given, sequentially after a warm-up:

- ``retrieve_all_words``: as retrieve recalled before (depth 12, 4 results, every selective word);
- ``retrieve``: as retrieve recalls now (``noema_retrieve.service``: ``TEXT_TERMS`` rarest words,
  no display fields);
- ``search``: as a search over the API does (depth 50, 10 results).

Per case: ``wall_ms`` and ``client_cpu_ms`` per recall, ``steps_ms`` (mean ms per recall of each
store call), and ``top3_same_as_all_words`` — the share of recalls whose best three are the same
as with every word (on random data that is a measure of change, not of quality). JSON on stdout
(and in ``--out``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import random
import time
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np

from noema.adapters.postgres import voices as pg_recall
from noema.adapters.postgres.voices import RecallStore
from noema.application.search import Recall
from noema.ports import RecallFilters
from noema_retrieve.service import DEPTH, PROPOSALS, TEXT_TERMS

from ._output import emit
from ._servers import servers
from .recall_latency import _Named, _sentence, _unit, build

SELECTIVE = "selective_query"
"""The text voice's word lookup, as the recall adapter imported it (timed there)."""
STEPS = ("lexical", "semantic", "graph", "candidates", "details", "recent")


def _timed(
    spent: dict[str, float], name: str, fn: Callable[..., Awaitable[Any]]
) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(fn)
    async def timed(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return await fn(*args, **kwargs)
        finally:
            spent[name] += (time.perf_counter() - t) * 1000

    return timed


async def run(n: int, queries: int) -> dict[str, Any]:
    spent: dict[str, float] = defaultdict(float)
    originals = {name: getattr(RecallStore, name) for name in STEPS}
    original_selective = getattr(pg_recall, SELECTIVE)
    for name, fn in originals.items():
        setattr(RecallStore, name, _timed(spent, name, fn))
    setattr(pg_recall, SELECTIVE, _timed(spent, "selective_query (inside lexical)", original_selective))
    try:
        with servers() as (_, db_url):
            schema = f"cost{uuid.uuid4().hex[:8]}"
            await build(db_url, schema, n)
            pool = await RecallStore.create_pool(db_url, schema, min_size=1, max_size=2)
            try:
                recall = Recall(await RecallStore.open(pool), _Named())
                rng, nrng = random.Random(3), np.random.default_rng(3)
                texts = [_sentence(rng, rng.randint(10, 20)) for _ in range(queries)]
                vectors = _unit(nrng, queries)
                scoped = RecallFilters(workspace="bench", mind="m", exclude_ids=("none",))
                cases: dict[str, tuple[RecallFilters, dict[str, Any]]] = {
                    "retrieve_all_words": (scoped, {"limit": PROPOSALS + 1, "depth": DEPTH}),
                    "retrieve": (
                        scoped,
                        {"limit": PROPOSALS + 1, "depth": DEPTH, "text_terms": TEXT_TERMS, "details": False},
                    ),
                    "search": (RecallFilters(workspace="bench"), {"limit": 10}),
                }
                out: dict[str, Any] = {"memories": n, "queries": queries, "text_terms": TEXT_TERMS}
                baseline: list[list[str]] = []
                for label, (filters, options) in cases.items():
                    for text, v in zip(texts[:20], vectors[:20], strict=True):  # warm-up
                        await recall.search(text, filters, query_vector=list(v), **options)
                    spent.clear()
                    tops = []
                    t, cpu = time.perf_counter(), time.process_time()
                    for text, v in zip(texts, vectors, strict=True):
                        response = await recall.search(text, filters, query_vector=list(v), **options)
                        tops.append([r.id for r in response.results[:PROPOSALS]])
                    wall = (time.perf_counter() - t) * 1000 / queries
                    cpu_ms = (time.process_time() - cpu) * 1000 / queries
                    baseline = baseline or tops
                    out[label] = {
                        "wall_ms": round(wall, 2),
                        "client_cpu_ms": round(cpu_ms, 2),
                        "steps_ms": {
                            k: round(v / queries, 2) for k, v in sorted(spent.items(), key=lambda kv: -kv[1])
                        },
                        "top3_same_as_all_words": round(
                            sum(a == b for a, b in zip(tops, baseline, strict=True)) / queries, 3
                        ),
                    }
            finally:
                await pool.close()
                conn = await asyncpg.connect(db_url)
                await conn.execute(f"DROP SCHEMA {schema} CASCADE")
                await conn.close()
    finally:
        for name, fn in originals.items():
            setattr(RecallStore, name, fn)
        setattr(pg_recall, SELECTIVE, original_selective)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    emit(asyncio.run(run(args.memories, args.queries)), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
