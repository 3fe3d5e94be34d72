"""Replay and checksum per partition (issue 13): with NOEMA_PARTITIONS = 4, two attend instances
sharing the partitions and one projector, ``noemactl replay`` reports a checksum per partition (the
rows of the workspaces NATS puts there) beside the combined one, all matching; a row changed in one
workspace is reported against that workspace's partition only; and a vector's row counts in its
memory's partition."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import replace

import pytest

from noema.adapters.jetstream import EventPublisher
from noema.adapters.postgres import ReadModelProjection
from noema.client import publish_observation
from noema.composition.replay import verify_replay
from noema.runtime.settings import Located
from noema.topology import partition_of
from noema_attend.service import build as build_attend
from noema_events import MemoryEmbedded, MemoryEmbeddedPayload
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.support import assert_eventually, envelope

pytestmark = pytest.mark.integration

P = 4
WORKSPACES = [f"tenant{i}" for i in range(12)]
PER_WORKSPACE = 5


@pytest.fixture
async def projected(harness: Harness) -> Located:
    """Observations of 12 workspaces (every partition holds some) decided by two attend instances
    and projected as memories; the settings of the partitioned deployment."""
    settings = replace(harness.settings, partitions=P, attend_threshold=0.0, attend_capacity=10_000)
    assert {partition_of(ws, P) for ws in WORKSPACES} == set(range(P))
    for build in (build_attend, build_attend, build_projector):
        await harness.start(_with(settings, build))
    for i in range(PER_WORKSPACE):
        for ws in WORKSPACES:
            await publish_observation(
                harness.js, f"note {i} of {ws}", workspace=ws, mind="ops", topology=settings.topology
            )
    wanted = PER_WORKSPACE * len(WORKSPACES)

    async def all_projected() -> bool:
        return bool(await harness.pool.fetchval("SELECT count(*) FROM memories") == wanted)

    await assert_eventually(all_projected, 60, 0.2, f"{wanted} memories")
    return settings


def _with(
    settings: Located, build: Callable[[Located, AsyncExitStack], Awaitable[object]]
) -> Callable[[Located, AsyncExitStack], Awaitable[object]]:
    """``build`` with these settings, whatever the harness's."""
    return lambda _settings, stack: build(settings, stack)


async def test_replay_reports_a_matching_checksum_per_partition(harness: Harness, projected: Located) -> None:
    report = await verify_replay(projected, harness.nc)

    assert report["match"] is True, report.get("differences")
    assert [p["partition"] for p in report["partitions"]] == list(range(P))
    assert all(p["match"] and p["checksum"] == p["live_checksum"] for p in report["partitions"])
    assert report["partitions_differing"] == []
    assert len({p["checksum"] for p in report["partitions"]}) == P, "each partition's rows are its own"


async def test_a_row_changed_in_one_workspace_is_reported_against_its_partition_only(
    harness: Harness, projected: Located
) -> None:
    changed = WORKSPACES[5]
    before = await verify_replay(projected, harness.nc)
    await harness.pool.execute(
        "UPDATE memories SET activation = 0.125 WHERE id = "
        "(SELECT id FROM memories WHERE workspace = $1 ORDER BY id LIMIT 1)",
        changed,
    )

    report = await verify_replay(projected, harness.nc)

    assert report["match"] is False
    assert report["partitions_differing"] == [partition_of(changed, P)]
    # The read model keeps its own history: the changed row's open version differs as well.
    assert report["differences"]["count"] == {"memories": 1, "memories_history": 1}
    for now, then in zip(report["partitions"], before["partitions"], strict=True):
        assert now["checksum"] == then["checksum"], "the replay rebuilt the same rows"
        if now["partition"] != partition_of(changed, P):
            assert now["live_checksum"] == then["live_checksum"], "another partition's rows are unchanged"


async def test_a_vector_counts_in_its_memorys_partition(harness: Harness, projected: Located) -> None:
    ws = WORKSPACES[7]
    assert partition_of(ws, P) != partition_of("", P)  # where a row of no workspace would count
    memory_id = await harness.pool.fetchval(
        "SELECT id FROM memories WHERE workspace = $1 ORDER BY id LIMIT 1", ws
    )
    vector = MemoryEmbedded(
        **envelope(ws),
        payload=MemoryEmbeddedPayload(memory_id=memory_id, model="tiny", dimensions=3, vector=[0.5] * 3),
    )
    before = await verify_replay(projected, harness.nc)
    last = await EventPublisher(harness.nc, projected.topology).publish([vector])

    async def projected_through() -> bool:
        async with harness.pool.acquire() as conn:
            return bool(await ReadModelProjection().position(conn) >= last)

    await assert_eventually(projected_through, 30, 0.1, "the vector projected")
    assert await harness.pool.fetchval("SELECT count(*) FROM memory_embeddings") == 1

    report = await verify_replay(projected, harness.nc)
    assert report["match"] is True, report.get("differences")
    moved = [
        p["partition"] for p, q in zip(report["partitions"], before["partitions"], strict=True) if p != q
    ]
    assert moved == [partition_of(ws, P)], "the event and the vector's row are in its memory's partition"
