"""A worker's liveness and readiness on its metrics port (noema.runtime.probes): the liveness
follows the process's own event loop — a loop that blocks is reported dead while it blocks, and
alive again once it runs — and nothing else; readiness adds NATS and the heartbeat."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from typing import Any

from noema.adapters.metrics import Metrics
from noema.runtime.probes import LoopWatch, Probe, Readiness


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read()


async def test_livez_answers_from_another_thread_503_while_the_loop_is_blocked_and_200_once_it_runs() -> None:
    metrics = Metrics()
    watch = LoopWatch(interval_s=0.05, stuck_after_s=0.5)
    watching = asyncio.create_task(watch.run())
    ready = Readiness(watch.problem, 1.0)
    ready.started(None, None)
    probes: dict[str, Probe] = {"/livez": watch.problem, "/readyz": ready}
    try:
        async with metrics.serving("127.0.0.1", 0, "test", probes) as port:
            base = f"http://127.0.0.1:{port}"
            status, body = await asyncio.to_thread(_get, f"{base}/livez")
            assert (status, json.loads(body)) == (200, {"status": "alive"})
            status, body = await asyncio.to_thread(_get, f"{base}/metrics")
            assert status == 200
            assert b"noema_build_info" in body  # the metrics are still served beside the probes

            time.sleep(1.0)  # noqa: ASYNC251 -- blocks the loop on purpose: a stuck worker
            status, body = _get(f"{base}/livez")
            assert status == 503
            answer = json.loads(body)
            assert answer["status"] == "dead"
            assert "the event loop has not run for" in answer["reason"]
            status, body = _get(f"{base}/readyz")
            assert (status, json.loads(body)["status"]) == (503, "unready")

            await asyncio.sleep(0.2)  # the loop runs again
            status, body = await asyncio.to_thread(_get, f"{base}/livez")
            assert (status, json.loads(body)) == (200, {"status": "alive"})
    finally:
        watching.cancel()


def test_readiness_needs_the_service_built_the_loop_nats_and_a_recent_heartbeat() -> None:
    alive: list[str | None] = [None]
    connected = [True]
    age: list[float | None] = [None]
    ready = Readiness(lambda: alive[0], 5.0)
    assert ready() == "starting: connecting to NATS and PostgreSQL"
    ready.started(lambda: connected[0], lambda: age[0])
    assert ready() == "no heartbeat recorded yet"
    age[0] = 4.0
    assert ready() is None
    age[0] = 16.0
    assert ready() == "no heartbeat recorded for 16 s (every 5 s expected)"
    age[0] = 1.0
    connected[0] = False
    assert ready() == "NATS is disconnected (reconnecting)"
    alive[0] = "stuck"
    assert ready() == "stuck"
    # A process without NATS (none found) or heartbeat is ready when its loop runs.
    plain = Readiness(lambda: None, 5.0)
    plain.started(None, None)
    assert plain() is None
