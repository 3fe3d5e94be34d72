"""One agent floods the agent service; what is left for another agent's searches (issue 28, item 5).

    python -m bench.admission [--limit 2] [--rounds 3] [--per-round 10] [--out FILE]

On real NATS and PostgreSQL (embedded, or NOEMA_NATS_URL / NOEMA_DATABASE_URL) with the agent
service and the projector running in this process and the default embedder (hybrid searches embed
their query, the costly part): agent ``quiet`` searches at a steady pace under its limit while agent
``flood`` sends hybrid searches, open loop, at 10 times the rate limit both have
(``NOEMA_RATE_LIMIT`` = ``--limit``, ``NOEMA_RATE_BURST`` = the same). Rounds alternate: ``quiet``
alone, then ``quiet`` beside the flood, so the machine's own load drifts into both alike. The same
scenario then runs again with admission control off (both limits 0), the baseline it is there for.

Prints JSON: per run (``limited``, ``unlimited``) quiet's latencies alone and under the flood
(p50/p99 ms, and the flood's p99 as a ratio of the alone one), and the flood's requests sent,
served, refused (429) and otherwise failed; ``checks`` and ``all_checks_held``: with the limits,
quiet's p99 under the flood within 2x its p99 alone, none of quiet's searches refused, the flood
served no more than its bucket allows and refused the rest (the unlimited run is the baseline, held
to nothing). ``tests/integration/test_admission.py``
runs the limited scenario (:func:`flood`) and holds the same checks but the latency one (a test holds
no speed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nats.aio.client import Client as NATS

from bench._output import emit

WORKSPACE = "acme"
ROLE = "engineer"
QUERY = {"query": "which host reported a failed deploy", "mode": "hybrid", "limit": 10}
FLOOD_FACTOR = 10


@dataclass
class FloodRun:
    """What one run of the scenario measured."""

    limit: float
    alone_ms: list[float] = field(default_factory=list)
    flooded_ms: list[float] = field(default_factory=list)
    quiet_codes: dict[int, int] = field(default_factory=dict)
    flood_codes: dict[int, int] = field(default_factory=dict)
    flood_seconds: float = 0.0
    rounds: int = 0

    @property
    def flood_sent(self) -> int:
        """Requests the flooding agent sent."""
        return sum(self.flood_codes.values())

    def figures(self) -> dict[str, Any]:
        """The run's figures, as the benchmark prints them."""
        alone, flooded = p99(self.alone_ms), p99(self.flooded_ms)
        return {
            "limit_per_s": self.limit,
            "quiet_alone_p50_ms": round(statistics.median(self.alone_ms), 1),
            "quiet_alone_p99_ms": round(alone, 1),
            "quiet_flooded_p50_ms": round(statistics.median(self.flooded_ms), 1),
            "quiet_flooded_p99_ms": round(flooded, 1),
            "quiet_p99_flooded_vs_alone": round(flooded / alone, 2),
            "quiet_searches": len(self.alone_ms) + len(self.flooded_ms),
            "quiet_codes": {str(k): v for k, v in sorted(self.quiet_codes.items())},
            "flood_seconds": round(self.flood_seconds, 1),
            "flood_sent": self.flood_sent,
            "flood_served": self.flood_codes.get(200, 0),
            "flood_refused": self.flood_codes.get(429, 0),
            "flood_other": self.flood_sent - self.flood_codes.get(200, 0) - self.flood_codes.get(429, 0),
        }

    def checks(self, burst: int) -> dict[str, bool]:
        """What must hold with admission control on: the flood is served at most its bucket — full
        at the start of each round (it refills while quiet searches alone) and refilled at the rate
        while the flood lasts."""
        allowed = self.rounds * (burst + 1) + math.ceil(self.limit * self.flood_seconds)
        return {
            "quiet_p99_within_2x_under_flood": p99(self.flooded_ms) <= 2 * p99(self.alone_ms),
            "quiet_never_refused": set(self.quiet_codes) == {200},
            "flood_served_within_its_bucket": self.flood_codes.get(200, 0) <= allowed,
            "flood_refused_the_rest": self.flood_codes.get(429, 0) >= self.flood_sent - allowed,
        }


def p99(samples: list[float]) -> float:
    """The 99th percentile (nearest rank) of ``samples``."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


async def _search(nc: NATS, prefix: str, agent: str, timeout: float) -> tuple[int, float]:
    """One hybrid search as ``agent``: its reply code (200 or the error's) and latency (ms)."""
    from noema_sdk.protocol import agent_subject

    subject = agent_subject(prefix, WORKSPACE, ROLE, agent, "search_memory")
    started = time.perf_counter()
    reply = await nc.request(subject, json.dumps(QUERY).encode(), timeout=timeout)
    took = (time.perf_counter() - started) * 1000
    body = json.loads(reply.data)
    return (200 if body.get("ok") else int(body["error"]["code"])), took


async def flood(
    nc: NATS, prefix: str, limit: float, *, rounds: int = 3, per_round: int = 10, timeout: float = 60.0
) -> FloodRun:
    """The scenario against a running agent service whose agents may make ``limit`` requests a
    second: ``quiet`` alone, then beside ``flood`` at :data:`FLOOD_FACTOR` times ``limit``, ``rounds``
    times, ``per_round`` searches of ``quiet`` each time."""
    run = FloodRun(limit)
    pace = 1.25 / limit  # quiet stays under its own limit
    quiet = f"quiet{uuid.uuid4().hex[:6]}"
    attacker = f"flood{uuid.uuid4().hex[:6]}"

    async def quiet_searches(into: list[float]) -> None:
        for _ in range(per_round):
            started = time.perf_counter()
            code, took = await _search(nc, prefix, quiet, timeout)
            run.quiet_codes[code] = run.quiet_codes.get(code, 0) + 1
            if code == 200:
                into.append(took)
            await asyncio.sleep(max(0.0, pace - (time.perf_counter() - started)))

    async def one_flood_request() -> None:
        try:
            code, _ = await _search(nc, prefix, attacker, timeout)
        except Exception:  # no reply in time: a starved service; counted as "other"
            code = 0
        run.flood_codes[code] = run.flood_codes.get(code, 0) + 1

    async def flooding(stop: asyncio.Event) -> None:
        sent: list[asyncio.Task[None]] = []
        interval = 1.0 / (FLOOD_FACTOR * limit)
        started = time.perf_counter()
        while not stop.is_set():
            sent.append(asyncio.create_task(one_flood_request()))
            # Open loop, on a schedule: the flood does not slow down when the service does.
            late = time.perf_counter() - started - interval * len(sent)
            await asyncio.sleep(max(0.0, -late))
        run.flood_seconds += time.perf_counter() - started
        await asyncio.gather(*sent)

    warm: list[float] = []
    for _ in range(2):  # the model loads on the first search; not measured
        await _search(nc, prefix, f"warm{uuid.uuid4().hex[:6]}", timeout)
    await quiet_searches(warm)
    run.quiet_codes.clear()
    for _ in range(rounds):
        run.rounds += 1
        await quiet_searches(run.alone_ms)
        stop = asyncio.Event()
        attack = asyncio.create_task(flooding(stop))
        await quiet_searches(run.flooded_ms)
        stop.set()
        await attack
        await asyncio.sleep(max(1.0, 1.0 / limit))  # the flood's last admitted searches end
    return run


async def seed(nc: NATS, prefix: str, count: int) -> None:
    """Publish ``count`` memories of :data:`WORKSPACE` (the projector makes them searchable)."""
    from noema.adapters.jetstream import EventPublisher
    from noema.ids import new_id
    from noema.topology import Topology
    from noema_events import MemoryCreated, MemoryCreatedPayload

    now = datetime.now(UTC)
    events = []
    for i in range(count):
        mid = new_id()
        text = f"host-{i % 37} reported {'a failed' if i % 5 == 0 else 'a finished'} deploy of service {i}"
        events.append(
            MemoryCreated(
                id=new_id(),
                workspace=WORKSPACE,
                mind="ops",
                occurred_at=now,
                correlation_id=mid,
                actor="bench",
                payload=MemoryCreatedPayload(
                    memory_id=mid, content=text, kind="semantic", epistemic_kind="fact"
                ),
            )
        )
    await EventPublisher(nc, Topology(prefix)).publish(events)


async def _until(check: Callable[[], Awaitable[bool]], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError("the seeded memories were not projected in time")
        await asyncio.sleep(0.2)


async def _scenario(nats_url: str, database_url: str, limit: float, args: argparse.Namespace) -> FloodRun:
    from noema.adapters.jetstream import connect, ensure_streams
    from noema.adapters.postgres import create_pool, migrate
    from noema.runtime.settings import Located
    from noema.topology import Topology
    from noema_projector.service import build as build_projector
    from noema_service.service import build as build_service

    name = f"b{uuid.uuid4().hex[:10]}"
    burst = max(1, round(limit))
    settings = Located(
        data_dir=Path("/tmp"),
        nats_url=nats_url,
        database_url=database_url,
        db_schema=name,
        prefix=name,
        log_format="json",
        log_level="warning",
        rate_limit=limit if args.limited else 0.0,
        rate_burst=burst,
        concurrency_limit=2 if args.limited else 0,
    )
    await migrate(database_url, name)
    async with AsyncExitStack() as stack:
        nc = await connect(nats_url, name="bench-admission")
        stack.push_async_callback(nc.close)
        await ensure_streams(nc.jetstream(), Topology(name), 120)
        pool = await create_pool(database_url, name, min_size=1, max_size=2)
        stack.push_async_callback(pool.close)
        tasks = []
        for build in (build_projector, build_service):
            worker = await build(replace(settings), stack)
            tasks.append((worker, asyncio.create_task(worker.run())))
        await seed(nc, name, args.memories)

        async def projected() -> bool:
            count: int = await pool.fetchval("SELECT count(*) FROM memories")
            return count >= int(args.memories)

        await _until(projected, 120)
        try:
            return await flood(nc, name, limit, rounds=args.rounds, per_round=args.per_round)
        finally:
            for worker, task in tasks:
                worker.shutdown()
                await asyncio.wait_for(task, 30)


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    from bench._servers import servers

    report: dict[str, Any] = {"flood_factor": FLOOD_FACTOR}
    with servers() as (nats_url, database_url):
        runs = {}
        for limited in (True, False):
            args.limited = limited
            runs["limited" if limited else "unlimited"] = await _scenario(
                nats_url, database_url, args.limit, args
            )
    report.update({name: run.figures() for name, run in runs.items()})
    # The unlimited run is the baseline (what the limits are for), not held to anything.
    checks = runs["limited"].checks(max(1, round(args.limit)))
    report["checks"] = checks
    report["all_checks_held"] = all(checks.values())
    return report


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--limit", type=float, default=2.0, help="requests a second per agent (and burst)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--per-round", type=int, default=10)
    parser.add_argument("--memories", type=int, default=300)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from noema.runtime.logging import configure_logging

    configure_logging("json", "warning")  # stdout carries the figures only
    emit(asyncio.run(_main(args)), args.out)


if __name__ == "__main__":
    main()
