"""The operator API over the in-memory composition (:meth:`InMemoryPipeline.noema`): the same clients
and seeding helpers as :mod:`tests.integration.api_harness`, over the app in process
(``httpx.ASGITransport``), with no server. The in-memory stream projects as it stores, so what is
given is read back at once (a test that goes to the wire serves the same app with uvicorn). What
needs the servers (the read model's position, readiness, row-level security) stays in the
integration tier."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import httpx
import pytest

from noema.adapters.metrics import Metrics
from noema.application.search import Recall
from noema.composition.instance import Instance
from noema.composition.pipeline import InMemoryPipeline
from noema_api.app import create_app
from noema_api.auth import TokenEntry, Tokens
from noema_api.endpoint import Api
from noema_events import Event, MemoryCreated
from tests.integration.api_harness import ACME, ADMIN, NOW

__all__ = ["InMemoryApi", "api", "in_memory_api", "in_memory_app"]


def in_memory_app(pipeline: InMemoryPipeline) -> Instance:
    """The pipeline's facade, typed as the composition root the API is built on (what the API's
    handlers call is the facade's), with the metrics a served process keeps."""
    app = pipeline.noema()
    # A served Instance has its process's metrics; the facade takes them as an attribute here.
    setattr(app, "metrics", Metrics())  # noqa: B010 - Noema declares no `metrics` for mypy to see
    return cast(Instance, app)


@dataclass
class InMemoryApi:
    """Clients of the API (one per token, one without) over an in-memory pipeline."""

    pipeline: InMemoryPipeline
    app: Any
    admin: httpx.AsyncClient
    acme: httpx.AsyncClient
    anonymous: httpx.AsyncClient
    instance: Instance
    """The facade the app is built on (what ``noemactl`` opens in tests/unit/cli_in_memory.py)."""

    def app_recall(self) -> Recall:
        """Recall over the read model's voices and no embedder, to compare the API's answers with."""
        return Recall(self.pipeline.voices, None)

    async def caught_up(self) -> None:
        """Nothing to wait for: the in-memory stream projects as it stores."""

    async def given(self, *events: Event) -> list[str]:
        """Store events (projected as they are stored); returns the memory ids created."""
        await self.pipeline.stream.publish(list(events))
        return [e.payload.memory_id for e in events if isinstance(e, MemoryCreated)]


@contextlib.asynccontextmanager
async def in_memory_api(clock: Callable[[], datetime] = lambda: NOW) -> AsyncIterator[InMemoryApi]:
    """The API app over an in-memory pipeline at the harness's clock (or ``clock``), tokens for all
    and for ``acme``."""
    pipeline = InMemoryPipeline(clock=clock)
    tokens = Tokens(
        [TokenEntry(name="alice", token=ADMIN), TokenEntry(name="acme-ops", workspace="acme", token=ACME)]
    )
    instance = in_memory_app(pipeline)
    app = create_app(Api(instance, tokens))
    transport = httpx.ASGITransport(app=app)

    def client(token: str | None) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.AsyncClient(transport=transport, base_url="http://noema", headers=headers)

    async with client(ADMIN) as admin, client(ACME) as acme, client(None) as anonymous:
        yield InMemoryApi(pipeline, app, admin, acme, anonymous, instance)


@pytest.fixture
async def api() -> AsyncIterator[InMemoryApi]:
    """:func:`in_memory_api`, for a test."""
    async with in_memory_api() as harness:
        yield harness
