"""Partitions shared among the instances of a partitioned worker (attend, conflicts with
``NOEMA_PARTITIONS`` > 1): each partition has exactly one owner at a time, which runs that
partition's worker; a dead owner's partitions are taken over within seconds.

:class:`PartitionClaims` is the port; :class:`noema.adapters.postgres.claims.AdvisoryPartitions`
the adapter (PostgreSQL session advisory locks on one connection the instance holds: one shared
lock that says the instance is a member, one exclusive lock per partition it owns).

**Balance.** Every ``poll_s`` an instance counts the live members N and works towards its fair
share, ``ceil(P / N)`` partitions: below it, it claims free partitions (trying them in an order of
its own, so standbys do not all race for the same one) — unless instances of another partition
count still run (a rollout changing ``NOEMA_PARTITIONS``: their workspaces overlap ours, so nothing
new is claimed until they are gone); above it (another instance joined), it
hands one partition back per round — its worker is shut down gracefully, then the lock released —
for the newcomer to claim. When an instance dies its session ends, its locks with it: the members
fall to N - 1, the others' share rises, and they claim its partitions on their next round. The
share is a ceiling, not an assignment: nothing is ever left unowned for want of a plan, and no
instance holds more than its share once the others have caught up.

**Fencing** is each worker's, as for a single claim (:mod:`noema.runtime.claims`): it checks its
partition's lock right before publishing (:meth:`PartitionClaims.check`); a lost lock ends the
process with :class:`~noema.runtime.claims.ClaimLost`, so its supervisor restarts it as a member
without partitions.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

import structlog
from nats.aio.client import Client as NATS

from noema.adapters.errors import TRANSIENT
from noema.runtime.claims import ClaimLost
from noema.runtime.tasks import cancel_and_wait
from noema.runtime.worker import ConsumerGap, Service

__all__ = ["PartitionClaims", "PartitionedService", "claim_order", "fair_share"]

log = structlog.get_logger("noema.claims")


def fair_share(partitions: int, members: int) -> int:
    """The most partitions one of ``members`` live instances should own: ``ceil(P / N)``."""
    return math.ceil(partitions / max(1, members))


def claim_order(partitions: int, instance: int) -> list[int]:
    """The order in which an instance tries free partitions: all of them, starting from one of its
    own (``instance`` is any number of its own, e.g. its pid), so instances spread out."""
    start = instance % partitions
    return [(start + i) % partitions for i in range(partitions)]


class PartitionClaims(Protocol):
    """Membership and per-partition ownership among the instances of one worker kind."""

    async def join(self) -> None:
        """Become a live member (counted by :meth:`members` until :meth:`leave` or death)."""
        ...

    async def members(self) -> int:
        """Live members, this one included."""
        ...

    async def others(self) -> int:
        """Live instances working another partition count (a rollout changing it is under way)."""
        ...

    async def try_claim(self, partition: int) -> bool:
        """Own ``partition`` if nobody does (True), without waiting."""
        ...

    async def held(self) -> set[int]:
        """The partitions this instance still owns, as the claims' store knows it."""
        ...

    async def check(self, partition: int) -> None:
        """Raise :class:`ClaimLost` unless ``partition`` is still this instance's."""
        ...

    async def release(self, partition: int) -> None:
        """Give ``partition`` up (its worker has stopped)."""
        ...

    async def leave(self) -> None:
        """Give everything up and stop being a member (a clean stop)."""
        ...


class PartitionedService:
    """One worker per owned partition, balanced among the live instances (see the module doc).

    ``start(partition)`` builds the worker of a partition (creating its consumer) once it is owned.
    A worker that fails crashes the whole process, loudly; a partition found lost raises
    :class:`ClaimLost`.
    """

    def __init__(
        self,
        name: str,
        nc: NATS,
        claims: PartitionClaims,
        partitions: int,
        start: Callable[[int], Awaitable[Service]],
        *,
        poll_s: float = 0.5,
        instance: int | None = None,
    ) -> None:
        self.name = name
        self.nc = nc  # the heartbeat's connection (noema.runtime.health.connection_of)
        self._claims = claims
        self._partitions = partitions
        self._start = start
        self._poll_s = poll_s
        self._order = claim_order(partitions, os.getpid() if instance is None else instance)
        self._stopping = asyncio.Event()
        self._workers: dict[int, tuple[Service, asyncio.Future[None]]] = {}

    @property
    def owned(self) -> list[int]:
        """The partitions this instance works now."""
        return sorted(self._workers)

    @property
    def claim_state(self) -> str:
        """``owner:<partitions>`` (e.g. ``owner:0,2``) or ``standby`` (recorded in the heartbeat)."""
        return f"owner:{','.join(map(str, self.owned))}" if self._workers else "standby"

    async def run(self) -> None:
        """Join, then keep a fair share of the partitions working until :meth:`shutdown`."""
        await self._claims.join()
        log.info("member of the partitions", worker=self.name, pid=os.getpid(), partitions=self._partitions)
        try:
            while not self._stopping.is_set():
                await self._round()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), self._poll_s)
        except BaseException:
            # Already failing (a lost claim, a worker's bug): the other workers' ends — e.g. their
            # consumer deleted by the partitions' new owner — must not hide why.
            for partition in list(self._workers):
                with contextlib.suppress(Exception):
                    await self._stop(partition, release=False)
            raise
        else:
            for partition in list(self._workers):
                await self._stop(partition, release=False)
        finally:
            await self._claims.leave()

    async def _round(self) -> None:
        # Lost claims first: a former owner's worker may already have failed for that very reason
        # (its consumer deleted by the partition's new owner), and the loss is what to report.
        lost = set(self._workers) - await self._claims.held()
        if lost:
            raise ClaimLost(f"{self.name}: partitions {sorted(lost)} are no longer this instance's")
        if self._stopping.is_set():
            # Shut down while asking: the workers end for that, not on their own; run() stops them
            # (and re-raises any one's failure).
            return
        for partition, (_, work) in list(self._workers.items()):
            if work.done():
                del self._workers[partition]
                if isinstance(work.exception(), ConsumerGap):
                    # Its consumer is re-created (at its ack floor) by whoever claims it next.
                    log.warning(
                        "partition restarted",
                        worker=self.name,
                        partition=partition,
                        reason=str(work.exception()),
                    )
                    await self._claims.release(partition)
                    continue
                work.result()  # a worker's failure ends the process, loudly
                raise RuntimeError(f"the {self.name} worker of partition {partition} stopped on its own")
        share = fair_share(self._partitions, await self._claims.members())
        if len(self._workers) > share:
            # Another instance joined: hand one partition back per round, for it to claim.
            await self._stop(max(self._workers), release=True)
            return
        if len(self._workers) < share and await self._claims.others():
            return  # instances of another partition count still work: never both at once
        for partition in self._order:
            if len(self._workers) >= share or self._stopping.is_set():
                break
            if partition not in self._workers and await self._claims.try_claim(partition):
                await self._begin(partition)

    async def _begin(self, partition: int) -> None:
        began = time.monotonic()
        try:
            worker = await self._start(partition)
        except TRANSIENT as exc:  # NATS electing a stream leader, a server restarting: next round
            await self._claims.release(partition)
            log.warning(
                "partition not started; trying again", worker=self.name, partition=partition, error=str(exc)
            )
            return
        except BaseException:
            await self._claims.release(partition)
            raise
        self._workers[partition] = (worker, asyncio.ensure_future(worker.run()))
        log.info(
            "partition acquired",
            worker=self.name,
            partition=partition,
            pid=os.getpid(),
            owned=self.owned,
            start_s=round(time.monotonic() - began, 2),
        )

    async def _stop(self, partition: int, *, release: bool) -> None:
        worker, work = self._workers.pop(partition)
        worker.shutdown()
        try:
            await asyncio.wait_for(asyncio.shield(work), 30.0)
        except TimeoutError:
            await cancel_and_wait(work)
        if release:
            await self._claims.release(partition)
            log.info("partition handed back", worker=self.name, partition=partition, pid=os.getpid())

    def shutdown(self) -> None:
        """Stop every partition's worker gracefully and give the partitions up."""
        self._stopping.set()
        for worker, _ in self._workers.values():
            worker.shutdown()
