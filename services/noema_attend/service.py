"""Composition root of the attend worker: everything it needs, wired from settings."""

from __future__ import annotations

import contextlib
from contextlib import AsyncExitStack

from nats.js.api import DeliverPolicy
from nats.js.errors import NotFoundError

from noema.adapters.pull import durable_puller
from noema.domain.attention import AttentionConfig
from noema.runtime.settings import Located
from noema.runtime.wiring import open_bus
from noema.runtime.worker import PullWorker

from .worker import AttendHandler, decided_through

__all__ = ["build"]


async def build(settings: Located, stack: AsyncExitStack) -> PullWorker:
    """Connect, ensure the streams and the durable consumer; resources are owned by ``stack``."""
    nc, js, topology = await open_bus(settings, stack, "noema-attend")
    durable = topology.durable("attend")
    # A durable consumer with explicit acks, delivering from just after the last decided candidate
    # (see noema_attend.worker). Run one attend per stream: each mind's working memory is held in
    # the process, and the consumer is recreated on start (deploy/README.md).
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
    handler = AttendHandler(nc, topology, config, decided=through)
    return PullWorker("attend", puller, handler, settings.batch_size)
