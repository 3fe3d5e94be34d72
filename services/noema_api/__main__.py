"""Composition root of the operator API: ``python -m noema_api``."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

import uvicorn

from noema.adapters.jetstream import connect
from noema.adapters.postgres import create_pool, migrate
from noema.logging import configure_logging
from noema.runtime import locate
from noema.settings import Settings

from .app import create_app


async def main(settings: Settings) -> None:
    """Serve the API until SIGTERM (uvicorn handles the signal and drains requests)."""
    settings = locate(settings)
    assert settings.nats_url
    assert settings.database_url
    async with AsyncExitStack() as stack:
        await migrate(settings.database_url, settings.db_schema)
        pool = await create_pool(
            settings.database_url, settings.db_schema, app="noema-api", min_size=1, max_size=4
        )
        stack.push_async_callback(pool.close)
        nc = await connect(settings.nats_url, name="noema-api")
        stack.push_async_callback(nc.close)
        config = uvicorn.Config(
            create_app(pool, nc),
            host=settings.api_host,
            port=settings.api_port,
            log_level="warning",
            access_log=False,
        )
        await uvicorn.Server(config).serve()


if __name__ == "__main__":
    _settings = Settings.from_env()
    configure_logging(_settings.log_format, _settings.log_level)
    asyncio.run(main(_settings))
