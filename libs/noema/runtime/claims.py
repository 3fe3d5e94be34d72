"""Claims: of the instances of a stateful worker (attend, the projector, conflicts), exactly one
works a partition at a time — the *owner*; the others stand by and take over when it goes.

:class:`Claim` is the port (:mod:`noema.ports`, with :class:`ClaimLost` and :class:`ClaimState`);
:class:`noema.adapters.postgres.claims.AdvisoryClaim` the adapter (a PostgreSQL session advisory
lock on a connection the owner holds). :class:`ClaimedService` wraps a
worker: it waits as a standby until the claim is its own, only then starts the worker (which may
recreate its durable consumer: only an owner ever does), and stops the process with
:class:`ClaimLost` as soon as the claim is lost, so the supervisor restarts it as a standby.

Fencing — a former owner cannot write — is each worker's: the projector writes with the claim's own
connection (a terminated session loses the lock and the connection together, so no write of the
former owner can commit); attend and conflicts check the claim right before each publish
(:meth:`Claim.check`) and publish events with derived ids (a decision made twice is stored once).
There is one partition today (``partition=0``); partitions (issue 13) take one claim each.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable

import structlog
from nats.aio.client import Client as NATS

from noema.ports import Claim, ClaimLost, ClaimState
from noema.runtime.tasks import cancel_and_wait
from noema.runtime.worker import Service

__all__ = ["Claim", "ClaimLost", "ClaimState", "ClaimedService"]

log = structlog.get_logger("noema.claims")


class ClaimedService:
    """A worker started only once it owns its claim; a standby until then.

    ``start`` builds the worker (subscribing to its durable consumer) and is called once the claim
    is held. The claim is re-checked every ``check_s`` while the worker runs: a lost claim cancels
    the work and raises :class:`ClaimLost`.
    """

    def __init__(
        self,
        name: str,
        nc: NATS,
        claim: Claim,
        start: Callable[[], Awaitable[Service]],
        *,
        check_s: float = 1.0,
    ) -> None:
        self.name = name
        self.nc = nc  # the heartbeat's connection (noema.runtime.health.connection_of)
        self.claim = claim
        self._start = start
        self._check_s = check_s
        self._stopping = asyncio.Event()
        self._worker: Service | None = None

    @property
    def claim_state(self) -> ClaimState:
        """``standby``, ``owner`` or ``lost`` (recorded in the heartbeat)."""
        return self.claim.state

    async def run(self) -> None:
        """Stand by, then work until :meth:`shutdown` or until the claim is lost."""
        waiting = time.monotonic()
        log.info("standing by for the claim", worker=self.name, pid=os.getpid())
        if not await self.claim.acquire(self._stopping):
            return
        log.info(
            "claim acquired",
            worker=self.name,
            pid=os.getpid(),
            waited_s=round(time.monotonic() - waiting, 2),
        )
        try:
            self._worker = worker = await self._start()
            if self._stopping.is_set():
                worker.shutdown()
            work = asyncio.ensure_future(worker.run())
            watch = asyncio.ensure_future(self._watch())
            try:
                await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
                if watch.done():
                    await cancel_and_wait(work)
                    watch.result()  # raises ClaimLost
                await work
            finally:
                await cancel_and_wait(watch)
                await cancel_and_wait(work)
        finally:
            # Owner or lost alike: a lost claim's connection goes back too (its session may be gone
            # without the driver having noticed), or the pool's close waits for it for ever.
            await self.claim.release()

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self._check_s)
            await self.claim.check()

    def shutdown(self) -> None:
        """Stop standing by, or stop the worker gracefully."""
        self._stopping.set()
        if self._worker is not None:
            self._worker.shutdown()
