"""The vector cache's stream is kept in memory only: a NATS restart empties the server of it, and
only the operator (``up``, ``noemactl prepare``) may create a stream. Found by trying the product:
after one NATS restart every worker that started again — after any crash, or PostgreSQL's restart —
failed to create it and crash-looped for good, ingestion stopped, and ``status`` said nothing of
the stream.

On a real ``noemactl up``: NATS is killed; ``up`` restarts it and creates the stream again by
itself, and ``status`` is clean (it checks the stream); then workers are killed, start again and
work — an observation published afterwards becomes a memory — and stay up. (A worker starting
while the stream is missing is tested on its own in tests/integration/test_nats_auth.py.)
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psutil
import pytest
from nats.js.errors import NotFoundError

from tests.faults.instance import TOPOLOGY, Instance, eventually, running

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(420)]


@pytest.fixture
async def instance(request: pytest.FixtureRequest) -> AsyncIterator[Instance]:
    async with running(request, {"NOEMA_EMBEDDER": "none"}) as inst:
        yield inst


async def _status(instance: Instance) -> tuple[int, list[dict[str, Any]]]:
    result = await asyncio.to_thread(instance.ctl, "status", "--json", timeout=60)
    return result.returncode, json.loads(result.stdout)["checks"]


async def _stream_exists(instance: Instance) -> bool:
    assert instance.nc is not None
    try:
        await instance.nc.jetstream().stream_info(TOPOLOGY.vector_stream)
    except NotFoundError:
        return False
    return True


async def _observed_and_remembered(instance: Instance, text: str) -> None:
    """``noemactl observe`` a new observation, and wait for it to be a memory."""
    result = await asyncio.to_thread(instance.ctl, "observe", text, "-w", "acme", "-m", "alice")
    assert result.returncode == 0, result.stderr
    assert instance.pool is not None
    pool = instance.pool

    async def remembered() -> bool:
        return bool(await pool.fetchval("SELECT count(*) FROM memories WHERE content = $1", text))

    await eventually(remembered, 120, 0.5, f"a memory of {text!r}")


def _crashes(instance: Instance) -> list[dict[str, Any]]:
    """Every exit of a process of ``up`` other than the test's own SIGKILLs, in the log's order."""
    return [e for e in instance.events("service exited; restarting") if e.get("exit_code") != -9]


async def test_after_a_nats_restart_up_recreates_the_vector_cache_and_restarted_workers_work(
    instance: Instance,
) -> None:
    assert await _stream_exists(instance)
    instance.nats_process().send_signal(signal.SIGKILL)

    async def clean() -> bool:
        code, checks = await _status(instance)
        return code == 0 and any(c["name"] == f"stream {TOPOLOGY.vector_stream}" for c in checks)

    await eventually(clean, 120, 1.0, "status exiting 0 after the restart, the vector cache's stream checked")
    assert await _stream_exists(instance)
    assert instance.events("streams restored after a NATS restart")
    # A process that was still starting when NATS went away may have exited then (up restarted it):
    # that is up's supervision at work. What must not happen is a crash once NATS is back.
    during_outage = len(_crashes(instance))

    killed = {}
    for worker in ("attend", "projector", "retrieve"):
        killed[worker] = int(instance.state()["services"][worker])
        os.kill(killed[worker], signal.SIGKILL)
    for worker, old in killed.items():

        async def restarted(worker: str = worker, old: int = old) -> bool:
            now = int(instance.state()["services"][worker])
            return now != old and psutil.pid_exists(now)

        await eventually(restarted, 60, 0.2, f"{worker} started again")
    await _observed_and_remembered(instance, f"after the restarts {uuid.uuid4().hex[:8]}")
    await asyncio.sleep(3)  # a crash loop would have shown by now
    crashed = _crashes(instance)[during_outage:]
    told = {*killed, *(str(e.get("service")) for e in _crashes(instance))}
    assert crashed == [], "\n".join(instance.story(w) for w in sorted(told))
    code, checks = await _status(instance)
    assert code == 0, [c for c in checks if not c["ok"]]
