"""Heartbeats and the system checks over real NATS JetStream and PostgreSQL."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from nats.js.api import AckPolicy, ConsumerConfig

from noema.adapters.jetstream import connect, connect_within
from noema.adapters.postgres import ReadModelProjection
from noema.client import publish_observation
from noema.runtime.health import Heartbeat, HeartbeatRecord, read_heartbeats
from noema.runtime.readiness import Check, system_status
from noema_attend.service import build as build_attend
from tests.conftest import Harness
from tests.support import assert_eventually

pytestmark = pytest.mark.integration


def _position(h: Harness) -> Callable[[], Awaitable[int]]:
    async def position() -> int:
        async with h.pool.acquire() as conn:
            return await ReadModelProjection().position(conn)

    return position


def _by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


async def _records(h: Harness, worker: str) -> list[HeartbeatRecord]:
    return [r for r in await read_heartbeats(h.nc, h.topology) if r.worker == worker]


async def test_a_heartbeat_is_readable_while_it_runs_and_gone_after_a_clean_stop(harness: Harness) -> None:
    async with Heartbeat(harness.nc, harness.topology, "decay", interval_s=0.1, pid=7, host="h1"):
        seen = await assert_eventually(lambda: _records(harness, "decay"))
        assert (seen[0].pid, seen[0].host, seen[0].stopped, seen[0].consumer) == (7, "h1", False, None)
    assert await _records(harness, "decay") == []


async def test_a_crash_leaves_a_last_record_with_the_error(harness: Harness) -> None:
    with pytest.raises(RuntimeError):
        async with Heartbeat(harness.nc, harness.topology, "decay", interval_s=0.1):
            raise RuntimeError("database vanished")
    [record] = await _records(harness, "decay")
    assert record.stopped
    assert record.last_error == "crashed: RuntimeError: database vanished"


async def test_a_disconnected_process_cannot_beat(harness: Harness) -> None:
    assert harness.settings.nats_url
    nc = await connect(harness.settings.nats_url, name="doomed")
    heartbeat = Heartbeat(nc, harness.topology, "decay", interval_s=60)
    assert await heartbeat.beat()
    await nc.close()
    assert not await heartbeat.beat()


async def test_a_running_worker_with_its_heartbeat_is_healthy_and_its_records_show_progress(
    harness: Harness,
) -> None:
    settings = dataclasses.replace(harness.settings, status_workers=("attend",), heartbeat_interval_s=0.1)
    await harness.start(build_attend)
    await harness.stack.enter_async_context(Heartbeat(harness.nc, harness.topology, "attend", interval_s=0.1))
    for i in range(3):
        await publish_observation(
            harness.js, f"note {i}", workspace="acme", mind="ops", topology=harness.topology
        )

    async def healthy() -> dict[str, Check] | None:
        checks = _by_name((await system_status(settings, harness.nc, _position(harness))).checks)
        consumer = checks["attend consumer"]
        return checks if all(c.ok for c in checks.values()) and "idle" in consumer.detail else None

    checks = await assert_eventually(healthy, timeout=20)
    assert set(checks) >= {"nats", "postgres", "attend", "attend consumer", "projector lag"}

    async def recorded() -> HeartbeatRecord | None:
        [record] = await _records(harness, "attend")
        return record if (record.ack_floor or 0) >= 3 else None  # the beat after the batch was acked

    record = await assert_eventually(recorded)
    assert record.consumer == harness.topology.durable("attend")
    assert record.backlog == 0


async def test_missing_heartbeats_consumers_and_an_unanswering_database_are_named(harness: Harness) -> None:
    settings = dataclasses.replace(harness.settings, status_workers=("attend", "decay"))

    async def broken() -> int:
        raise OSError("connection refused")

    found = _by_name((await system_status(settings, harness.nc, broken)).checks)
    failed = {name for name, c in found.items() if not c.ok}
    assert failed == {"attend", "attend consumer", "decay", "postgres"}
    assert found["postgres"].detail == "OSError: connection refused"
    assert "projector lag" not in found  # unknown without the read model's position


async def test_without_nats_the_check_says_so_and_postgres_is_still_checked(harness: Harness) -> None:
    status = await system_status(harness.settings, None, _position(harness), nats_error="nats://x: refused")
    found = status.checks
    assert [(c.name, c.ok) for c in found] == [("nats", False), ("postgres", True)]
    assert found[0].line == "nats: nats://x: refused"


async def test_a_connected_worker_whose_consumer_does_not_progress_while_work_waits_is_stalled(
    harness: Harness,
) -> None:
    # attend's consumer exists (as its owner creates it) and its process beats, but nothing
    # fetches: a hung handler.
    t = harness.topology
    await harness.js.add_consumer(
        t.observation_stream,
        ConsumerConfig(
            durable_name=t.durable("attend"),
            ack_policy=AckPolicy.EXPLICIT,
            filter_subject=t.observation_subjects,
        ),
    )
    await harness.stack.enter_async_context(Heartbeat(harness.nc, harness.topology, "attend", interval_s=0.1))
    settings = dataclasses.replace(harness.settings, status_workers=("attend",), stall_after_s=1.0)
    for i in range(2):
        await publish_observation(
            harness.js, f"note {i}", workspace="acme", mind="ops", topology=harness.topology
        )

    async def stalled() -> dict[str, Check] | None:
        checks = _by_name((await system_status(settings, harness.nc, _position(harness))).checks)
        return checks if not checks["attend consumer"].ok else None

    checks = await assert_eventually(stalled, timeout=20)
    assert checks["attend"].ok  # alive and connected...
    assert "stalled: 2 waiting" in checks["attend consumer"].detail  # ...but not working


class _StreamWithoutLeader:
    """The harness's connection, but one stream's info never comes (a stream between leaders on a
    cluster that lost its leader's server); everything else goes to the real server."""

    def __init__(self, nc: Any, stream: str) -> None:
        self._nc, self._stream = nc, stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self._nc, name)

    def jetstream(self, **kwargs: Any) -> Any:
        js = self._nc.jetstream(**kwargs)
        real = js.stream_info

        async def stream_info(name: str, *args: Any, **kw: Any) -> Any:
            if name == self._stream:
                await asyncio.Event().wait()
            return await real(name, *args, **kw)

        js.stream_info = stream_info
        return js


async def test_a_stream_that_does_not_answer_fails_alone_and_the_rest_is_still_told(harness: Harness) -> None:
    # The other streams say which server is down on a cluster: one unanswered stream must not hide it.
    settings = dataclasses.replace(harness.settings, status_workers=("decay",))
    nc: Any = _StreamWithoutLeader(harness.nc, harness.topology.observation_stream)
    async with Heartbeat(harness.nc, harness.topology, "decay", interval_s=0.1):
        await assert_eventually(lambda: _records(harness, "decay"))
        found = _by_name((await system_status(settings, nc, _position(harness))).checks)
    assert found["nats"].ok
    observations = found[f"stream {harness.topology.observation_stream}"]
    assert (observations.ok, observations.detail) == (False, "no answer within 2 s (no leader?)")
    assert found[f"stream {harness.topology.event_stream}"].ok
    assert found["decay"].ok, found["decay"]
    assert "projector lag" in found


async def test_a_server_that_takes_connections_but_never_answers_leaves_time_for_the_others(
    harness: Harness,
) -> None:
    # Three ports that accept and stay silent (a stopped server, a held port) listed with the real
    # one: whichever order the client tries them in, it reaches the real one within the time given.
    silent = []
    for _ in range(3):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        silent.append(s)
    url = ",".join([*(f"nats://127.0.0.1:{s.getsockname()[1]}" for s in silent), harness.settings.nats_url])
    try:
        for _ in range(3):  # the order is random: three tries meet a silent server first
            nc = await connect_within(url, "status-probe", 4)  # TimeoutError: not within 4 s
            assert nc.is_connected
            await nc.close()
    finally:
        for s in silent:
            s.close()
