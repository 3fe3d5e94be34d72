"""Worker lifecycle shared by every service: pull in bounded batches, stop gracefully on SIGTERM.

An unexpected exception propagates out of :meth:`PullWorker.run` and crashes the process loudly;
the unacked messages are redelivered to the restarted worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Protocol

import structlog
from nats.aio.msg import Msg

from .adapters.liveness import watch_connections
from .adapters.pull import Puller, interrupt_all
from .logging import configure_logging
from .runtime import locate
from .settings import Settings

__all__ = [
    "BatchHandler",
    "PullWorker",
    "Service",
    "run_service",
    "run_until_signalled",
    "serve",
    "until_connection_lost",
]

BatchHandler = Callable[[list[Msg]], Awaitable[None]]


class PullWorker:
    """Fetches batches from a pull consumer and hands them to ``handler`` until stopped."""

    def __init__(self, name: str, puller: Puller, handler: BatchHandler, batch: int) -> None:
        self.name = name
        self._puller = puller
        self._handler = handler
        self._batch = batch
        self._stopping = asyncio.Event()
        self.log = structlog.get_logger(f"noema.{name}")

    async def run(self) -> None:
        """Loop until :meth:`shutdown`; the batch in hand is finished before returning."""
        self.log.info("worker started", worker=self.name, batch=self._batch)
        while not self._stopping.is_set():
            msgs = await self._puller.fetch(timeout=1.0)
            if msgs:
                await self._handler(msgs)
        await self._puller.stop()
        self.log.info("worker stopped", worker=self.name)

    def shutdown(self) -> None:
        """Stop fetching; the current batch completes (drain), then :meth:`run` returns."""
        self._stopping.set()


DRAIN_S = 1.5
"""After SIGTERM, how long the batch in hand may take to finish before it is abandoned (cancelled:
its messages are redelivered, as after a crash, which every worker is built to survive), so a
process always exits within the few seconds ``noemactl up`` grants."""


async def run_until_signalled(run: Callable[[], Awaitable[None]], shutdown: Callable[[], None]) -> None:
    """Run a worker, turning SIGTERM/SIGINT into a graceful ``shutdown()``, and into cancelling the
    work if it has not drained after :data:`DRAIN_S`."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(run())
    stopping: list[asyncio.TimerHandle] = []

    def stop() -> None:
        shutdown()
        interrupt_all()  # a worker waiting for messages stops now, not after its fetch timeout
        if not stopping:
            stopping.append(loop.call_later(DRAIN_S, task.cancel))

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)
    try:
        await until_connection_lost(task)
    except asyncio.CancelledError:
        if not stopping or not task.cancelled():
            raise
        structlog.get_logger("noema.worker").warning("batch abandoned at shutdown; it is redelivered")
    finally:
        for handle in stopping:
            handle.cancel()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


async def until_connection_lost(work: Awaitable[None]) -> None:
    """Await ``work``, unless a NATS connection of this process closes for good first: then the work
    is cancelled and :class:`~noema.adapters.liveness.ConnectionLost` raised, so the process exits
    non-zero and is restarted rather than living on without a connection."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(watch_connections())
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
        if watch.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            watch.result()  # raises ConnectionLost
        await task
    finally:
        watch.cancel()
        task.cancel()


def run_service(main: Callable[[], Awaitable[None]]) -> None:
    """Run a service's async main on uvloop (less per-message overhead than the default loop)."""
    import uvloop

    uvloop.run(main())  # type: ignore[arg-type]
    if any(t.daemon and t.is_alive() for t in threading.enumerate()):
        # Blocking work abandoned at shutdown (see noema.threads) would hold the exit until it
        # finishes (native code winding down its own threads): everything is closed, so leave now.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


class Service(Protocol):
    """What a composition root builds: something to run until it is asked to shut down."""

    async def run(self) -> None:
        """Work until :meth:`shutdown`."""
        ...

    def shutdown(self) -> None:
        """Stop gracefully."""
        ...


def serve(build: Callable[[Settings, AsyncExitStack], Awaitable[Service]]) -> None:
    """The ``__main__`` of every worker: settings from the environment, logging, locate the running
    instance, build the service inside an exit stack, run it until SIGTERM/SIGINT (on uvloop)."""
    settings = Settings.from_env()
    configure_logging(settings.log_format, settings.log_level)

    async def main() -> None:
        async with AsyncExitStack() as stack:
            service = await build(locate(settings), stack)
            await run_until_signalled(service.run, service.shutdown)

    run_service(main)
