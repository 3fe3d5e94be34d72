"""Ingest benchmark: how fast observations become memory rows, against the raw pipe.

    python -m bench.ingest [--count N] [--repeat R] [--out FILE]

Both runs publish the same N observations, pipelined, from this process and time from the first
publish until the last row is in PostgreSQL:

- e2e: the real system — attend and projector as separate processes (as `noemactl up` runs them):
  validation, attention scoring, two events per cycle + one per memory, projection with tracking.
- raw: the same publish, then one separate consumer process doing only JetStream fetch → COPY into
  a table → ack, with no Noema logic.

Prints JSON {"e2e_per_s", "raw_per_s", "ratio", ...} (medians over --repeat runs), also to FILE,
with each pipe's CPU time per observation split by process (microseconds; medians): where the
cost of the real system goes, next to the raw pipe's (embedded servers only, Linux /proc).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import asyncpg

from noema.adapters.jetstream import Outgoing, connect, ensure_streams, publish_batch, publish_each
from noema.adapters.postgres import create_pool, migrate
from noema.adapters.pull import Puller
from noema.client import build_observation
from noema.domain.attention import memory_id_for
from noema.runtime.settings import Settings
from noema.runtime.worker import run_service
from noema.topology import Topology
from noema_events import encode_event
from noema_sdk.tracing import TRACEPARENT, new_traceparent

from ._cpu import CpuMeter
from ._servers import servers


def _payloads(n: int) -> list[tuple[str, str, bytes]]:
    out = []
    for i in range(n):
        obs = build_observation(
            f"observation {i}: host-{i % 97} reported status {i * 7 % 13} after deploy",
            workspace="bench",
            mind=f"agent{i % 4}",
        )
        out.append((obs.id, obs.mind, encode_event(obs)))
    return out


PUBLISH_MODE = "each"


async def _publish(nc, js, subject_of, payloads) -> None:  # type: ignore[no-untyped-def]
    # Each with a trace of its own, as every client publishes them (noema_sdk.tracing).
    messages = [
        Outgoing(subject_of(mind), data, msg_id, {TRACEPARENT: new_traceparent()})
        for msg_id, mind, data in payloads
    ]
    if PUBLISH_MODE == "batch":
        await publish_batch(nc, js, messages)
    else:
        await publish_each(js, messages)


async def _wait_rows(
    pool: asyncpg.Pool, table: str, key: str, last_key: str, n: int, timeout: float = 600
) -> None:
    """Wait until the row of the last published message exists, then check the total.

    Both pipes keep order, so the last message's row is the last one written. Polling a primary-key
    lookup costs PostgreSQL nothing, where polling count(*) would scan the table on every poll.
    """
    deadline = time.monotonic() + timeout
    while not await pool.fetchval(f"SELECT EXISTS (SELECT 1 FROM {table} WHERE {key} = $1)", last_key):
        if time.monotonic() > deadline:
            raise TimeoutError(f"last row not written after {timeout}s")
        await asyncio.sleep(0.01)
    total = await pool.fetchval(f"SELECT count(*) FROM {table}")
    if total != n:
        raise AssertionError(f"{table} holds {total} rows, expected {n}")


Timed = tuple[float, dict[str, float]]
"""A run's rate (per second) and its CPU microseconds per observation by process."""


def _per_obs(cpu: dict[str, float], n: int) -> dict[str, float]:
    return {name: round(seconds / n * 1e6, 1) for name, seconds in cpu.items()}


async def run_e2e(
    nats_url: str, db_url: str, payloads: list[tuple[str, str, bytes]], server_pids: dict[str, int | None]
) -> Timed:
    """Observations → attend → events → projector → memories; returns memories per second."""
    name = f"be{uuid.uuid4().hex[:10]}"
    settings = Settings(
        nats_url=nats_url,
        database_url=db_url,
        db_schema=name,
        prefix=name,
        attend_threshold=0.0,
        log_format="json",
        log_level="warning",
    )
    topology = Topology(name)
    await migrate(db_url, name)
    nc = await connect(nats_url, name="bench-ingest")
    js = nc.jetstream(publish_async_max_pending=8000)
    await ensure_streams(js, topology)
    env = {**os.environ, **settings.to_env()}
    procs = [
        subprocess.Popen([sys.executable, "-m", m], env=env) for m in ("noema_attend", "noema_projector")
    ]
    pool = await create_pool(db_url, name, min_size=1, max_size=1)
    try:
        await asyncio.sleep(1.5)  # let both workers connect and create their consumers
        meter = CpuMeter(
            {"attend": procs[0].pid, "projector": procs[1].pid, **server_pids}, {"publisher": os.getpid()}
        )
        meter.start()
        start = time.perf_counter()
        await _publish(nc, js, lambda mind: topology.observation_subject("bench", mind), payloads)
        await _wait_rows(pool, "memories", "id", memory_id_for(payloads[-1][0]), len(payloads))
        elapsed = time.perf_counter() - start
        return len(payloads) / elapsed, _per_obs(meter.stop(), len(payloads))
    finally:
        for p in procs:
            p.terminate()
            p.wait(30)
        await pool.close()
        for stream in (topology.observation_stream, topology.event_stream, topology.dead_letter_stream):
            await js.delete_stream(stream)
        await nc.close()
        conn = await asyncpg.connect(db_url)
        await conn.execute(f"DROP SCHEMA {name} CASCADE")
        await conn.close()


async def raw_consumer(nats_url: str, db_url: str, name: str, n: int) -> None:
    """The raw pipe's consumer: fetch → COPY → ack, nothing else (runs as its own process)."""
    from nats.js.api import AckPolicy, ConsumerConfig

    nc = await connect(nats_url, name="bench-raw")
    js = nc.jetstream()
    conn = await asyncpg.connect(db_url)
    await js.add_consumer(
        name.upper(),
        ConsumerConfig(durable_name=name, ack_policy=AckPolicy.EXPLICIT, max_ack_pending=20_000),
    )
    # The same fetch client and batch size as the workers: the comparison is of the work done.
    puller = await Puller(nc, name.upper(), name, Settings().batch_size).start()
    done = 0
    while done < n:
        msgs = await puller.fetch(timeout=1)
        if not msgs:
            continue
        async with conn.transaction():
            await conn.copy_records_to_table(
                f"{name}_rows",
                schema_name="public",
                records=[(m.headers["Nats-Msg-Id"], m.data.decode()) for m in msgs],  # type: ignore[index]
            )
        for m in msgs:
            await m.ack()
        done += len(msgs)
    # Stay (connection open) until the benchmark has read this process's CPU time: it closes stdin.
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await conn.close()
    await nc.close()


async def run_raw(
    nats_url: str, db_url: str, payloads: list[tuple[str, str, bytes]], server_pids: dict[str, int | None]
) -> Timed:
    """The same publish, consumed by a bare fetch → COPY → ack process; returns rows per second."""
    from nats.js.api import StorageType, StreamConfig

    name = f"br{uuid.uuid4().hex[:10]}"
    nc = await connect(nats_url, name="bench-raw-pub")
    js = nc.jetstream(publish_async_max_pending=8000)
    await js.add_stream(
        StreamConfig(
            name=name.upper(),
            subjects=[f"{name}.>"],
            storage=StorageType.FILE,
            duplicate_window=120,
            allow_atomic=True,
        )
    )
    conn = await asyncpg.connect(db_url)
    await conn.execute(f"CREATE TABLE public.{name}_rows (id text PRIMARY KEY, payload jsonb)")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.ingest",
            "--raw-consumer",
            name,
            "--count",
            str(len(payloads)),
            "--urls",
            nats_url,
            db_url,
        ],
        stdin=subprocess.PIPE,
    )
    pool = await asyncpg.create_pool(db_url, min_size=1, max_size=1)
    assert pool is not None
    try:
        await asyncio.sleep(1.5)
        meter = CpuMeter({"consumer": proc.pid, **server_pids}, {"publisher": os.getpid()})
        meter.start()
        start = time.perf_counter()
        await _publish(nc, js, lambda mind: f"{name}.bench.{mind}", payloads)
        await _wait_rows(pool, f"public.{name}_rows", "id", payloads[-1][0], len(payloads))
        elapsed = time.perf_counter() - start
        return len(payloads) / elapsed, _per_obs(meter.stop(), len(payloads))
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(30)
        await pool.close()
        await conn.execute(f"DROP TABLE public.{name}_rows")
        await conn.close()
        await js.delete_stream(name.upper())
        await nc.close()


def _median_cpu(runs: list[dict[str, float]]) -> dict[str, float]:
    """Median per process, plus ``total`` (the median of each run's sum)."""
    if not runs or not runs[0] or not CpuMeter.available():
        return {}
    out = {name: round(statistics.median(r[name] for r in runs), 1) for name in runs[0]}
    out["total"] = round(statistics.median(sum(r.values()) for r in runs), 1)
    return out


async def main_async(count: int, repeat: int) -> dict[str, object]:
    payloads = _payloads(count)
    e2e, raw = [], []
    e2e_cpu: list[dict[str, float]] = []
    raw_cpu: list[dict[str, float]] = []
    pids: dict[str, int | None] = {}
    with servers(pids) as (nats_url, db_url):
        for _ in range(repeat):
            rate, cpu = await run_raw(nats_url, db_url, payloads, pids)
            raw.append(rate)
            raw_cpu.append(cpu)
            rate, cpu = await run_e2e(nats_url, db_url, payloads, pids)
            e2e.append(rate)
            e2e_cpu.append(cpu)
    e2e_med, raw_med = statistics.median(e2e), statistics.median(raw)
    return {
        "count": count,
        "repeat": repeat,
        "e2e_per_s": round(e2e_med, 1),
        "raw_per_s": round(raw_med, 1),
        "ratio": round(e2e_med / raw_med, 3),
        "e2e_runs": [round(x, 1) for x in e2e],
        "raw_runs": [round(x, 1) for x in raw],
        "e2e_cpu_us_per_obs": _median_cpu(e2e_cpu),
        "raw_cpu_us_per_obs": _median_cpu(raw_cpu),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=20_000, help="observations per run (default 20000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each pipe; medians are reported")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument(
        "--publish",
        choices=("each", "batch"),
        default="each",
        help="how observations are published, for both pipes: one ack per message "
        "(agents) or atomic batches of 1000 (bulk import); default each",
    )
    parser.add_argument("--raw-consumer", help=argparse.SUPPRESS)
    parser.add_argument("--urls", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.raw_consumer:
        # Same event loop as the workers (uvloop), so the comparison is of the work, not the loop.
        run_service(lambda: raw_consumer(args.urls[0], args.urls[1], args.raw_consumer, args.count))
        return 0
    global PUBLISH_MODE
    PUBLISH_MODE = args.publish
    result = {**asyncio.run(main_async(args.count, args.repeat)), "publish": args.publish}
    text = json.dumps(result)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
