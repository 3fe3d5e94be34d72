"""Changing NOEMA_PARTITIONS when not every consumer of the old count exists (issue 13): what a
partition of the old count never consumed, and what was stored unpartitioned while no consumer
existed at all, is delivered by the new count's consumers."""

from __future__ import annotations

import pytest
from nats.aio.msg import Msg

from noema.adapters.jetstream import ensure_streams
from noema.adapters.partition_consumers import partition_puller
from noema.adapters.pull import Puller
from noema.client import publish_observation
from noema.topology import Topology
from tests.conftest import Harness
from tests.support import assert_eventually

pytestmark = pytest.mark.integration

WORKSPACES = [f"tenant{i}" for i in range(12)]


async def _open(harness: Harness, t: Topology, partition: int) -> Puller:
    return await partition_puller(
        harness.nc,
        t,
        t.observation_stream,
        "attend",
        partition,
        t.partition_observations(partition),
        100,
        ack_wait=30.0,
        max_ack_pending=1_000,
        old_filter=t.stored_observation_subjects,
    )


async def _drain(puller: Puller, ack: bool) -> list[Msg]:
    got: list[Msg] = []
    while msgs := await puller.fetch(timeout=1.0):
        got += msgs
        for msg in msgs if ack else ():
            await msg.ack_sync()
    await puller.stop()
    return got


async def _publish(harness: Harness, t: Topology, workspaces: list[str]) -> list[int]:
    return [
        await publish_observation(harness.js, f"from {ws}", workspace=ws, mind="ops", topology=t)
        for ws in workspaces
    ]


async def _delivered_by_every_partition(harness: Harness, t: Topology) -> set[int]:
    await ensure_streams(harness.js, t, 120)
    return {
        m.metadata.sequence.stream
        for p in range(t.partitions)
        for m in await _drain(await _open(harness, t, p), False)
    }


async def test_a_partition_of_the_old_count_that_never_had_a_consumer_is_read_after_the_change(
    harness: Harness,
) -> None:
    two, four = Topology(harness.topology.prefix, 2), Topology(harness.topology.prefix, 4)
    await ensure_streams(harness.js, two, 120)
    never = await _publish(harness, two, [ws for ws in WORKSPACES if two.partition(ws) == 1])
    handled = await _publish(harness, two, [ws for ws in WORKSPACES if two.partition(ws) == 0])
    assert never
    assert handled
    assert max(never) < min(handled)
    # Only partition 0 of 2 ever had its consumer: it handled its own, past partition 1's.
    assert [m.metadata.sequence.stream for m in await _drain(await _open(harness, two, 0), True)] == handled

    async def floor_moved() -> bool:
        info = await harness.js.consumer_info(two.observation_stream, two.partitioned_durable("attend", 0))
        return bool(info.ack_floor and info.ack_floor.stream_seq == max(handled))

    await assert_eventually(floor_moved, 10, 0.1, "partition 0's ack floor at its last observation")

    delivered = await _delivered_by_every_partition(harness, four)
    assert set(never) <= delivered, "what partition 1 of 2 never consumed is read by the new count"


async def test_observations_stored_unpartitioned_before_any_consumer_existed_are_read(
    harness: Harness,
) -> None:
    one, four = harness.topology, Topology(harness.topology.prefix, 4)
    await ensure_streams(harness.js, one, 120)
    before = await _publish(harness, one, WORKSPACES)  # no attend has ever run
    await ensure_streams(harness.js, four, 120)
    after = await _publish(harness, four, WORKSPACES)

    delivered = await _delivered_by_every_partition(harness, four)
    assert set(before) | set(after) <= delivered
