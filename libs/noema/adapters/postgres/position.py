"""How far the projector has applied the event stream, and waiting for it to get somewhere.

The projector records the last stream sequence it applied in ``projection_position``, in the same
transaction as the rows (:class:`~.projection.ReadModelProjection`). A client that wrote something
and knows the sequence JetStream stored it at can read "after" it: once the position has reached
that sequence, every row the write produced is visible.
"""

from __future__ import annotations

import asyncio

import asyncpg

from noema.adapters.postgres.projection import ReadModelProjection

__all__ = ["projected_seq", "wait_for_projection"]

_FIRST_PAUSE = 0.01
_LONGEST_PAUSE = 0.1
"""Polling starts at 10 ms (the projector usually is a batch away) and backs off to 100 ms."""


async def projected_seq(pool: asyncpg.Pool) -> int:
    """The last stream sequence the read model has applied (0 before any)."""
    value = await pool.fetchval(
        "SELECT last_seq FROM projection_position WHERE projection = $1", ReadModelProjection.name
    )
    return int(value or 0)


async def wait_for_projection(pool: asyncpg.Pool, seq: int, timeout: float) -> int:
    """Wait until the read model has applied ``seq`` or ``timeout`` seconds have passed; returns
    the position reached (below ``seq`` when the wait timed out)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    pause = _FIRST_PAUSE
    while True:
        position = await projected_seq(pool)
        left = deadline - loop.time()
        if position >= seq or left <= 0:
            return position
        await asyncio.sleep(min(pause, left))
        pause = min(pause * 2, _LONGEST_PAUSE)
