"""How far the PostgreSQL read model has come against the JetStream event stream
(:class:`noema.application.conflicts.CatchUp`): the last sequence stored for a workspace, and a wait
until the projector has applied the stream through a sequence."""

from __future__ import annotations

import asyncio
import time

import asyncpg
from nats.js import JetStreamContext

from noema.adapters.jetstream import last_on_subject
from noema.adapters.postgres import ReadModelProjection
from noema.topology import Topology

__all__ = ["ReadModelCatchUp"]


class ReadModelCatchUp:
    """The read model in ``pool``'s database against ``topology``'s event stream."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        js: JetStreamContext | None,
        topology: Topology | None,
        wait_timeout: float = 60.0,
    ) -> None:
        self._pool = pool
        self._js = js
        self._topology = topology
        self._wait_timeout = wait_timeout
        self._position = ReadModelProjection()

    async def workspace_last_seq(self, workspace: str) -> int:
        """The stream sequence of the last event stored for ``workspace`` (0 without a stream)."""
        if self._js is None or self._topology is None:
            return 0
        t = self._topology
        last = await last_on_subject(self._js, t.event_stream, t.workspace_event_subjects(workspace))
        return 0 if last is None else last[0]

    async def caught_up(self, seq: int) -> None:
        """Wait until the projector has applied the stream through ``seq``."""
        deadline = time.monotonic() + self._wait_timeout
        while True:
            async with self._pool.acquire() as conn:
                if await self._position.position(conn) >= seq:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the read model did not reach seq {seq} in {self._wait_timeout:.0f} s")
            await asyncio.sleep(0.02)
