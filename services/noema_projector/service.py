"""Composition root of the projector: everything it needs, wired from settings."""

from __future__ import annotations

from contextlib import AsyncExitStack

from noema.adapters.jetstream import connect, ensure_streams
from noema.adapters.postgres import ReadModelProjection, create_pool, migrate
from noema.adapters.postgres.tenancy import ALL_WORKSPACES
from noema.runtime.settings import Settings
from noema.runtime.topology import Topology
from noema.runtime.worker import PullWorker

from .worker import ProjectorHandler, subscribe_from_position

__all__ = ["build"]


async def build(settings: Settings, stack: AsyncExitStack) -> PullWorker:
    """Migrate, connect, resume from the committed position; resources are owned by ``stack``."""
    assert settings.nats_url, "settings must be located"
    assert settings.database_url, "settings must be located"
    topology = Topology(settings.prefix)
    await migrate(settings.database_url, settings.db_schema)
    # The projector writes every workspace's rows: its role, and every workspace under row security.
    pool = await create_pool(
        settings.database_url_for("projector"),
        settings.db_schema,
        app="noema-projector",
        workspace=ALL_WORKSPACES,
        min_size=1,
        max_size=2,
    )
    stack.push_async_callback(pool.close)
    nc = await connect(settings.nats_url, name="noema-projector", auth=settings.nats_auth)
    stack.push_async_callback(nc.close)
    js = nc.jetstream()
    await ensure_streams(
        js, topology, settings.duplicate_window_s, settings.stream_replicas, settings.dead_letter_policy
    )
    projection = ReadModelProjection()
    async with pool.acquire() as conn:
        position = await projection.position(conn)
    puller = await subscribe_from_position(nc, topology, position, settings.batch_size)
    handler = ProjectorHandler(js, pool, topology, projection, position)
    return PullWorker("projector", puller, handler, settings.batch_size)
