"""Worker lifecycle shared by every service: pull in bounded batches, stop gracefully on SIGTERM.

An unexpected exception propagates out of :meth:`PullWorker.run` and crashes the process loudly;
the unacked messages are redelivered to the restarted worker.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Protocol

import structlog
from nats.aio.msg import Msg

from .adapters.pull import Puller
from .health import ErrorTap, Heartbeat, connection_of
from .logging import configure_logging
from .runtime import locate
from .settings import Settings
from .topology import Topology

__all__ = ["BatchHandler", "PullWorker", "Service", "run_service", "run_until_signalled", "serve"]

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


async def run_until_signalled(run: Callable[[], Awaitable[None]], shutdown: Callable[[], None]) -> None:
    """Run a worker, turning SIGTERM/SIGINT into a graceful ``shutdown()``."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, shutdown)
    try:
        await run()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


def run_service(main: Callable[[], Awaitable[None]]) -> None:
    """Run a service's async main on uvloop (less per-message overhead than the default loop)."""
    import uvloop

    uvloop.run(main())  # type: ignore[arg-type]


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
    instance, build the service inside an exit stack, run it until SIGTERM/SIGINT (on uvloop).

    While it runs, the process records its heartbeat (:mod:`noema.health`) through the service's own
    NATS connection, named after the service's ``name``.
    """
    settings = Settings.from_env()
    errors = ErrorTap()
    configure_logging(settings.log_format, settings.log_level, observe=errors)

    async def main() -> None:
        async with AsyncExitStack() as stack:
            located = locate(settings)
            service = await build(located, stack)
            nc = connection_of(service)
            if nc is not None:
                # Entered last, so it stops (and records a crash) before the connections close.
                await stack.enter_async_context(
                    Heartbeat(
                        nc,
                        Topology(located.prefix),
                        str(getattr(service, "name", "worker")),
                        interval_s=located.heartbeat_interval_s,
                        errors=errors,
                    )
                )
            else:
                structlog.get_logger("noema.health").warning("no NATS connection found; no heartbeat")
            await run_until_signalled(service.run, service.shutdown)

    run_service(main)
