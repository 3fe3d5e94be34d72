"""Stopping background tasks for certain.

On Python 3.11, ``asyncio.wait_for`` (which every nats-py request and JetStream publish awaits)
swallows a cancellation that arrives in the same loop iteration as its result: it returns the result
and the task goes on (fixed in Python 3.12, gh-86296). A background loop — a heartbeat, a keep-alive,
a mark renewed every few seconds — cancelled at that moment runs on, and whoever awaits its end
waits forever: a worker that never finishes stopping. :func:`cancel_and_wait` cancels again until
the task has ended.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["RECANCEL_S", "cancel_and_wait"]

RECANCEL_S = 0.5
"""How long a cancelled task has to end before it is cancelled again."""


async def cancel_and_wait(task: asyncio.Future[Any]) -> BaseException | None:
    """Cancel ``task`` and return once it has ended: None if it ended cancelled or with a result,
    else the exception it raised (returned, not raised: the caller is stopping it either way).

    For loops with nothing to clean up: a task whose ``finally`` awaits may be cancelled again in
    the middle of it."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=RECANCEL_S)
    return None if task.cancelled() else task.exception()
