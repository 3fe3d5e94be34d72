"""Composition root of the decay worker: a scheduler that publishes ``activation.decayed`` ticks,
each listing the memories of a workspace that faded below the threshold or expired in the interval
before it (found by a read; a tick rewrites no row, activation being computed where it is read).

Tick ids are derived from (workspace, tick time rounded down to the interval), so several decay
processes, or a restart within an interval, produce each tick once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta

import structlog

from noema.adapters.jetstream import EventPublisher
from noema.adapters.metrics import Metrics
from noema.adapters.postgres import MemoryQueries
from noema.adapters.postgres.tenancy import ALL_WORKSPACES
from noema.application.upkeep import decay_tick
from noema.ports import EventSink, MemoryRecords
from noema.runtime.settings import Located
from noema.runtime.wiring import open_bus, open_pool

__all__ = ["DecayWorker", "build"]

log = structlog.get_logger("noema.decay")


class DecayWorker:
    """Publishes a decay tick for every workspace once per interval until stopped."""

    name = "decay"

    def __init__(
        self,
        records: MemoryRecords,
        publisher: EventSink,
        interval_s: float,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._records = records
        self._publisher = publisher
        self._interval = interval_s
        self._clock = clock
        self._stopping = asyncio.Event()

    async def tick(self) -> list[str]:
        """One tick now (aligned down to the interval)."""
        now = self._clock()
        aligned = datetime.fromtimestamp(now.timestamp() // self._interval * self._interval, UTC)
        since = aligned - timedelta(seconds=self._interval)
        workspaces = await decay_tick(self._records, self._publisher, aligned, since=since)
        log.info("decay tick", tick_at=aligned.isoformat(), workspaces=len(workspaces))
        return workspaces

    async def run(self) -> None:
        """Tick, then sleep until the next interval, until :meth:`shutdown`."""
        while not self._stopping.is_set():
            await self.tick()
            try:
                await asyncio.wait_for(self._stopping.wait(), self._interval)
            except TimeoutError:
                continue

    def shutdown(self) -> None:
        """Stop after the current tick."""
        self._stopping.set()


async def build(settings: Located, stack: AsyncExitStack, *, metrics: Metrics | None = None) -> DecayWorker:
    """Connect to NATS and the read model (to know the workspaces). ``metrics``: the process's
    (nothing of the decay's own is counted: its ticks are events on the stream)."""
    # Read-only; a tick covers every workspace, so it sees them all under row security.
    pool = await open_pool(settings, stack, "reader", app="noema-decay", workspace=ALL_WORKSPACES, max_size=1)
    nc, _, topology = await open_bus(settings, stack, "noema-decay")
    return DecayWorker(MemoryQueries(pool), EventPublisher(nc, topology), settings.decay_interval_s)
