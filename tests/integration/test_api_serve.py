"""`noemactl api token` and `noemactl api serve`, as a user runs them, against real servers: the
token opens the API, and the process logs every request as one JSON line in its JSON log."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from noema.runtime.embedded import free_port
from noema_events import decode_event
from tests.conftest import Harness
from tests.support import assert_eventually

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NOEMACTL = [sys.executable, "-m", "noema_cli.main"]


def _env(h: Harness) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA_")}
    return {**env, **h.settings.to_env(), "NOEMA_EMBEDDER": "none", "NOEMA_LOG_FORMAT": "json"}


@pytest.fixture
async def served(harness: Harness) -> AsyncIterator[str]:
    """`noemactl api serve` on a free port of the harness's servers; yields its base URL. Its log
    (stderr) is kept in ``api.log`` of the data folder."""
    port = free_port()
    log = (Path(harness.settings.data_dir) / "api.log").open("wb")
    proc = subprocess.Popen([*NOEMACTL, "api", "serve", "--port", str(port)], env=_env(harness), stderr=log)
    url = f"http://127.0.0.1:{port}"

    async def ready() -> bool:
        assert proc.poll() is None, f"api serve exited with {proc.returncode}"
        try:
            async with httpx.AsyncClient() as client:
                # Liveness: no worker runs beside it, so the system as a whole (/readyz) is not ready.
                return (await client.get(f"{url}/healthz")).status_code == 200
        except httpx.TransportError:
            return False

    try:
        await assert_eventually(ready, timeout=60, interval=0.1)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(proc.wait, 30)
        log.close()


async def test_the_token_printed_by_noemactl_opens_the_served_api(harness: Harness, served: str) -> None:
    printed = subprocess.run(
        [*NOEMACTL, "api", "token"], env=_env(harness), capture_output=True, text=True, check=True, timeout=60
    )
    token = printed.stdout.strip()
    assert token.startswith("noema_")
    tokens_file = Path(harness.settings.data_dir) / "api-tokens.json"
    assert tokens_file.stat().st_mode & 0o777 == 0o600
    async with httpx.AsyncClient(base_url=served) as client:
        assert (await client.get("/v1/memories")).status_code == 401
        res = await client.get("/v1/memories", headers={"Authorization": f"Bearer {token}"})
        assert res.status_code == 200
        assert res.json() == {"items": [], "limit": 50, "offset": 0, "next_offset": None, "next": None}
        entry = {"workspace": "acme", "content": "ship on Tuesdays", "reason": "release policy"}
        created = await client.post("/v1/memories", json=entry, headers={"Authorization": f"Bearer {token}"})
        assert created.status_code == 202
    # The action and the memory it made are on the event stream, the actor being the token's name.
    stored = [await harness.js.get_msg(harness.topology.event_stream, seq) for seq in (1, 2)]
    assert [decode_event(m.data or b"").type for m in stored] == ["operator.action.v1", "memory.created.v1"]
    assert {decode_event(m.data or b"").actor for m in stored} == {"operator:operator"}


async def test_the_served_api_logs_each_request_as_json_and_counts_it_in_its_metrics(
    harness: Harness, served: str
) -> None:
    async with httpx.AsyncClient(base_url=served) as client:
        assert (await client.get("/v1/memories", params={"q": "secret words"})).status_code == 401
        scraped = await client.get("/metrics")
    assert scraped.status_code == 200
    assert 'noema_http_requests_total{method="GET",route="/v1/memories",status="401"} 1.0' in scraped.text
    assert 'route="/healthz",status="200"' in scraped.text  # the fixture's readiness probes

    async def logged() -> list[dict[str, object]] | None:
        text = (Path(harness.settings.data_dir) / "api.log").read_text()
        # One format on the stream: every line is JSON (uvicorn's own lines included, if any).
        lines = [json.loads(line) for line in text.splitlines()]
        requests = [e for e in lines if e.get("event") == "request" and e.get("route") == "/v1/memories"]
        return requests or None

    [request] = await assert_eventually(logged)
    assert (request["method"], request["path"], request["status"]) == ("GET", "/v1/memories", 401)
    assert "secret words" not in json.dumps(request)
    assert isinstance(request["duration_ms"], float)
