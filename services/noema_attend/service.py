"""Composition root of the attend worker: everything it needs, wired from settings."""

from __future__ import annotations

import contextlib
from contextlib import AsyncExitStack

from nats.js.api import DeliverPolicy
from nats.js.errors import NotFoundError

from noema.adapters.postgres.claims import AdvisoryClaim
from noema.adapters.pull import durable_puller
from noema.domain.attention import AttentionConfig
from noema.runtime.claims import ClaimedService
from noema.runtime.metrics import Metrics
from noema.runtime.settings import Located
from noema.runtime.wiring import open_bus, open_pool, sealer
from noema.runtime.worker import PullWorker

from .worker import AttendHandler, decided_through

__all__ = ["build"]


async def build(
    settings: Located, stack: AsyncExitStack, *, metrics: Metrics | None = None
) -> ClaimedService:
    """Connect; once this instance owns attend's claim, ensure the durable consumer and work (a
    standby until then); resources are owned by ``stack``."""
    nc, js, topology = await open_bus(settings, stack, "noema-attend")
    # The claim's connection and one for the keyring: attend reads and writes NATS; PostgreSQL says
    # who decides and holds the keys content is sealed under (noema.application.sealing).
    pool = await open_pool(settings, stack, "reader", app="noema-attend", max_size=2)
    claim = AdvisoryClaim(pool, settings.db_schema, "attend")

    async def start() -> PullWorker:
        durable = topology.durable("attend")
        # A durable consumer with explicit acks, delivering from just after the last decided
        # candidate (see noema_attend.worker); recreated by the owner only. Each mind's working
        # memory is read back from the stream by the new owner, so nothing is carried over.
        through = await decided_through(js, topology)
        if through:
            with contextlib.suppress(NotFoundError):
                await js.delete_consumer(topology.observation_stream, durable)
        puller = await durable_puller(
            nc,
            topology.observation_stream,
            durable,
            topology.observation_subjects,
            settings.batch_size,
            ack_wait=60.0,
            max_ack_pending=20_000,
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE if through else DeliverPolicy.ALL,
            opt_start_seq=through + 1 if through else None,
        )
        config = AttentionConfig(
            threshold=settings.attend_threshold,
            capacity=settings.attend_capacity,
            wm_capacity=settings.wm_capacity,
        )
        # Fenced: the claim is checked right before each cycle's events are published.
        handler = AttendHandler(
            nc, topology, config, decided=through, fence=claim.check, sealer=sealer(pool), metrics=metrics
        )
        return PullWorker("attend", puller, handler, settings.batch_size, metrics=metrics)

    return ClaimedService("attend", nc, claim, start)
