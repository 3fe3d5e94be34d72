"""Which NATS connections of this process are gone for good.

Every connection made by :func:`noema.adapters.jetstream.connect` is tracked here (weakly). A
long-running process watches them with :func:`watch_connections`: a connection that closes while
the process is still meant to be working (the client gave up, or the server refused it for good)
ends the process with an error, so its supervisor restarts it instead of leaving a zombie that
looks alive and delivers nothing.
"""

from __future__ import annotations

import asyncio
import weakref

import structlog
from nats.aio.client import Client as NATS

__all__ = ["ConnectionLost", "closed_connections", "track", "watch_connections"]

log = structlog.get_logger("noema.liveness")

_tracked: weakref.WeakSet[NATS] = weakref.WeakSet()


class ConnectionLost(RuntimeError):
    """A NATS connection this process relies on closed for good; the process must be restarted."""


def track(nc: NATS) -> NATS:
    """Watch ``nc`` from now on; returns it."""
    _tracked.add(nc)
    return nc


def closed_connections() -> list[str]:
    """Names of the tracked connections that are closed (reconnecting ones are not)."""
    return sorted(str(nc.options.get("name") or "nats") for nc in list(_tracked) if nc.is_closed)


async def watch_connections(interval: float = 1.0) -> None:
    """Return nothing while every tracked connection lives; raise :class:`ConnectionLost` when one
    closes. Run it alongside the work, and only while no one is closing connections on purpose."""
    while True:
        closed = closed_connections()
        if closed:
            log.error("NATS connection closed for good; exiting to be restarted", connections=closed)
            raise ConnectionLost(f"NATS connection closed for good: {', '.join(closed)}")
        await asyncio.sleep(interval)
