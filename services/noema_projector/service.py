"""Composition root of the projector: everything it needs, wired from settings."""

from __future__ import annotations

from contextlib import AsyncExitStack

from noema.adapters.postgres import ReadModelProjection, migrate
from noema.adapters.postgres.tenancy import ALL_WORKSPACES
from noema.runtime.settings import Located
from noema.runtime.wiring import open_bus, open_pool
from noema.runtime.worker import PullWorker

from .worker import ProjectorHandler, subscribe_from_position

__all__ = ["build"]


async def build(settings: Located, stack: AsyncExitStack) -> PullWorker:
    """Migrate, connect, resume from the committed position; resources are owned by ``stack``."""
    await migrate(settings.database_url, settings.db_schema)
    # The projector writes every workspace's rows: its role, and every workspace under row security.
    pool = await open_pool(
        settings, stack, "projector", app="noema-projector", workspace=ALL_WORKSPACES, max_size=2
    )
    nc, js, topology = await open_bus(settings, stack, "noema-projector")
    projection = ReadModelProjection()
    async with pool.acquire() as conn:
        position = await projection.position(conn)
    puller = await subscribe_from_position(nc, topology, position, settings.batch_size)
    handler = ProjectorHandler(js, pool, topology, projection, position)
    return PullWorker("projector", puller, handler, settings.batch_size)
