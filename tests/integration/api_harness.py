"""The operator API over one test's real servers: an httpx client per token, and seeding helpers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from noema.adapters.jetstream import EventPublisher, stream_last_seq
from noema.adapters.postgres import ReadModelProjection
from noema.adapters.postgres.roles import DbRole
from noema.adapters.postgres.voices import RecallStore
from noema.application.search import Recall
from noema.composition.instance import Instance
from noema.ids import new_id
from noema.runtime.health import Heartbeat
from noema_api.app import create_app
from noema_api.auth import TokenEntry, Tokens
from noema_api.endpoint import Api
from noema_events import (
    Event,
    MemoryCreated,
    MemoryCreatedPayload,
    OperatorAction,
    OperatorActionPayload,
    RelationshipAdded,
    RelationshipAddedPayload,
)
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.support import assert_eventually

__all__ = ["ACME", "ADMIN", "ApiHarness", "api", "memory", "relationship", "retraction"]

ADMIN = "admin-token-0123456789"
ACME = "acme-token-0123456789"
NOW = datetime.now(UTC)


def memory(content: str, workspace: str = "acme", mind: str = "ops", **kw: Any) -> MemoryCreated:
    """A memory.created event as attend would publish it."""
    mid = new_id()
    payload: dict[str, Any] = {"kind": "semantic", "epistemic_kind": "fact", **kw}
    return MemoryCreated(
        id=new_id(),
        workspace=workspace,
        mind=mind,
        occurred_at=NOW,
        correlation_id=mid,
        actor="test",
        payload=MemoryCreatedPayload(memory_id=mid, content=content, **payload),
    )


def retraction(memory_id: str) -> OperatorAction:
    """An operator retraction of a memory of ``acme``, by ``operator:test``."""
    return OperatorAction(
        id=f"retract-{memory_id}",
        workspace="acme",
        mind="ops",
        occurred_at=NOW,
        correlation_id=memory_id,
        actor="operator:test",
        payload=OperatorActionPayload(action="retract", target_id=memory_id, reason="wrong"),
    )


def relationship(from_id: str, to_id: str, event_id: str = "rel-event") -> RelationshipAdded:
    """A ``related_to`` edge between two memories of ``acme/ops``."""
    return RelationshipAdded(
        id=event_id,
        workspace="acme",
        mind="ops",
        occurred_at=NOW,
        correlation_id=event_id,
        actor="test",
        payload=RelationshipAddedPayload(
            relationship_id=f"rel-{event_id}", from_id=from_id, to_id=to_id, relation="related_to"
        ),
    )


@dataclass
class ApiHarness:
    """Clients of the API (one per token, one without) over a running projector."""

    h: Harness
    app: Any
    admin: httpx.AsyncClient
    acme: httpx.AsyncClient
    anonymous: httpx.AsyncClient
    recall: Recall

    def app_recall(self) -> Recall:
        """Recall over the app's store and embedder (none), to compare the API's answers with."""
        return self.recall

    async def caught_up(self) -> None:
        """Wait until the projector applied every event of the stream."""

        async def check() -> bool:
            last = await stream_last_seq(self.h.js, self.h.topology.event_stream)
            async with self.h.pool.acquire() as conn:
                return await ReadModelProjection().position(conn) == last

        await assert_eventually(check)

    async def given(self, *events: Event) -> list[str]:
        """Publish events and wait until they are projected; returns the memory ids created."""
        await EventPublisher(self.h.nc, self.h.topology).publish(list(events))
        await self.caught_up()
        return [e.payload.memory_id for e in events if isinstance(e, MemoryCreated)]


@pytest.fixture
async def api(harness: Harness, role_urls: dict[DbRole, str]) -> AsyncIterator[ApiHarness]:
    """The API app over the harness's servers, a projector running, tokens for all and for ``acme``.

    As in production, the API reads as the reader role, under row-level security: a connection sees
    nothing unless the request's token scopes it (every endpoint test thereby checks the scoping)."""
    await harness.start(build_projector)
    # The projector's heartbeat, as `serve()` would record it: /readyz expects just that process here.
    heartbeat = Heartbeat(harness.nc, harness.topology, "projector", interval_s=1.0)
    await heartbeat.beat()
    await harness.stack.enter_async_context(heartbeat)
    tokens = Tokens(
        [TokenEntry(name="alice", token=ADMIN), TokenEntry(name="acme-ops", workspace="acme", token=ACME)]
    )
    pool = await RecallStore.create_pool(
        role_urls["reader"], harness.settings.db_schema, min_size=1, max_size=4
    )
    harness.stack.push_async_callback(pool.close)
    settings = replace(harness.settings, embedder="none", status_workers=("projector",))
    app = create_app(
        Api(Instance(settings, pool, harness.nc, await RecallStore.open(pool), clock=lambda: NOW), tokens)
    )
    recall = Recall(await RecallStore.open(harness.pool), None)
    transport = httpx.ASGITransport(app=app)

    def client(token: str | None) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.AsyncClient(transport=transport, base_url="http://noema", headers=headers)

    async with client(ADMIN) as admin, client(ACME) as acme, client(None) as anonymous:
        yield ApiHarness(harness, app, admin, acme, anonymous, recall)
