"""Composition root of the projector: ``python -m noema_projector``."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

from noema.adapters.jetstream import connect, ensure_streams
from noema.adapters.postgres import ReadModelProjection, create_pool, migrate
from noema.logging import configure_logging
from noema.runtime import locate
from noema.settings import Settings
from noema.topology import Topology
from noema.worker import PullWorker, run_until_signalled

from .worker import ProjectorHandler, subscribe_from_position


async def main(settings: Settings) -> None:
    """Wire the projector from settings and run it until SIGTERM."""
    settings = locate(settings)
    assert settings.nats_url and settings.database_url
    topology = Topology(settings.prefix)
    async with AsyncExitStack() as stack:
        await migrate(settings.database_url, settings.db_schema)
        pool = await create_pool(settings.database_url, settings.db_schema, app="noema-projector", min_size=1, max_size=2)
        stack.push_async_callback(pool.close)
        nc = await connect(settings.nats_url, name="noema-projector")
        stack.push_async_callback(nc.close)
        js = nc.jetstream()
        await ensure_streams(js, topology, settings.duplicate_window_s)
        projection = ReadModelProjection()
        async with pool.acquire() as conn:
            position = await projection.position(conn)
        psub = await subscribe_from_position(js, topology, position, settings.batch_size)
        handler = ProjectorHandler(js, pool, topology, projection, position)
        worker = PullWorker("projector", psub, handler, settings.batch_size)
        await run_until_signalled(worker.run, worker.shutdown)


if __name__ == "__main__":
    _settings = Settings.from_env()
    configure_logging(_settings.log_format, _settings.log_level)
    asyncio.run(main(_settings))
