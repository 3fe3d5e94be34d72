"""Composition root of the operator API: ``python -m noema_api`` (and ``noemactl api serve``)."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

import structlog
import uvicorn

from noema.adapters.embedders import create_embedder
from noema.adapters.jetstream import EventPublisher, connect
from noema.adapters.postgres import migrate
from noema.adapters.postgres.recall import RecallStore
from noema.logging import configure_logging
from noema.recall import Recall
from noema.runtime import locate
from noema.topology import Topology

from .app import create_app
from .auth import ensure_tokens_file, load_tokens
from .endpoint import Api
from .settings import ApiSettings

log = structlog.get_logger("noema.api")


async def main(api_settings: ApiSettings) -> None:
    """Serve the API until SIGTERM (uvicorn handles the signal and drains requests)."""
    settings = locate(api_settings.base)
    assert settings.nats_url
    assert settings.database_url
    if api_settings.generate_tokens and ensure_tokens_file(api_settings.tokens_file):
        log.warning("operator token created", tokens_file=str(api_settings.tokens_file))
    tokens = load_tokens(api_settings.tokens_file)
    async with AsyncExitStack() as stack:
        await migrate(settings.database_url, settings.db_schema)
        pool = await RecallStore.create_pool(
            settings.database_url, settings.db_schema, app="noema-api", min_size=1, max_size=4
        )
        stack.push_async_callback(pool.close)
        nc = await connect(settings.nats_url, name="noema-api")
        stack.push_async_callback(nc.close)
        topology = Topology(settings.prefix)
        recall = Recall(await RecallStore.open(pool), create_embedder(settings.embedder))
        api = Api(pool, nc, EventPublisher(nc, topology), topology, recall, tokens)
        config = uvicorn.Config(
            create_app(api),
            host=settings.api_host,
            port=settings.api_port,
            log_level="warning",
            access_log=False,
        )
        log.info("api serving", url=f"http://{settings.api_host}:{settings.api_port}")
        await uvicorn.Server(config).serve()


if __name__ == "__main__":
    _settings = ApiSettings.from_env()
    configure_logging(_settings.base.log_format, _settings.base.log_level)
    asyncio.run(main(_settings))
