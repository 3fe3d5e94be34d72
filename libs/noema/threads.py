"""Run blocking work off the event loop in a thread that never delays the process's exit.

``asyncio.to_thread`` uses a pool whose threads the interpreter joins at exit: a process asked to
stop mid-way through seconds of embedding would wait for it. A daemon thread is abandoned instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["in_daemon_thread"]

T = TypeVar("T")


async def in_daemon_thread(fn: Callable[[], T]) -> T:
    """``fn()`` in a daemon thread; cancelling the await abandons the result (not the computation)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.cancelled():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def work() -> None:
        try:
            result, error = fn(), None
        except BaseException as exc:  # handed to the awaiting task, which re-raises it
            result, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=work, name="noema-blocking", daemon=True).start()
    return await future
