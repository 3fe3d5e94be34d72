"""Composition root of the agent service: the application layer, a NATS micro service named
``noema`` with one endpoint per operation on ``<prefix>.agent.*.*.*.<operation>`` (queue group
``noema``, so instances share the load)."""

from __future__ import annotations

import asyncio
import json
from contextlib import AsyncExitStack

import structlog

from noema import __version__
from noema.adapters.metrics import Metrics
from noema.adapters.micro import MicroEndpoint, MicroService, start_service
from noema.composition.instance import Instance
from noema.runtime.settings import Located
from noema_sdk.protocol import QUEUE_GROUP, SERVICE_NAME, endpoint_subject

from .handler import Dispatcher
from .operations import OPERATIONS

__all__ = ["AgentService", "build"]

log = structlog.get_logger("noema.service")


class AgentService:
    """The running micro service; :meth:`shutdown` stops taking requests, in-flight ones reply."""

    name = "service"

    def __init__(self, micro: MicroService, dispatcher: Dispatcher) -> None:
        self.micro = micro
        self._dispatcher = dispatcher
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        """Serve until :meth:`shutdown` (requests are handled by the NATS client's callbacks)."""
        log.info("service started", id=self.micro.id, endpoints=len(OPERATIONS))
        await self._stopping.wait()
        await self.micro.stop()
        await self._dispatcher.drain()
        log.info("service stopped", id=self.micro.id)

    def shutdown(self) -> None:
        """Stop gracefully: unsubscribe, let the requests in progress reply."""
        self._stopping.set()


async def build(settings: Located, stack: AsyncExitStack, *, metrics: Metrics | None = None) -> AgentService:
    """Open the application layer and register every endpoint; resources are owned by ``stack``;
    searches and requests are counted into ``metrics``."""
    app = await stack.enter_async_context(Instance.open(settings, name="noema-service", metrics=metrics))
    # Each agent's rate and concurrency limits (NOEMA_RATE_LIMIT, ...): a flood is refused (429).
    dispatcher = Dispatcher(app, app.metrics.admission(settings.admission_limits, "service"))
    micro = await start_service(
        app.nc,
        name=SERVICE_NAME,
        version=__version__,
        description="Noema agent operations (memory search, facts, policies, notes, observations)",
        metadata={"prefix": settings.prefix},
        queue_group=QUEUE_GROUP,
        stats=dispatcher.stats,
        endpoints=[
            MicroEndpoint(
                name=op.name,
                subject=endpoint_subject(settings.prefix, op.name),
                handler=dispatcher.handler(op),
                metadata={"description": op.description, "input_schema": json.dumps(op.schema)},
            )
            for op in OPERATIONS.values()
        ],
    )
    stack.push_async_callback(micro.stop)  # idempotent
    await app.nc.flush()
    return AgentService(micro, dispatcher)
