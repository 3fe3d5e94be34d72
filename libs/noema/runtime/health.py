"""Heartbeats: every Noema process records, in the NATS key-value bucket ``<PREFIX>_HEALTH``, that it
is connected, how its durable consumer progresses and its last error.

A heartbeat is written through the process's *own* NATS connection, so a process that is alive but
disconnected (or stopped, or hung) cannot write it: its heartbeat goes stale, which is what
``noemactl status`` and ``/readyz`` (:mod:`noema.runtime.readiness`) read as "down". The bucket lives in
JetStream, so this works the same on one host and across a Kubernetes cluster.

Keys are ``<worker>.<host>-<pid>`` (one per process). A process that stops cleanly purges its key;
one that crashes writes a last record with ``stopped`` and the error; a key nobody rewrites is
forgotten after the bucket's TTL (an hour).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import msgspec
import structlog
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from noema.adapters.metrics import Metrics
from noema.adapters.pull import Puller
from noema.runtime.backlog import Progress
from noema.runtime.tasks import cancel_and_wait
from noema.topology import Topology
from noema_events.bounded import Undecodable, decode_json

__all__ = [
    "ConsumerFigures",
    "ErrorTap",
    "Heartbeat",
    "HeartbeatRecord",
    "WatchedConsumer",
    "connection_of",
    "consumer_figures",
    "instance_name",
    "read_heartbeats",
    "watched_consumer",
]

log = structlog.get_logger("noema.health")

IO_TIMEOUT_S = 2.0
"""Longest a heartbeat write or read waits for NATS (a server that does not answer is down)."""
ERROR_CHARS = 500


class HeartbeatRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One process's latest heartbeat (JSON in the bucket; times are UNIX seconds, UTC)."""

    worker: str
    """Kind of process: attend, projector, embed, retrieve, decay, conflicts, api or service."""
    instance: str
    host: str
    pid: int
    started_at: float
    beat_at: float
    """When this record was written (the writer's clock)."""
    consumer: str | None = None
    """Durable consumer the worker reads (None for decay, api and service)."""
    delivered: int | None = None
    """The consumer's last delivered consumer sequence, as last seen by the worker."""
    ack_floor: int | None = None
    """The consumer's ack floor (consumer sequence), as last seen by the worker."""
    backlog: int | None = None
    """Messages waiting plus delivered but unacknowledged, as last seen."""
    settled: int | None = None
    """The consumer's settled deliveries (delivered less in flight), as last seen by the worker:
    it moves whenever a delivery is acknowledged, also while messages in flight to a process that
    was killed hold the ack floor back until their ack wait ends (:mod:`noema.runtime.backlog`)."""
    progress_at: float | None = None
    """Last time the ack floor or the settled deliveries moved, or nothing was waiting: the consumer
    was keeping up."""
    window_at: float | None = None
    window_settled: int | None = None
    """The settled deliveries at the start of the rate window (:class:`noema.runtime.backlog.RateWindow`)
    and when."""
    window_floor: int | None = None
    """Heartbeats of earlier versions: the ack floor at the start of the rate window (read, no longer
    written)."""
    busy_since: float | None = None
    """Since when the consumer has had a backlog, without a moment with none (None: empty now)."""
    last_error: str | None = None
    last_error_at: float | None = None
    stopped: bool = False
    """The last record of a process that crashed (``last_error`` says why)."""
    held: int | None = None
    """Messages of its consumer the process holds (delivered to it, not finished); None: unknown."""
    claim: str | None = None
    """For a worker that runs under a claim (:mod:`noema.runtime.claims`): ``owner`` (this instance
    works), ``standby`` (another one does; this one takes over when it goes) or ``lost``; for a
    partitioned worker (:mod:`noema.runtime.partitions`) ``owner:<partitions>``, e.g. ``owner:0,2``."""


@dataclass(frozen=True)
class WatchedConsumer:
    """The durable consumer a worker reads: one, or one per partition (attend and conflicts with
    ``NOEMA_PARTITIONS`` > 1), whose figures are then added up."""

    stream: str
    durable: str
    """Its name, or for partitions the names' common form (``noema_attend_4_*``)."""
    durables: tuple[str, ...] = ()
    """The consumers read (just ``durable`` when empty)."""


@dataclass(frozen=True)
class ConsumerFigures:
    """A watched consumer's figures now (added up over its partitions' consumers)."""

    delivered: int
    """Consumer sequence of the last delivery."""
    ack_floor: int
    """Consumer sequence below which everything is acknowledged."""
    pending: int
    """Messages not yet delivered."""
    ack_pending: int
    """Delivered, not yet acknowledged."""
    ack_wait: float | None = None
    """Seconds a delivered message may go unacknowledged before it is delivered again."""

    @property
    def settled(self) -> int:
        """Deliveries acknowledged (or given up and redelivered): delivered less those in flight."""
        return max(0, self.delivered - self.ack_pending)


async def consumer_figures(js: JetStreamContext, watched: WatchedConsumer) -> ConsumerFigures | None:
    """Read the consumer (each partition's), None when one of them does not exist (yet): a
    partition nobody owns yet is as missing as an unpartitioned consumer nobody created."""
    total = ConsumerFigures(0, 0, 0, 0)
    for durable in watched.durables or (watched.durable,):
        try:
            info = await js.consumer_info(watched.stream, durable, timeout=IO_TIMEOUT_S)
        except NotFoundError:
            return None
        ack_wait = info.config.ack_wait if info.config else None
        total = ConsumerFigures(
            total.delivered + int(info.delivered.consumer_seq if info.delivered else 0),
            total.ack_floor + int(info.ack_floor.consumer_seq if info.ack_floor else 0),
            total.pending + int(info.num_pending or 0),
            total.ack_pending + int(info.num_ack_pending or 0),
            max(total.ack_wait or 0.0, float(ack_wait)) if ack_wait else total.ack_wait,
        )
    return total


def watched_consumer(worker: str, topology: Topology) -> WatchedConsumer | None:
    """The consumer of each worker kind (see each service's ``service.py``); None when it has none."""
    streams = {
        "attend": topology.observation_stream,
        "retrieve": topology.observation_stream,
        "projector": topology.event_stream,
        "embed": topology.event_stream,
        "conflicts": topology.event_stream,
    }
    stream = streams.get(worker)
    if stream is None:
        return None
    if worker in ("attend", "conflicts") and topology.partitioned:
        durables = tuple(topology.partitioned_durable(worker, p) for p in range(topology.partitions))
        return WatchedConsumer(stream, topology.partitioned_durable(worker, 0)[:-1] + "*", durables)
    return WatchedConsumer(stream, topology.durable(worker))


def instance_name(host: str, pid: int) -> str:
    """``<host>-<pid>`` made a valid key token (a pod name on Kubernetes, so unique per pod)."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", host)[:100] + f"-{pid}"


class ErrorTap:
    """A structlog processor remembering the process's last error-level log line (``last_error``)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self.last: tuple[str, float] | None = None

    def record(self, message: str) -> None:
        """Remember ``message`` as the last error, now."""
        self.last = (message[:ERROR_CHARS], self._clock())

    def __call__(self, logger: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        """Pass ``event`` on unchanged, noting it when it is an error."""
        if method in ("error", "exception", "critical"):
            detail = event.get("reason") or event.get("error") or event.get("exc_info")
            text = str(event.get("event", ""))
            self.record(f"{text}: {detail}" if detail and detail is not True else text)
        return event


def connection_of(service: object) -> NATS | None:
    """The NATS connection a built service works with: its ``nc`` attribute, else the first one held
    by its parts (a worker's puller, publisher or application layer), at most three levels down.

    Looking it up keeps the composition roots unchanged; the heartbeat must use *this* connection
    (not one of its own) so that it goes stale exactly when the worker is cut off.
    """
    seen: set[int] = set()
    level: list[object] = [service]
    for _ in range(4):
        nxt: list[object] = []
        for obj in level:
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if isinstance(obj, NATS):
                return obj
            with contextlib.suppress(TypeError):
                nxt.extend(vars(obj).values())
        level = nxt
    return None


class Heartbeat:
    """Writes this process's :class:`HeartbeatRecord` every ``interval_s`` while used as an async
    context manager; a failed write is logged and retried at the next beat, never raised. What it
    reads of its worker's consumer (lag, unacknowledged, ack floor) is also set in ``metrics``."""

    def __init__(
        self,
        nc: NATS,
        topology: Topology,
        worker: str,
        *,
        interval_s: float,
        errors: ErrorTap | None = None,
        clock: Callable[[], float] = time.time,
        host: str | None = None,
        pid: int | None = None,
        claim: Callable[[], str] | None = None,
        metrics: Metrics | None = None,
        held: Callable[[], int] | None = None,
    ) -> None:
        self._nc = nc
        self._held = held
        self._metrics = metrics
        self._claim = claim
        self._topology = topology
        self._consumer = watched_consumer(worker, topology)
        self._interval = interval_s
        self._clock = clock
        self.errors = errors or ErrorTap(clock)
        self.worker = worker
        self._host = host or socket.gethostname()
        self._pid = os.getpid() if pid is None else pid
        self.instance = instance_name(self._host, self._pid)
        self._subject = topology.heartbeat_subject(worker, self.instance)
        self._started = clock()
        self._progress = Progress(self._started)
        self._consumer_seen: tuple[int, int, int, int] | None = None
        self._task: asyncio.Task[None] | None = None
        self.recorded_at: float | None = None
        """``time.monotonic()`` of the last beat written (None before the first): the worker's
        readiness probe (:mod:`noema.runtime.probes`)."""

    async def _observe_consumer(self, now: float) -> None:
        if self._consumer is None:
            return
        figures = await consumer_figures(self._nc.jetstream(), self._consumer)
        if figures is None:
            self._consumer_seen = None
            return
        floor, delivered, settled = figures.ack_floor, figures.delivered, figures.settled
        backlog = figures.pending + figures.ack_pending
        self._progress.see(now, floor, settled, backlog)
        self._consumer_seen = (delivered, floor, backlog, settled)
        if self._metrics is not None:
            labels = (self.worker, self._consumer.durable)
            self._metrics.consumer_pending.labels(*labels).set(figures.pending)
            self._metrics.consumer_ack_pending.labels(*labels).set(figures.ack_pending)
            self._metrics.consumer_backlog.labels(*labels).set(backlog)
            self._metrics.consumer_ack_floor.labels(*labels).set(floor)

    def record(self, now: float, stopped: bool = False) -> HeartbeatRecord:
        """The record a beat at ``now`` writes."""
        seen = self._consumer_seen
        error = self.errors.last
        window = self._progress.window
        start = window.start if seen else None
        return HeartbeatRecord(
            worker=self.worker,
            instance=self.instance,
            host=self._host,
            pid=self._pid,
            started_at=self._started,
            beat_at=now,
            consumer=self._consumer.durable if self._consumer else None,
            delivered=seen[0] if seen else None,
            ack_floor=seen[1] if seen else None,
            backlog=seen[2] if seen else None,
            settled=seen[3] if seen else None,
            progress_at=self._progress.progress_at if seen else None,
            window_at=start.at if start else None,
            window_settled=start.count if start else None,
            busy_since=window.busy_since if seen else None,
            last_error=error[0] if error else None,
            last_error_at=error[1] if error else None,
            stopped=stopped,
            claim=self._claim() if self._claim is not None else None,
            held=self._held() if self._held is not None else None,
        )

    async def beat(self, stopped: bool = False) -> bool:
        """Write one heartbeat now; False (nothing written) while the connection is down."""
        if not self._nc.is_connected:
            return False
        now = self._clock()
        if not stopped:
            await self._observe_consumer(now)
        data = msgspec.json.encode(self.record(now, stopped))
        await self._nc.jetstream().publish(self._subject, data, timeout=IO_TIMEOUT_S)
        self.recorded_at = time.monotonic()
        return True

    async def _loop(self) -> None:
        failing = False
        while True:
            try:
                await self.beat()
            except Exception as exc:  # a missed beat is what status reports; it must not kill the worker
                if not failing:  # once per outage, not every interval
                    reason = f"{type(exc).__name__}: {exc}"
                    log.warning("heartbeat not recorded", worker=self.worker, reason=reason)
                failing = True
            else:
                failing = False
            await asyncio.sleep(self._interval)

    async def __aenter__(self) -> Heartbeat:
        self._task = asyncio.create_task(self._loop(), name=f"heartbeat-{self.worker}")
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
        with contextlib.suppress(Exception):  # best effort: the process is going away either way
            if exc is None or isinstance(exc, asyncio.CancelledError | KeyboardInterrupt):
                await self._forget()
            else:
                self.errors.record(f"crashed: {type(exc).__name__}: {exc}")
                await self.beat(stopped=True)

    async def _forget(self) -> None:
        # A clean stop removes the key (a purge keeps no older revision), so it is not read as a
        # process that died.
        if self._nc.is_connected:
            headers = {"KV-Operation": "PURGE", "Nats-Rollup": "sub"}
            await self._nc.jetstream().publish(self._subject, b"", headers=headers, timeout=IO_TIMEOUT_S)


async def read_heartbeats(
    nc: NATS, topology: Topology, timeout: float = IO_TIMEOUT_S
) -> list[HeartbeatRecord]:
    """Every process's latest heartbeat (purged keys and unreadable records left out).

    Reads the bucket's stream with an ephemeral, unacknowledged consumer (last message per key), so
    a reader needs no write permission. Raises ``NotFoundError`` when the bucket does not exist.
    """
    js = nc.jetstream()
    stream = topology.health_stream
    info = await js.add_consumer(
        stream,
        ConsumerConfig(
            deliver_policy=DeliverPolicy.LAST_PER_SUBJECT,
            ack_policy=AckPolicy.NONE,
            filter_subject=f"$KV.{topology.health_bucket}.>",
            inactive_threshold=30.0,
            mem_storage=True,
            num_replicas=1,
        ),
        timeout=timeout,
    )
    assert info.name is not None
    records: list[HeartbeatRecord] = []
    want = int(info.num_pending or 0)
    puller = await Puller(nc, stream, info.name, max(1, want)).start()
    try:
        got = 0
        while got < want:
            msgs = await puller.fetch(timeout=timeout)
            if not msgs:
                raise TimeoutError(f"the heartbeats of {stream} were not delivered in {timeout:g} s")
            got += len(msgs)
            for msg in msgs:
                headers = msg.headers or {}
                if not msg.data or "KV-Operation" in headers or "Nats-Marker-Reason" in headers:
                    continue
                with contextlib.suppress(Undecodable):  # any bytes on the bucket: not a heartbeat
                    records.append(decode_json(msg.data, HeartbeatRecord, what="a heartbeat"))
    finally:
        await puller.stop()
        with contextlib.suppress(Exception):
            await js.delete_consumer(stream, info.name)
    return records
