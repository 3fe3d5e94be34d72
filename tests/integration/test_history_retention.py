"""NOEMA_HISTORY_DAYS on the servers: the projector's retention (its wiring as the projector runs it,
over JetStream's clock and PostgreSQL's history tables, with the wall clock moved a day on) drops the
row versions older than the bound and keeps the rest, and a read as of a dropped point is refused
on the API (409) and by ``noemactl`` (exit 5, the conflict code of docs/errors.md), saying how to
ask it: ``noemactl replay --until N --keep``. The rule's schedule: tests/unit/test_history_retention.py.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from noema.adapters.postgres import create_pool, history
from noema.adapters.postgres.tenancy import ALL_WORKSPACES, workspace_scope
from noema_projector.retention import history_retention
from tests.integration.api_harness import memory
from tests.integration.test_asof import World, _ctl, world

pytestmark = [pytest.mark.integration, pytest.mark.slow]
__all__ = ["world"]


async def _versions(world: World, memory_id: str) -> list[tuple[int, int | None]]:
    rows = await world.h.pool.fetch(
        "SELECT valid_from_seq, valid_to_seq FROM memories_history WHERE id = $1 ORDER BY valid_from_seq",
        memory_id,
    )
    return [(r["valid_from_seq"], r["valid_to_seq"]) for r in rows]


async def test_the_projector_drops_the_versions_past_the_bound_and_refuses_a_point_before_it_saying_how(
    world: World,
) -> None:
    created = memory("the vault key rotates monthly")
    vault = created.payload.memory_id
    first = await world.publish(created)
    with workspace_scope(ALL_WORKSPACES):
        await world.app.change_status("retract", vault, actor="operator:root", reason="stale")
    retracted = await world.caught_up()
    bound = datetime.now(UTC)  # the retraction was stored by then, the restore is after it
    await asyncio.sleep(0.01)
    with workspace_scope(ALL_WORKSPACES):
        await world.app.change_status("restore", vault, actor="operator:root", reason="still right")
    restored = await world.caught_up()
    assert await _versions(world, vault) == [(first, retracted), (retracted, restored), (restored, None)]

    # A day later, keeping a day: the first point kept is the retraction (the last event stored by
    # then). The version it replaced goes; the ones a point from it on sees stay. As the projector
    # runs it: its own database role, every workspace's rows.
    assert world.h.settings.database_url_projector is not None
    projector = await create_pool(
        world.h.settings.database_url_projector, world.h.settings.db_schema, workspace=ALL_WORKSPACES
    )
    world.h.stack.push_async_callback(projector.close)
    retention = history_retention(
        1, world.h.js, world.h.topology, projector.acquire, clock=lambda: bound + timedelta(days=1)
    )
    assert await retention() >= 1
    assert await _versions(world, vault) == [(retracted, restored), (restored, None)]
    assert await history.history_start(world.h.pool) == retracted

    # As of a dropped point: refused, saying how to ask it.
    refused = await world.admin.get("/v1/memories", params={"workspace": "acme", "as_of": str(first)})
    assert refused.status_code == 409, refused.text
    assert f"`noemactl replay --until {first} --keep`" in refused.json()["error"]
    assert "NOEMA_HISTORY_DAYS" in refused.json()["error"]
    ran = await _ctl(world, "memory", "list", "-w", "acme", "--as-of", str(first))
    assert (ran.code, "Traceback" in ran.stderr) == (5, False), ran
    assert f"replay --until {first} --keep" in ran.stderr, ran

    # From the bound on, as of a sequence or a time, the history answers as it did.
    held = ((str(retracted), "retracted"), (bound.isoformat(), "retracted"), (str(restored), "active"))
    for point, status in held:
        answer = await world.admin.get("/v1/memories", params={"workspace": "acme", "as_of": point})
        assert answer.status_code == 200, answer.text
        assert [(m["id"], m["status"]) for m in answer.json()["items"]] == [(vault, status)], point
    ran = await _ctl(world, "memory", "list", "-w", "acme", "--as-of", str(retracted), "--json")
    assert ran.code == 0, ran
