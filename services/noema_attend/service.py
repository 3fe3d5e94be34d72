"""Composition root of the attend worker: everything it needs, wired from settings."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack

from noema.adapters.metrics import Metrics
from noema.adapters.postgres.claims import AdvisoryClaim
from noema.adapters.postgres.tenancy import ALL_WORKSPACES
from noema.adapters.pull import durable_puller_after
from noema.domain.attention import AttentionConfig
from noema.runtime.claims import ClaimedService
from noema.runtime.consumer import Connection
from noema.runtime.partitions import PartitionedService
from noema.runtime.settings import Located
from noema.runtime.wiring import PartitionConsumer, Pool, open_bus, open_pool, partitioned_workers, sealer
from noema.runtime.worker import PullWorker

from .worker import AttendHandler, decided_through

__all__ = ["build", "build_partitioned"]


async def build(
    settings: Located, stack: AsyncExitStack, *, metrics: Metrics | None = None
) -> ClaimedService | PartitionedService:
    """Connect; once this instance owns attend's claim, ensure the durable consumer and work (a
    standby until then); resources are owned by ``stack``. With partitions, one consumer and one
    worker per partition this instance owns (:func:`build_partitioned`)."""
    nc, _, topology = await open_bus(settings, stack, "noema-attend")
    # The claim's connection and one for the keyring: attend reads and writes NATS; PostgreSQL says
    # who decides and holds the keys content is sealed under (noema.domain.sealed_events). It seals
    # every workspace's memories: the keyring's row security lets it see every workspace's keys.
    pool = await open_pool(
        settings, stack, "reader", app="noema-attend", workspace=ALL_WORKSPACES, max_size=2
    )
    config = AttentionConfig(
        threshold=settings.attend_threshold,
        capacity=settings.attend_capacity,
        wm_capacity=settings.wm_capacity,
    )
    if topology.partitioned:
        return build_partitioned(settings, nc, pool, config, metrics)
    claim = AdvisoryClaim(pool, settings.db_schema, "attend")

    async def start() -> PullWorker:
        durable = topology.durable("attend")
        # A durable consumer with explicit acks, delivering from just after the last decided
        # candidate (see noema_attend.worker); recreated by the owner only. Each mind's working
        # memory is read back from the stream by the new owner, so nothing is carried over.
        through = await decided_through(nc, topology)
        puller = await durable_puller_after(
            nc,
            topology.observation_stream,
            durable,
            topology.observation_subjects,
            settings.batch_size,
            after=through,
            ack_wait=60.0,
            max_ack_pending=20_000,
        )
        # Fenced: the claim is checked right before each cycle's events are published.
        handler = AttendHandler(
            nc, topology, config, decided=through, fence=claim.check, sealer=sealer(pool), metrics=metrics
        )
        return PullWorker("attend", puller, handler, settings.batch_size, metrics=metrics)

    return ClaimedService("attend", nc, claim, start)


def build_partitioned(
    settings: Located, nc: Connection, pool: Pool, config: AttentionConfig, metrics: Metrics | None = None
) -> PartitionedService:
    """attend with ``NOEMA_PARTITIONS`` > 1: the partitions are shared among the live instances, and
    the owner of a partition reads it with a consumer of its own (noema.adapters.partition_consumers);
    each mind's state and mark come from the stream (see noema_attend.worker)."""
    topology = settings.topology
    consumer = PartitionConsumer(
        topology.observation_stream,
        topology.partition_observations,
        settings.batch_size,
        ack_wait=60.0,
        max_ack_pending=20_000,
        old_filter=topology.stored_observation_subjects,
    )

    seal = sealer(pool)

    def handler(partition: int, fence: Callable[[], Awaitable[None]]) -> AttendHandler:
        return AttendHandler(
            nc, topology, config, fence=fence, partition=partition, sealer=seal, metrics=metrics
        )

    return partitioned_workers(settings, nc, pool, "attend", consumer, handler, metrics)
