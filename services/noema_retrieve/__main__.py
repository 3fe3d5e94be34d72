"""Entry point of the retrieve worker: ``python -m noema_retrieve``."""

from __future__ import annotations

from contextlib import AsyncExitStack

from noema.logging import configure_logging
from noema.runtime import locate
from noema.settings import Settings
from noema.worker import run_service, run_until_signalled

from .service import build


async def main(settings: Settings) -> None:
    """Run the retrieve worker until SIGTERM/SIGINT."""
    async with AsyncExitStack() as stack:
        worker = await build(locate(settings), stack)
        await run_until_signalled(worker.run, worker.shutdown)


if __name__ == "__main__":
    _settings = Settings.from_env()
    configure_logging(_settings.log_format, _settings.log_level)
    run_service(lambda: main(_settings))
