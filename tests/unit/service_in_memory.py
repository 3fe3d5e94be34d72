"""The NATS agent service over the in-memory composition: its dispatcher (the handlers, error
mapping and counts of :mod:`noema_service.handler`) serves the SDK's client in process, through a
stand-in for the one thing the client asks of its NATS connection, a request and its reply. The
micro protocol (PING, INFO, STATS, queue groups), JetStream publishing, timeouts and shutdown are
tested against real NATS in tests/integration/test_service.py."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

import msgspec
import nats.errors
import pytest
from nats.aio.client import Client as NATS
from nats.micro.request import Request

from noema.composition.pipeline import InMemoryPipeline
from noema_events import Event, ObservationRecorded
from noema_sdk import NoemaClient
from noema_service import operations
from noema_service.handler import Dispatcher
from tests.unit.api_in_memory import in_memory_app

__all__ = ["InMemoryService", "service"]

PREFIX = "noema"


@dataclass(frozen=True)
class Reply:
    """What ``nc.request`` returns: the reply's body and headers."""

    data: bytes
    headers: dict[str, str] | None


class _Request:
    """A request as a micro endpoint's handler receives it."""

    def __init__(self, subject: str, data: bytes, headers: dict[str, str] | None) -> None:
        self.subject, self.data, self.headers = subject, data, headers
        self.answer: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()

    async def respond(self, data: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.answer.set_result(Reply(data, headers))


class Requests:
    """The NATS connection as the SDK's client uses it for agent operations: a request on an
    operation's subject (``<prefix>.agent.<workspace>.<role>.<agent>.<operation>``, the endpoints'
    ``*`` wildcards) is handed to that endpoint's handler, and its reply returned; no endpoint is
    no responders, no reply within the timeout is a timeout, as NATS says them."""

    def __init__(self, dispatcher: Dispatcher, prefix: str = PREFIX) -> None:
        self._handlers = {name: dispatcher.handler(op) for name, op in operations.OPERATIONS.items()}
        self._subject = re.compile(re.escape(prefix) + r"\.agent\.[^.]+\.[^.]+\.[^.]+\.([^.]+)")

    async def request(
        self, subject: str, payload: bytes = b"", timeout: float = 0.5, headers: dict[str, str] | None = None
    ) -> Reply:
        matched = self._subject.fullmatch(subject)
        handler = self._handlers.get(matched.group(1)) if matched else None
        if handler is None:
            raise nats.errors.NoRespondersError
        request = _Request(subject, payload, headers)
        await handler(cast(Request, request))
        try:
            return await asyncio.wait_for(asyncio.shield(request.answer), timeout)
        except TimeoutError:
            raise nats.errors.TimeoutError from None


@dataclass
class InMemoryService:
    """The agent service's dispatcher over an in-memory pipeline, and its request/reply stand-in."""

    pipeline: InMemoryPipeline
    dispatcher: Dispatcher
    nc: Requests

    @contextlib.asynccontextmanager
    async def client(
        self, agent: str = "alice", role: str = "engineer", **kw: Any
    ) -> AsyncIterator[NoemaClient]:
        """An agent's SDK client of ``acme`` over the in-process service."""
        yield NoemaClient(cast(NATS, self.nc), workspace="acme", agent=agent, role=role, prefix=PREFIX, **kw)

    async def settled(self) -> None:
        """Let the pipeline's workers decide everything stored (conflicts: contradictions)."""
        await self.pipeline.run()

    def stream_last_seq(self) -> int:
        """The event stream's last sequence."""
        return len(self.pipeline.stream.events)

    def events(self, type_: str) -> list[dict[str, Any]]:
        """The events of ``type_`` in ``acme`` (actor, mind and payload), in stream order."""
        found: list[Event] = [
            e for e in self.pipeline.stream.events if e.workspace == "acme" and e.type == type_
        ]
        return [{"actor": e.actor, "mind": e.mind, **msgspec.to_builtins(e)["payload"]} for e in found]

    def observations(self, agent: str) -> list[ObservationRecorded]:
        """Every observation stored for ``agent``, oldest first."""
        return [
            e
            for e in self.pipeline.candidates
            if isinstance(e, ObservationRecorded) and e.workspace == "acme" and e.mind == agent
        ]


@pytest.fixture
def service() -> InMemoryService:
    """The agent service's dispatcher over an in-memory pipeline on the wall clock, as the service
    runs. The operations are looked up when this is built, so a test may patch one before taking it."""
    pipeline = InMemoryPipeline()
    dispatcher = Dispatcher(in_memory_app(pipeline))
    return InMemoryService(pipeline, dispatcher, Requests(dispatcher))
