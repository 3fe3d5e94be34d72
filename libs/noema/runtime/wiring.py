"""What every composition root wires the same way from located settings: its NATS connection (and
the streams it relies on) and its database pool, each closed when the root's exit stack unwinds."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, NamedTuple, Protocol

import asyncpg

from noema.adapters.postgres.database import create_pool
from noema.adapters.postgres.roles import DbRole
from noema.adapters.postgres.tenancy import NO_WORKSPACE

Pool = asyncpg.Pool
"""A database pool, as the composition roots of the workers hand it on (they hold no driver)."""
DbConnection = asyncpg.Connection
"""A database connection, as a worker holds one of its pool's."""

if TYPE_CHECKING:
    # nats-py: loaded by the first connection (a read-only process, noemactl's reads, has none);
    # the worker runtime: loaded by partitioned_workers, not by the application layer; the sealer:
    # by the processes that publish or open events (a read of memory opens none: a keyword
    # search's start-up, issue 32); the settings and the topology: annotations here.
    from nats.aio.client import Client as NATS
    from nats.js import JetStreamContext

    from noema.adapters.metrics import Metrics
    from noema.application.sealing import KeyringSealer
    from noema.runtime.partitions import PartitionedService
    from noema.runtime.settings import Located
    from noema.runtime.worker import BatchHandler, PullWorker
    from noema.topology import Topology

__all__ = [
    "POOL_CLOSE_S",
    "Bus",
    "DbConnection",
    "PartitionConsumer",
    "Pool",
    "PoolFactory",
    "close_pool",
    "connect_nats",
    "open_bus",
    "open_pool",
    "partitioned_workers",
    "sealer",
]


class Bus(NamedTuple):
    """A process's NATS connection, its JetStream context and the names of its prefix's streams
    (``nc, js, topology = await open_bus(...)``)."""

    nc: NATS
    js: JetStreamContext
    topology: Topology


async def connect_nats(located: Located, stack: AsyncExitStack, name: str) -> NATS:
    """Connect to the located NATS as the settings say (``name``: how the server lists the
    connection); it is closed when ``stack`` unwinds."""
    from noema.adapters.jetstream import connect

    nc = await connect(located.nats_url, name=name, auth=located.nats_auth)
    stack.push_async_callback(nc.close)
    return nc


async def open_bus(located: Located, stack: AsyncExitStack, name: str) -> Bus:
    """:func:`connect_nats`, then create the streams or update them to the settings (every process
    does it on start, idempotently, so whichever starts first finds them ready)."""
    from noema.adapters.jetstream import ensure_streams

    nc = await connect_nats(located, stack, name)
    bus = Bus(nc, nc.jetstream(), located.topology)
    await ensure_streams(
        bus.js,
        bus.topology,
        located.duplicate_window_s,
        located.stream_replicas,
        located.dead_letter_policy,
    )
    return bus


class PoolFactory(Protocol):
    """How a pool is made: :func:`noema.adapters.postgres.create_pool`, or the recall adapter's
    (:meth:`noema.adapters.postgres.voices.RecallStore.create_pool`)."""

    def __call__(
        self, url: str, schema: str, *, app: str, workspace: str, min_size: int, max_size: int
    ) -> Awaitable[asyncpg.Pool]: ...


async def open_pool(
    located: Located,
    stack: AsyncExitStack,
    role: DbRole,
    *,
    app: str,
    max_size: int,
    min_size: int = 1,
    workspace: str = NO_WORKSPACE,
    create: PoolFactory = create_pool,
) -> asyncpg.Pool:
    """A pool of the located database signed in as ``role`` (``app``: its connections' name in
    ``pg_stat_activity``; ``workspace``: the rows they see under row-level security); it is closed
    when ``stack`` unwinds."""
    pool = await create(
        located.database_url_for(role),
        located.db_schema,
        app=app,
        workspace=workspace,
        min_size=min_size,
        max_size=max_size,
    )
    stack.push_async_callback(close_pool, pool)
    return pool


POOL_CLOSE_S = 5.0
"""How long a process's pool may take to close gracefully before its connections are terminated."""


async def close_pool(pool: asyncpg.Pool, within_s: float = POOL_CLOSE_S) -> None:
    """Close ``pool``, waiting at most ``within_s`` for connections still in use (asyncpg's close
    waits for ever for one never given back), then terminate the rest: a service always exits."""
    try:
        await asyncio.wait_for(pool.close(), within_s)
    except TimeoutError:
        import structlog  # loaded by the first record: closing a pool in time logs nothing

        structlog.get_logger("noema.wiring").warning(
            "pool not closed in time; its connections are terminated", within_s=within_s
        )
        pool.terminate()


def sealer(pool: asyncpg.Pool) -> KeyringSealer:
    """What seals a process's events before it publishes them and opens those it reads
    (:mod:`noema.domain.sealed_events`), with the keyring in ``pool``'s database."""
    from noema.adapters.postgres.keyring import PostgresKeyring
    from noema.application.sealing import KeyringSealer

    return KeyringSealer(PostgresKeyring(pool))


class PartitionConsumer(NamedTuple):
    """What a partitioned worker's consumer of one partition reads (noema.adapters.partition_consumers)."""

    stream: str
    filter: Callable[[int], str]
    """The partition's own filter subject."""
    batch: int
    ack_wait: float
    max_ack_pending: int
    old_filter: Callable[[int], str] | None = None
    """The subjects an earlier partition count stored (None: the same subjects)."""


def partitioned_workers(
    located: Located,
    nc: NATS,
    pool: asyncpg.Pool,
    worker: str,
    consumer: PartitionConsumer,
    handler: Callable[[int, Callable[[], Awaitable[None]]], BatchHandler],
    metrics: Metrics | None = None,
) -> PartitionedService:
    """``worker`` with ``NOEMA_PARTITIONS`` > 1: the partitions shared among its live instances
    (claims on a connection of ``pool``); the owner of a partition reads it with a consumer of its
    own and handles it with ``handler(partition, fence)``, ``fence`` raising once the partition is no
    longer this instance's."""
    from noema.adapters.partition_consumers import partition_puller
    from noema.adapters.postgres.claims import AdvisoryPartitions
    from noema.runtime.partitions import PartitionedService
    from noema.runtime.worker import PullWorker

    topology = located.topology
    claims = AdvisoryPartitions(pool, located.db_schema, worker, topology.partitions)

    async def start(partition: int) -> PullWorker:
        puller = await partition_puller(
            nc,
            topology,
            consumer.stream,
            worker,
            partition,
            consumer.filter(partition),
            consumer.batch,
            ack_wait=consumer.ack_wait,
            max_ack_pending=consumer.max_ack_pending,
            old_filter=consumer.old_filter,
        )
        fence = functools.partial(claims.check, partition)
        return PullWorker(
            f"{worker}-{partition}",
            puller,
            handler(partition, fence),
            consumer.batch,
            metrics=metrics,
            before_fetch=fence,
            contiguous=True,
        )

    return PartitionedService(worker, nc, claims, topology.partitions, start)
