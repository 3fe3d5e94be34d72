"""``noemactl status`` tells the truth after a crash and right after a start (issue 28, item 6), on
a real ``noemactl up``.

embed is SIGKILLed in the middle of a backlog. The messages it had been given stay in flight until
the consumer's ack wait (300 s) ends, holding the consumer's ack floor where it was, while the
restarted embed works off everything after them. ``status`` used to read the standing floor as a
stall — "nothing acknowledged, 0/s, drains never" — for as long as the ack wait, while vectors were
being stored. Here ``status`` is sampled every second meanwhile: it never says "nothing
acknowledged" across a second in which vectors were stored. ``NOEMA_STALL_AFTER`` is lowered to
10 s, so the old verdict would show within the test's few minutes.

Right after ``up`` logs "noema is up", its processes are still starting (importing, connecting,
taking their claims): ``status`` sampled every second from then on says so — exit 3, ``starting`` —
and never fails (exit 1) on its way to exit 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import AsyncIterator
from typing import Any

import psutil
import pytest

from tests.faults.instance import (
    TOPOLOGY,
    Instance,
    Publisher,
    eventually,
    memory_counts,
    record,
    running,
    temporary_root,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

N = int(os.environ.get("NOEMA_FAULT_OBSERVATIONS", "1500"))
STALL_AFTER_S = 10


@pytest.fixture
async def instance(request: pytest.FixtureRequest) -> AsyncIterator[Instance]:
    """A fresh ``up`` with the default embedder and a short stall threshold."""
    async with running(request, {"NOEMA_STALL_AFTER": str(STALL_AFTER_S)}) as inst:
        yield inst


async def _vectors(instance: Instance) -> int:
    assert instance.pool is not None
    return int(await instance.pool.fetchval("SELECT count(*) FROM memory_embeddings"))


async def _embed_consumer(instance: Instance) -> Any:
    assert instance.nc is not None
    return await instance.nc.jetstream().consumer_info(TOPOLOGY.event_stream, TOPOLOGY.durable("embed"))


async def _status(instance: Instance) -> tuple[int, dict[str, Any]]:
    done = await asyncio.to_thread(instance.ctl, "status", "--json", "--expect", "embed", timeout=60)
    return done.returncode, json.loads(done.stdout)


async def test_status_never_says_nothing_acknowledged_while_a_restarted_embed_stores_vectors(
    instance: Instance,
) -> None:
    assert instance.pool is not None
    pool = instance.pool
    # A backlog for embed: memories made while it is paused.
    with instance.paused("embed"):
        publisher = Publisher(instance.state()["nats_url"], rate=150)
        publisher.start()
        try:

            async def published() -> bool:
                return len(publisher.acked) >= N

            await eventually(published, 300, 0.2, f"{N} observations acknowledged")
        finally:
            await publisher.stop()

        async def remembered() -> bool:
            return len(await memory_counts(pool)) >= N

        await eventually(remembered, 300, 0.5, f"{N} memories (embed paused)")
    before = await _vectors(instance)

    async def embedding() -> bool:
        info = await _embed_consumer(instance)
        return await _vectors(instance) >= before + 64 and int(info.num_ack_pending or 0) > 0

    await eventually(embedding, 120, 0.1, "embed storing vectors with messages in flight")
    old = int(instance.state()["services"]["embed"])
    os.kill(old, signal.SIGKILL)
    killed = await _embed_consumer(instance)
    floor_at_kill = int(killed.ack_floor.consumer_seq)
    in_flight_at_kill = int(killed.num_ack_pending or 0)

    async def restarted() -> bool:
        pid = int(instance.state()["services"]["embed"])
        return pid != old and psutil.pid_exists(pid)

    await eventually(restarted, 60, 0.1, "embed restarted by up")
    restarted_at = time.monotonic()

    samples: list[dict[str, Any]] = []
    wolf: list[dict[str, Any]] = []
    while time.monotonic() - restarted_at < 240:
        stored_before = await _vectors(instance)
        code, report = await _status(instance)
        stored_after = await _vectors(instance)
        info = await _embed_consumer(instance)
        details = [c["detail"] for c in report["checks"] if c["name"] == "embed consumer"]
        sample: dict[str, Any] = {
            "after_s": round(time.monotonic() - restarted_at, 1),
            "code": code,
            "stored": stored_after - stored_before,
            "floor": int(info.ack_floor.consumer_seq),
            "pending": int(info.num_pending or 0),
            "in_flight": int(info.num_ack_pending or 0),
            "detail": details[0] if details else None,
        }
        samples.append(sample)
        if sample["stored"] > 0 and any("nothing acknowledged" in d for d in details):
            wolf.append(sample)
        if sample["pending"] == 0 and sample["stored"] == 0:
            break  # worked off (but for the killed one's messages, until their ack wait ends)
        await asyncio.sleep(1.0)

    # The scenario happened: well past the stall threshold, vectors were stored while the killed
    # embed's messages still held the ack floor where it was at the kill.
    late = STALL_AFTER_S + 5
    held = [s for s in samples if s["stored"] > 0 and s["floor"] == floor_at_kill and s["after_s"] > late]
    record(
        "status-after-embed-kill",
        observations=N,
        in_flight_at_kill=in_flight_at_kill,
        samples=len(samples),
        held_floor_samples=len(held),
        wolf=len(wolf),
        last=samples[-1] if samples else None,
    )
    assert held, f"the floor was never held while vectors were stored: {samples[:3]} ... {samples[-3:]}"
    assert not wolf, f"status said 'nothing acknowledged' while vectors were stored: {wolf[:3]}"
    working = [s for s in held if s["detail"] and "progressing" in s["detail"]]
    assert working, f"status never said the restarted embed was progressing: {held[:3]}"

    # Worked off but for the killed embed's messages, which wait for their ack wait: nothing is
    # acknowledged now, and still no stall — status names the process that held them.
    orphaned: list[tuple[int, list[str]]] = []
    until = time.monotonic() + STALL_AFTER_S + 20
    while samples[-1]["pending"] == 0 and time.monotonic() < until:
        code, report = await _status(instance)
        info = await _embed_consumer(instance)
        if int(info.ack_floor.consumer_seq) != floor_at_kill or int(info.num_pending or 0):
            break  # delivered again already (or more work came)
        orphaned.append((code, [c["detail"] for c in report["checks"] if c["name"] == "embed consumer"]))
        await asyncio.sleep(1.0)
    record("status-after-embed-kill-drained", samples=len(orphaned), last=orphaned[-1] if orphaned else None)
    assert orphaned, "the killed embed's messages were delivered again before they could be sampled"
    assert all(code == 0 for code, _ in orphaned), orphaned
    assert any("which stopped: delivered again within its ack wait" in d for _, ds in orphaned for d in ds), (
        orphaned
    )


async def test_right_after_up_status_says_starting_and_never_fails_on_its_way_to_ok() -> None:
    with temporary_root() as root:
        instance = Instance(root, {"NOEMA_EMBEDDER": "none"})
        instance.start()
        try:

            async def up() -> bool:
                assert instance.up is not None
                assert instance.up.poll() is None, instance.tail()
                return bool(instance.log_path.exists() and instance.events("noema is up"))

            await eventually(up, 180, 0.1, "noema is up")
            samples: list[tuple[float, int, list[str]]] = []
            started = time.monotonic()
            while time.monotonic() - started < 180:
                code, report = await _status_of(instance)
                failing = [f"{c['name']}: {c['detail']}" for c in report["checks"] if not c["ok"]]
                samples.append((round(time.monotonic() - started, 1), code, failing))
                if code == 0:
                    break
                await asyncio.sleep(1.0)
            codes = [code for _, code, _ in samples]
            record("status-after-up", samples=len(samples), codes=codes)
            assert codes[-1] == 0, samples[-3:]
            assert set(codes) <= {0, 3}, [s for s in samples if s[1] not in (0, 3)]
            starting = [s for s in samples if s[1] == 3]
            assert all(all("starting" in line for line in s[2]) for s in starting), starting
        finally:
            instance.force_stop()
            instance.keep_log("status-after-up")


async def _status_of(instance: Instance) -> tuple[int, dict[str, Any]]:
    done = await asyncio.to_thread(instance.ctl, "status", "--json", timeout=60)
    return done.returncode, json.loads(done.stdout)
