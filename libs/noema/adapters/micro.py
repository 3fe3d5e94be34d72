"""The NATS micro transport of a request/reply service (the agent service's): registering a service
and its endpoints with nats-py's ``nats.micro``, and the library's types a handler sees, under names
of this adapter so the service itself holds no driver.

A handler gets a :data:`MicroRequest` (``subject``, ``headers``, ``data``, ``respond``); the
service's ``stats`` callback gets each endpoint's :data:`MicroStats` before a STATS reply is sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from nats.aio.client import Client as NATS
from nats.micro import add_service
from nats.micro.request import Request
from nats.micro.service import EndpointStats, Service

__all__ = ["MicroEndpoint", "MicroRequest", "MicroService", "MicroStats", "start_service"]

MicroRequest = Request
"""One request to an endpoint."""
MicroStats = EndpointStats
"""An endpoint's figures, as the STATS reply is about to carry them."""
MicroService = Service
"""A running micro service (``id``; ``stop()`` unsubscribes its endpoints)."""


@dataclass(frozen=True)
class MicroEndpoint:
    """One endpoint: its name, the subject it listens on, its handler and its metadata."""

    name: str
    subject: str
    handler: Callable[[MicroRequest], Awaitable[None]]
    metadata: dict[str, str]


async def start_service(
    nc: NATS,
    *,
    name: str,
    version: str,
    description: str,
    metadata: dict[str, str],
    queue_group: str,
    stats: Callable[[MicroStats], dict[str, Any]],
    endpoints: Iterable[MicroEndpoint],
) -> MicroService:
    """Register the service and each of ``endpoints`` (the requests of one queue group are shared
    by the instances); a registration that fails half-way stops what it started."""
    micro = await add_service(
        nc,
        name=name,
        version=version,
        description=description,
        metadata=metadata,
        queue_group=queue_group,
        stats_handler=stats,
    )
    try:
        for endpoint in endpoints:
            await micro.add_endpoint(
                name=endpoint.name,
                subject=endpoint.subject,
                handler=endpoint.handler,
                metadata=endpoint.metadata,
            )
    except BaseException:
        await micro.stop()
        raise
    return micro
