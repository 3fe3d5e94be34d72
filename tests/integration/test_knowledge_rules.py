"""The working-memory capacity comes from the settings, through attend and the projector on the real
servers. The other rules of a topic (only contradictions conflict; an expired fact controls nothing,
judged at each proposal's own time; ids may be shortened; a merge counts every merged fact) run over
the whole pipeline in memory in tests/unit/test_knowledge_rules_in_memory.py."""

from __future__ import annotations

import dataclasses
from contextlib import AsyncExitStack
from typing import Any

import pytest

from noema.adapters.jetstream import stream_last_seq
from noema.adapters.postgres import ReadModelProjection
from noema.composition.instance import connected_knowledge
from noema.runtime.settings import Settings
from noema_attend.service import build as build_attend
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.integration.test_knowledge import observe_migration_steps
from tests.support import assert_eventually

pytestmark = pytest.mark.integration


async def test_the_working_memory_capacity_comes_from_the_settings(harness: Harness) -> None:
    settings = dataclasses.replace(harness.settings, wm_capacity=3)

    async def attend(_: Settings, stack: AsyncExitStack) -> Any:
        return await build_attend(settings, stack)

    await harness.start(build_projector)
    await harness.start(attend)
    await observe_migration_steps(harness, 5)

    async def caught_up() -> bool:
        if await harness.pool.fetchval("SELECT count(*) FROM memories WHERE workspace = 'acme'") < 5:
            return False
        async with harness.pool.acquire() as conn:
            position = await ReadModelProjection().position(conn)
        return position == await stream_last_seq(harness.js, harness.topology.event_stream)

    await assert_eventually(caught_up)
    wm = await connected_knowledge(harness.pool, harness.nc, harness.topology).working_memory("acme", "ops")
    assert (wm["capacity"], len(wm["items"])) == (3, 3)
