"""Prometheus metrics, scraped over HTTP from workers and the API running on the real servers: a
consumer's lag rises while its worker is away and falls as it works, messages are counted as
processed or dead-lettered, the projection position follows the stream, and the API counts its
requests by route and status and its searches by mode."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import AsyncExitStack
from functools import partial
from typing import Any

import httpx
import pytest
import structlog
from prometheus_client.parser import text_string_to_metric_families

from noema.adapters.jetstream import stream_last_seq
from noema.adapters.metrics import Metrics
from noema.client import publish_observation
from noema.runtime.health import Heartbeat
from noema.runtime.settings import Located
from noema_attend.service import build as build_attend
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.integration.api_harness import ApiHarness, api, memory
from tests.support import assert_eventually

pytestmark = pytest.mark.integration
__all__ = ["api"]

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(text: str) -> Samples:
    """Every sample of an exposition, by name and labels."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(found: Samples, name: str, **labels: str) -> float | None:
    """The sample ``name`` with exactly ``labels`` (None when it is not exported)."""
    return found.get((name, frozenset(labels.items())))


class Scraper:
    """GETs a process's ``/metrics`` the way Prometheus does."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def __call__(self) -> Samples:
        async with httpx.AsyncClient() as client:
            answer = await client.get(self.url)
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/plain")
        return samples(answer.text)

    async def until(self, check: Callable[[Samples], bool], timeout: float = 30) -> Samples:
        """Scrape until ``check`` holds of a scrape; returns that scrape."""

        async def once() -> Samples | None:
            found = await self()
            return found if check(found) else None

        found: Samples = await assert_eventually(once, timeout=timeout)
        return found


async def running(build: Callable[..., Awaitable[Any]], settings: Located, stack: AsyncExitStack) -> Any:
    """Build a worker into ``stack`` and run it; returns a function that stops it cleanly."""
    worker = await build(settings, stack)
    task = asyncio.create_task(worker.run())

    async def stop() -> None:
        worker.shutdown()
        await asyncio.wait_for(task, 10)

    return stop


async def test_a_scrape_during_an_ingest_sees_the_lag_rise_and_fall_and_the_counts_move(
    harness: Harness,
) -> None:
    metrics = Metrics()
    port = await harness.stack.enter_async_context(metrics.serving("127.0.0.1", 0, "test"))
    scrape = Scraper(f"http://127.0.0.1:{port}/metrics")
    attend = {"worker": "attend", "consumer": harness.topology.durable("attend")}
    # The worker's heartbeat reads its consumer and sets the lag gauges, as serve() wires it.
    await harness.stack.enter_async_context(
        Heartbeat(harness.nc, harness.topology, "attend", interval_s=0.1, metrics=metrics)
    )
    build = partial(build_attend, metrics=metrics)

    first = AsyncExitStack()
    stop = await running(build, harness.settings, first)
    await scrape.until(lambda s: value(s, "noema_consumer_pending_messages", **attend) == 0)
    await stop()
    await first.aclose()

    # The worker is away: what arrives now is lag.
    observations = 12
    for i in range(observations):
        await publish_observation(
            harness.js, f"deploy {i} finished", workspace="acme", mind="ops", topology=harness.topology
        )
    await harness.js.publish(harness.topology.observation_subject("acme", "ops"), b"not an observation")
    arrived = observations + 1
    lagging = await scrape.until(lambda s: value(s, "noema_consumer_pending_messages", **attend) == arrived)
    assert value(lagging, "noema_consumer_backlog_messages", **attend) == arrived
    assert not value(lagging, "noema_messages_processed_total", worker="attend")

    async with AsyncExitStack() as second:
        stop = await running(build, harness.settings, second)
        done = await scrape.until(
            lambda s: (
                value(s, "noema_messages_processed_total", worker="attend") == arrived
                and value(s, "noema_consumer_backlog_messages", **attend) == 0
            )
        )
        await stop()
    assert value(done, "noema_consumer_pending_messages", **attend) == 0
    assert value(done, "noema_messages_dead_lettered_total", worker="attend", kind="invalid") == 1
    assert (value(done, "noema_batch_duration_seconds_count", worker="attend") or 0) >= 1

    # The projector applies attend's events: its position reaches the end of the event stream.
    last = await stream_last_seq(harness.js, harness.topology.event_stream)
    assert last > 0
    await harness.start(partial(build_projector, metrics=metrics))
    # The position is set once the batch is committed, the count once it is also acknowledged: a
    # scrape between the two (the ack's round trip) sees the one and not yet the other.
    projected = await scrape.until(
        lambda s: (
            value(s, "noema_projection_position", projection="read_model") == last
            and (value(s, "noema_messages_processed_total", worker="projector") or 0) >= last
        )
    )
    assert value(projected, "noema_build_info", version="0.1.0") == 1
    assert value(projected, "process_cpu_seconds_total") is not None


async def test_a_worker_process_serves_its_metrics_on_the_port_its_settings_give(harness: Harness) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA_")}
    env |= harness.settings.to_env() | {
        "NOEMA_METRICS_PORT": "0",  # any free port: the process logs which
        "NOEMA_HEARTBEAT_INTERVAL": "0.2",
        "NOEMA_LOG_FORMAT": "json",
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "noema_attend", env=env, stderr=asyncio.subprocess.PIPE
    )
    assert proc.stderr is not None
    try:

        async def serving_at() -> str:
            while True:
                line = await proc.stderr.readline()  # type: ignore[union-attr]
                assert line, "the worker exited before serving its metrics"
                entry = json.loads(line)
                if entry["event"] == "metrics serving":
                    return str(entry["url"])

        url = await asyncio.wait_for(serving_at(), 60)
        scrape = Scraper(url)
        # Its heartbeat, once the claim is its own and its consumer exists, exports the consumer's lag.
        attend = {"worker": "attend", "consumer": harness.topology.durable("attend")}
        found = await scrape.until(lambda s: value(s, "noema_consumer_backlog_messages", **attend) == 0)
        assert value(found, "noema_build_info", version="0.1.0") == 1
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0


@contextlib.contextmanager
def info_logs() -> Iterator[list[MutableMapping[str, Any]]]:
    """The log entries of the block at every level: an earlier test may have configured logging
    at a higher level (``capture_logs`` replaces the processors, not the level filter)."""
    before = structlog.get_config()
    structlog.reset_defaults()
    try:
        with structlog.testing.capture_logs() as logs:
            yield logs
    finally:
        structlog.configure(**before)


async def test_the_api_counts_requests_by_route_and_status_and_searches_by_mode(api: ApiHarness) -> None:
    await api.given(memory("the deploy runbook lives in the wiki"))
    with info_logs() as logs:
        assert (
            await api.admin.get("/v1/memories/search", params={"q": "runbook", "mode": "keyword"})
        ).is_success
        assert (
            await api.admin.get("/v1/memories/search", params={"q": "wiki", "mode": "keyword"})
        ).is_success
        assert (await api.anonymous.get("/v1/memories")).status_code == 401
        assert (await api.admin.get("/no/such/path/0123")).status_code == 404

    answer = await api.anonymous.get("/metrics")  # scraped without a token: counts, no content
    assert answer.status_code == 200
    found = samples(answer.text)
    search = {"method": "GET", "route": "/v1/memories/search"}
    assert value(found, "noema_http_requests_total", **search, status="200") == 2
    assert value(found, "noema_http_requests_total", method="GET", route="/v1/memories", status="401") == 1
    # A path no route matches is counted under one label, not under the path it named.
    assert value(found, "noema_http_requests_total", method="GET", route="unmatched", status="404") == 1
    assert value(found, "noema_http_request_duration_seconds_count", **search) == 2
    assert value(found, "noema_search_duration_seconds_count", mode="keyword") == 2
    assert value(found, "noema_search_duration_seconds_count", mode="hybrid") is None

    # One access-log line per request, with the route and status, and never the query string.
    requests = [e for e in logs if e["event"] == "request"]
    assert [(e["route"], e["status"]) for e in requests] == [
        ("/v1/memories/search", 200),
        ("/v1/memories/search", 200),
        ("/v1/memories", 401),
        ("unmatched", 404),
    ]
    assert all("runbook" not in str(e) for e in requests)


async def test_metrics_asked_for_as_openmetrics_are_answered_so(api: ApiHarness) -> None:
    answer = await api.anonymous.get(
        "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
    )
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/openmetrics-text")
    assert answer.text.rstrip().endswith("# EOF")
