"""Killing the projector with SIGKILL mid-ingest loses nothing and duplicates nothing."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

import pytest

from noema.client import build_observation
from noema.topology import Topology
from noema_events import encode_event
from tests.conftest import Harness
from tests.support import assert_eventually

pytestmark = [pytest.mark.integration, pytest.mark.slow]

N = 20_000


def _spawn(module: str, harness: Harness) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        **harness.settings.to_env(),
        "NOEMA_ATTEND_THRESHOLD": "0",
        "NOEMA_LOG_LEVEL": "warning",
    }
    return subprocess.Popen([sys.executable, "-m", module], env=env)


async def publish_many(js, topology: Topology, n: int, workspace: str = "acme") -> list[str]:  # type: ignore[no-untyped-def]
    """Publish ``n`` distinct observations, pipelined; returns their ids."""
    ids, futures = [], []
    for i in range(n):
        obs = build_observation(
            f"observation {i}: host-{i % 97} reported status {i * 7 % 13}",
            workspace=workspace,
            mind=f"agent{i % 4}",
        )
        ids.append(obs.id)
        futures.append(
            await js.publish_async(
                topology.observation_subject(workspace, obs.mind),
                encode_event(obs),
                headers={"Nats-Msg-Id": obs.id},
            )
        )
    await asyncio.gather(*futures)
    return ids


async def test_a_killed_projector_resumes_with_exactly_one_memory_per_admitted_observation(
    harness: Harness,
) -> None:
    attend = _spawn("noema_attend", harness)
    projector = _spawn("noema_projector", harness)
    try:
        ids = await publish_many(harness.js, harness.topology, N)

        async def partially_projected() -> bool:
            count: int = await harness.pool.fetchval("SELECT count(*) FROM memories")
            return 0 < count < N

        await assert_eventually(partially_projected, timeout=60, interval=0.01)
        projector.send_signal(signal.SIGKILL)
        assert projector.wait(10) == -signal.SIGKILL
        killed_at = await harness.pool.fetchval("SELECT count(*) FROM memories")
        assert killed_at < N, "the kill must happen mid-ingest for this test to mean anything"

        projector = _spawn("noema_projector", harness)

        async def all_admitted_projected() -> bool:
            admitted: int = await harness.pool.fetchval(
                "SELECT count(*) FROM events e, jsonb_array_elements(e.payload->'decisions') d "
                "WHERE e.type = 'attention.decided.v1' AND (d->>'admitted')::boolean"
            )
            projected: int = await harness.pool.fetchval("SELECT count(*) FROM memories")
            return admitted == N and projected == N

        await assert_eventually(all_admitted_projected, timeout=120, interval=0.2)
        rows = await harness.pool.fetch("SELECT source_observation_ids[1] AS obs FROM memories")
        assert sorted(r["obs"] for r in rows) == sorted(ids)  # exactly one memory per observation
        seqs = await harness.pool.fetchval("SELECT count(*) - count(DISTINCT seq) FROM events")
        assert seqs == 0
    finally:
        for proc in (attend, projector):
            proc.terminate()
            proc.wait(15)
