"""Prometheus metrics of one Noema process (docs/operations.md lists them).

Each process owns one :class:`Metrics` — its own registry, made by its composition root and handed
to what it instruments — rather than prometheus_client's module-level default registry: several
workers run in one test process, and each must count only its own work.

The operator API serves them at ``/metrics`` on its own port; every other process serves them on
its metrics port when ``NOEMA_METRICS_PORT`` is set (:meth:`Metrics.serving`). Consumer lag is
read from JetStream by the process's heartbeat (:mod:`noema.runtime.health`), so it is as fresh as
the last beat (``NOEMA_HEARTBEAT_INTERVAL``, 5 s by default), not read again per scrape.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import structlog
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.exposition import ThreadingWSGIServer, choose_encoder, make_wsgi_app

from noema import __version__
from noema.domain.admission import Admission, AdmissionLimits, Refusal

__all__ = ["LATENCY_BUCKETS", "Metrics"]

# A probe answers None when its check holds, else why not (noema.runtime.probes builds them; the
# adapters sit below the runtime, so the shape is restated here).
Probe = Callable[[], str | None]

log = structlog.get_logger("noema.metrics")

_PROBE_STATES = {"/livez": ("alive", "dead"), "/readyz": ("ready", "unready")}

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class _QuietHandler(WSGIRequestHandler):
    """No access line on stderr per scrape or probe."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _with_probes(metrics_app: WsgiApp, probes: Mapping[str, Probe]) -> WsgiApp:
    """``metrics_app``, with each probe answering at its path (JSON, 200 or 503)."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        probe = probes.get(environ.get("PATH_INFO", ""))
        if probe is None:
            return metrics_app(environ, start_response)
        good, bad = _PROBE_STATES.get(environ["PATH_INFO"], ("ok", "failing"))
        problem = probe()
        body = {"status": good} if problem is None else {"status": bad, "reason": problem}
        status = "200 OK" if problem is None else "503 Service Unavailable"
        data = json.dumps(body).encode()
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
        return [data]

    return app


LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Seconds: a keyword search takes milliseconds, a cold hybrid one on a busy machine seconds."""


class Metrics:
    """The metrics one process exports, in a registry of its own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        reg = self.registry
        ProcessCollector(registry=reg)
        PlatformCollector(registry=reg)
        Gauge("noema_build_info", "Noema's version", ["version"], registry=reg).labels(__version__).set(1)
        self.processed = self._counter(
            "noema_messages_processed",
            "Messages a worker handled and acknowledged (including those it dead-lettered)",
            ["worker"],
        )
        self.dead_lettered = self._counter(
            "noema_messages_dead_lettered",
            "Messages written to the dead-letter stream, by the worker that rejected them and the "
            "kind (invalid: can never be processed; failed: handling kept failing)",
            ["worker", "kind"],
        )
        self.failures = self._counter(
            "noema_message_failures",
            "Failed attempts at handling a batch or a message (each is retried), transient or not",
            ["worker", "transient"],
        )
        self.batch_seconds = self._histogram(
            "noema_batch_duration_seconds",
            "Time a worker took to handle one batch, retries included",
            ["worker"],
        )
        consumer = ["worker", "consumer"]
        self.consumer_pending = self._gauge(
            "noema_consumer_pending_messages",
            "Messages on the stream the worker's durable consumer has not delivered yet (its lag), "
            "as of the last heartbeat",
            consumer,
        )
        self.consumer_ack_pending = self._gauge(
            "noema_consumer_ack_pending_messages",
            "Messages delivered to the worker's consumer and not acknowledged yet, as of the last heartbeat",
            consumer,
        )
        self.consumer_backlog = self._gauge(
            "noema_consumer_backlog_messages",
            "Pending plus unacknowledged messages: the backlog `noemactl status` and /readyz report",
            consumer,
        )
        self.consumer_ack_floor = self._gauge(
            "noema_consumer_ack_floor",
            "The consumer sequence up to which every message was acknowledged, as of the last heartbeat",
            consumer,
        )
        self.projection_position = self._gauge(
            "noema_projection_position",
            "The event-stream sequence the read model has applied, committed with its rows",
            ["projection"],
        )
        self.search_seconds = self._histogram(
            "noema_search_duration_seconds",
            "Time a memory search took, by mode (failed searches included)",
            ["mode"],
        )
        self.http_requests = self._counter(
            "noema_http_requests",
            "HTTP requests answered, by method, route template and status",
            ["method", "route", "status"],
        )
        self.http_seconds = self._histogram(
            "noema_http_request_duration_seconds",
            "Time to answer an HTTP request, by method and route template",
            ["method", "route"],
        )
        self.embedded = self._counter(
            "noema_memories_embedded",
            "Memories given a vector by the embed worker, by model and whether the vector was "
            "computed here or taken from the vector cache",
            ["model", "source"],
        )
        self.agent_requests = self._counter(
            "noema_agent_requests",
            "Requests answered by the NATS agent service, by operation and reply code (200, or the error's)",
            ["operation", "code"],
        )
        self.requests_refused = self._counter(
            "noema_requests_refused",
            "Requests refused by admission control (docs/operations.md), by surface (api, mcp, "
            "service) and limit (rate, concurrency)",
            ["surface", "limit"],
        )

    def admission(self, limits: AdmissionLimits, surface: str) -> Admission:
        """The per-caller limits of ``surface`` (api, mcp or service), its refusals counted in
        :attr:`requests_refused`."""
        refused = self.requests_refused

        def count(refusal: Refusal) -> None:
            refused.labels(surface, refusal.reason).inc()

        return Admission(limits, on_refusal=count)

    def _counter(self, name: str, doc: str, labels: list[str]) -> Counter:
        return Counter(name, doc, labels, registry=self.registry)

    def _gauge(self, name: str, doc: str, labels: list[str]) -> Gauge:
        return Gauge(name, doc, labels, registry=self.registry)

    def _histogram(self, name: str, doc: str, labels: list[str]) -> Histogram:
        return Histogram(name, doc, labels, buckets=LATENCY_BUCKETS, registry=self.registry)

    @contextmanager
    def timed_search(self, mode: str) -> Iterator[None]:
        """Time the block as one search in ``mode``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.search_seconds.labels(mode).observe(time.perf_counter() - start)

    def exposition(self, accept: str | None = None) -> tuple[bytes, str]:
        """The current values in the format ``accept`` asks for (Prometheus text, or OpenMetrics),
        and its content type."""
        encode, content_type = choose_encoder(accept or "")
        return encode(self.registry), content_type

    @asynccontextmanager
    async def serving(
        self, host: str, port: int, process: str, probes: Mapping[str, Probe] | None = None
    ) -> AsyncIterator[int]:
        """Serve ``/metrics`` on ``host:port`` (0: any free port) while the block runs; yields the
        port (``process`` names it in the log). ``probes`` answer beside it by path (``/livez``,
        ``/readyz``: 200 when the probe finds nothing wrong, else 503 with its reason; see
        :mod:`noema.runtime.probes`). The server runs in a thread of its own, so a scrape or a probe
        never waits for the event loop."""
        app = _with_probes(make_wsgi_app(self.registry), probes or {})
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        server_class = type("MetricsServer", (ThreadingWSGIServer,), {"address_family": family})
        server: WSGIServer = make_server(host, port, app, server_class, handler_class=_QuietHandler)
        thread = threading.Thread(target=server.serve_forever, name=f"metrics-{process}", daemon=True)
        thread.start()
        bound = int(server.server_port)
        log.info(
            "metrics serving",
            url=f"http://{host}:{bound}/metrics",
            process=process,
            probes=sorted(probes or {}),
        )
        try:
            yield bound
        finally:
            await asyncio.to_thread(server.shutdown)
            server.server_close()
            thread.join(timeout=5.0)
