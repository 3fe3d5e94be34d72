"""Composition root of the operator API: ``python -m noema_api`` (and ``noemactl api serve``)."""

from __future__ import annotations

import asyncio
import sys
from contextlib import AsyncExitStack

import structlog
import uvicorn

from noema.adapters import tracing
from noema.adapters.asgi import KEEP_ALIVE_S
from noema.adapters.embedders import EmbedderConfigError
from noema.adapters.metrics import Metrics
from noema.adapters.postgres import migrate
from noema.composition.instance import Instance
from noema.runtime.embedding import check_embedder
from noema.runtime.health import ErrorTap, Heartbeat
from noema.runtime.locate import locate
from noema.runtime.logging import configure_logging
from noema.runtime.worker import until_connection_lost

from .app import create_app
from .auth import ensure_tokens_file, load_tokens
from .endpoint import Api
from .settings import ApiSettings

log = structlog.get_logger("noema.api")


async def main(api_settings: ApiSettings, errors: ErrorTap | None = None) -> None:
    """Serve the API until SIGTERM (uvicorn handles the signal and drains requests)."""
    settings = locate(api_settings.base, "api")
    tracing.configure("api")  # spans exported only when OTEL_* configures an exporter
    if api_settings.generate_tokens and ensure_tokens_file(api_settings.tokens_file):
        log.warning("operator token created", tokens_file=str(api_settings.tokens_file))
    tokens = load_tokens(api_settings.tokens_file)
    async with AsyncExitStack() as stack:
        await migrate(settings.database_url, settings.db_schema)
        metrics = Metrics()
        app = await stack.enter_async_context(Instance.open(settings, name="noema-api", metrics=metrics))
        # The API's own heartbeat (through its connection), read by `noemactl status` and /readyz.
        await stack.enter_async_context(
            Heartbeat(
                app.nc,
                app.topology,
                "api",
                interval_s=settings.heartbeat_interval_s,
                errors=errors,
                metrics=metrics,
            )
        )
        # Load it now: a bad NOEMA_EMBEDDER (or a server that cannot be used as configured) fails
        # here, exit 2, not on the first search.
        embedder = await app.embedder()
        if embedder is not None:
            await check_embedder(embedder, None)
        config = uvicorn.Config(
            create_app(
                # Each token's rate and concurrency limits (NOEMA_RATE_LIMIT, ...): one token's
                # flood is refused (429) instead of starving the others.
                Api(app, tokens, metrics.admission(settings.admission_limits, "api")),
                api_settings.max_body,
            ),
            host=settings.api_host,
            port=settings.api_port,
            log_level="warning",
            # Requests are logged by the app (noema.adapters.asgi.RequestLog), in the process's log
            # format; uvicorn's own handlers would write plain text into it, so it installs none.
            access_log=False,
            log_config=None,
            # An idle keep-alive connection stays open 75 s (uvicorn's default is 5): clients that
            # pause between calls (an agent thinking, a host between tool calls) reuse it.
            timeout_keep_alive=KEEP_ALIVE_S,
        )
        log.info("api serving", url=f"http://{settings.api_host}:{settings.api_port}")
        # NATS lost for good: stop serving and exit non-zero, so `up` restarts the API.
        await until_connection_lost(uvicorn.Server(config).serve())


if __name__ == "__main__":
    _settings = ApiSettings.from_env()
    _errors = ErrorTap()
    configure_logging(_settings.base.log_format, _settings.base.log_level, observe=_errors)
    try:
        asyncio.run(main(_settings, _errors))
    except EmbedderConfigError as exc:
        log.error("cannot start", error=str(exc))
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
