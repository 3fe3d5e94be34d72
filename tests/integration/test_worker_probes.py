"""A worker process answers its liveness and readiness probes on its metrics port (what the
Kubernetes manifests probe, deploy/k8s/workers.yaml), against real NATS and PostgreSQL: alive and
ready once built, its metrics beside them. (A loop that blocks reads as dead: tests/unit/test_probes.py.)"""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from pathlib import Path

import httpx
import pytest

from tests.conftest import Harness
from tests.integration.test_mcp import code_path
from tests.support import assert_eventually

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("module", ["noema_decay", "noema_projector"])
async def test_a_worker_answers_livez_and_readyz_on_its_metrics_port(
    harness: Harness, tmp_path: Path, module: str
) -> None:
    port = free_port()
    env = harness.settings.to_env() | code_path() | {"NOEMA_METRICS_PORT": str(port)}
    log = tmp_path / "worker.log"
    with log.open("w") as errlog:
        worker = await asyncio.create_subprocess_exec(
            sys.executable, "-m", module, env=env, stdin=asyncio.subprocess.DEVNULL, stderr=errlog
        )
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=base, timeout=5) as client:

            async def ready() -> bool:
                assert worker.returncode is None, log.read_text()
                try:
                    answer = await client.get("/readyz")
                except httpx.TransportError:
                    return False
                return answer.status_code == 200

            await assert_eventually(ready, timeout=60)
            readyz = await client.get("/readyz")
            assert readyz.json() == {"status": "ready"}
            livez = await client.get("/livez")
            assert (livez.status_code, livez.json()) == (200, {"status": "alive"})
            assert livez.headers["content-type"] == "application/json"
            metrics = await client.get("/metrics")
            assert "noema_build_info" in metrics.text
    finally:
        worker.send_signal(signal.SIGTERM)
        await asyncio.wait_for(worker.wait(), 30)
    assert "Traceback" not in log.read_text()
