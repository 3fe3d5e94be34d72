"""Composition root of the projector: everything it needs, wired from settings."""

from __future__ import annotations

from contextlib import AsyncExitStack

from noema.adapters.metrics import Metrics
from noema.adapters.postgres import ReadModelProjection, migrate
from noema.adapters.postgres.claims import AdvisoryClaim
from noema.adapters.postgres.tenancy import ALL_WORKSPACES
from noema.runtime.claims import ClaimedService
from noema.runtime.settings import Located
from noema.runtime.wiring import open_bus, open_pool
from noema.runtime.worker import PullWorker

from .retention import history_retention
from .worker import ProjectorHandler, subscribe_from_position

__all__ = ["build"]


async def build(
    settings: Located, stack: AsyncExitStack, *, metrics: Metrics | None = None
) -> ClaimedService:
    """Migrate and connect; once this instance owns the projector's claim, resume from the
    committed position (a standby until then); resources are owned by ``stack``."""
    await migrate(settings.database_url, settings.db_schema)
    # The projector writes every workspace's rows: its role, and every workspace under row security.
    # One connection is the claim's (held while this instance owns it, and the one it writes with).
    pool = await open_pool(
        settings, stack, "projector", app="noema-projector", workspace=ALL_WORKSPACES, max_size=3
    )
    nc, js, topology = await open_bus(settings, stack, "noema-projector")
    claim = AdvisoryClaim(pool, settings.db_schema, "projector")

    async def start() -> PullWorker:
        # Only the owner reads the position and recreates the durable consumer from it.
        projection = ReadModelProjection()
        async with claim.connection() as conn:
            position = await projection.position(conn)
        puller = await subscribe_from_position(nc, topology, position, settings.batch_size)
        handler = ProjectorHandler(
            js,
            pool,
            topology,
            projection,
            position,
            connection=claim.connection,
            metrics=metrics,
        )
        # NOEMA_HISTORY_DAYS, before each fetch: hourly, when idle too (the history ages unwritten).
        retention = history_retention(settings.history_days, js, topology, claim.connection)

        async def bound_history() -> None:
            await retention()

        return PullWorker(
            "projector", puller, handler, settings.batch_size, metrics=metrics, before_fetch=bound_history
        )

    return ClaimedService("projector", nc, claim, start)
