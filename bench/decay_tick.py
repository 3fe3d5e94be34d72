"""Decay-tick benchmark: how long the projector falls behind while it applies a decay tick.

    python -m bench.decay_tick [--memories N] [--ticks K] [--out FILE]

On embedded servers (bench._servers; or NOEMA_NATS_URL and NOEMA_DATABASE_URL), with the projector
running as its own process (as `noemactl up` runs it):

1. N ``memory.created`` events in one workspace, projected.
2. before: K ticks as the decay worker of the earlier release published them
   (``activation.decayed.v1``, which the projector still applies as recorded: every memory of the
   workspace rewritten, decayed to the tick), each followed at once by a probe event; the lag is
   the time from publishing the tick until the probe is projected.
3. after: K ticks as today's decay worker publishes them (``upkeep.decay_tick``: a read of what
   faded or expired since the previous tick, then one event that rewrites no row), each followed
   by a probe; the lag is measured the same way, from the tick's publication. The worker's read
   (off the projector, on a reader connection) is reported apart.

Both halves run in the same process against the same read model, one after the other. Prints JSON
{"memories", "before_lag_s", "after_lag_s", "ratio", "after_worker_read_s", ...} (worst of K ticks,
and every tick's figure), also to FILE.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg

from noema.adapters.jetstream import EventPublisher, connect, ensure_streams
from noema.adapters.postgres import MemoryQueries
from noema.adapters.postgres.database import create_pool, migrate
from noema.adapters.postgres.position import projected_seq
from noema.application import upkeep
from noema.ids import derive_id
from noema.runtime.settings import Settings
from noema.topology import Topology
from noema_events import (
    ActivationDecayed,
    Event,
    MemoryCreated,
    MemoryCreatedPayload,
    NotesUpdated,
    NotesUpdatedPayload,
)
from noema_events.upcasting import ActivationDecayedV1, ActivationDecayedV1Payload

from ._output import emit
from ._servers import servers

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WORKSPACE = "acme"


def _created(i: int) -> MemoryCreated:
    return MemoryCreated(
        id=derive_id("bench-created", str(i)),
        workspace=WORKSPACE,
        mind="ops",
        occurred_at=T0 + timedelta(seconds=i),
        correlation_id="bench",
        actor="attend",
        payload=MemoryCreatedPayload(
            memory_id=derive_id("bench-memory", str(i)),
            kind="episodic",
            epistemic_kind="observation",
            content=f"observation number {i} about the deploy pipeline and its keys",
            importance=(i % 10) / 10,
        ),
    )


def _probe(n: int, at: datetime) -> NotesUpdated:
    """An event the projector applies in one small statement, published right after a tick."""
    return NotesUpdated(
        id=derive_id("bench-probe", str(n)),
        workspace=WORKSPACE,
        mind="ops",
        occurred_at=at,
        correlation_id="bench",
        actor="bench",
        payload=NotesUpdatedPayload(agent="ops", notes=f"probe {n}"),
    )


def _v1_tick(at: datetime) -> ActivationDecayedV1:
    return ActivationDecayedV1(
        id=derive_id("activation.decayed", WORKSPACE, at.isoformat()),
        workspace=WORKSPACE,
        occurred_at=at,
        correlation_id=derive_id("decay-tick", at.isoformat()),
        actor="decay",
        payload=ActivationDecayedV1Payload(tick_at=at),
    )


async def _until_projected(pool: asyncpg.Pool, seq: int) -> None:
    while await projected_seq(pool) < seq:
        await asyncio.sleep(0.005)


async def _lag(
    pool: asyncpg.Pool, publisher: EventPublisher, tick: list[Event] | None, probe: Event
) -> float:
    """Seconds from publishing ``tick`` until ``probe``, published right after it, is projected."""
    started = time.perf_counter()
    if tick:
        await publisher.publish(tick)
    seq = await publisher.publish([probe])
    await _until_projected(pool, seq)
    return time.perf_counter() - started


async def main_async(memories: int, ticks: int) -> dict[str, Any]:
    name = f"bd{uuid.uuid4().hex[:10]}"
    with servers() as (nats_url, db_url):
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
        nc = await connect(nats_url, name="bench-decay")
        await ensure_streams(nc.jetstream(), topology)
        publisher = EventPublisher(nc, topology)
        projector = subprocess.Popen(
            [sys.executable, "-m", "noema_projector"], env={**os.environ, **settings.to_env()}
        )
        pool = await create_pool(db_url, name, min_size=1, max_size=2)
        try:
            started = time.perf_counter()
            last = 0
            for start in range(0, memories, 1000):
                last = await publisher.publish(
                    [_created(i) for i in range(start, min(memories, start + 1000))]
                )
            await _until_projected(pool, last)
            load_s = time.perf_counter() - started
            made = await pool.fetchval("SELECT count(*) FROM memories")
            idle = [await _lag(pool, publisher, None, _probe(n, T0)) for n in range(3)]

            hour = timedelta(hours=1)
            # About when the least important memories fade below the threshold (60.5 days), so the
            # ticks after have some to list, as they would on a live system.
            first = T0 + timedelta(days=60, hours=12)
            before = [
                await _lag(pool, publisher, [_v1_tick(first + k * hour)], _probe(100 + k, first))
                for k in range(ticks)
            ]
            rewritten = await pool.fetchval(
                "SELECT count(*) FROM memories WHERE activation_at = $1", first + (ticks - 1) * hour
            )

            reads = MemoryQueries(pool)
            after: list[float] = []
            worker_read: list[float] = []
            listed: list[int] = []
            for k in range(ticks):
                at = first + (ticks + k) * hour
                t = time.perf_counter()
                # What the decay worker does: the read, then one event per workspace.
                held = _Held()
                await upkeep.decay_tick(reads, held, at, [WORKSPACE], since=at - hour)
                worker_read.append(time.perf_counter() - t)
                after.append(await _lag(pool, publisher, held.events, _probe(200 + k, at)))
                listed.append(
                    sum(len(e.payload.faded) for e in held.events if isinstance(e, ActivationDecayed))
                )
        finally:
            projector.terminate()
            projector.wait(30)
            await pool.close()
            js = nc.jetstream()
            for stream in (topology.observation_stream, topology.event_stream, topology.dead_letter_stream):
                await js.delete_stream(stream)
            await nc.close()
            conn = await asyncpg.connect(db_url)
            await conn.execute(f"DROP SCHEMA {name} CASCADE")
            await conn.close()
    return {
        "memories": made,
        "load_s": round(load_s, 2),
        "idle_lag_s": round(max(idle), 4),
        "before_lag_s": round(max(before), 3),
        "after_lag_s": round(max(after), 4),
        "ratio": round(max(before) / max(after), 1),
        "before_rows_rewritten_per_tick": rewritten,
        "after_worker_read_s": round(max(worker_read), 3),
        "before_lags_s": [round(x, 3) for x in before],
        "after_lags_s": [round(x, 4) for x in after],
        "after_faded_listed_per_tick": listed,
    }


class _Held:
    """An event sink that keeps what the decay worker would publish, so the bench publishes it
    itself and times the projector from that moment."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    async def publish(self, events: Sequence[Event]) -> int:
        self.events.extend(events)
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--memories", type=int, default=100_000, help="memories in the workspace (default 100000)"
    )
    parser.add_argument("--ticks", type=int, default=3, help="ticks measured before and after (default 3)")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    emit(asyncio.run(main_async(args.memories, args.ticks)), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
