"""Is the whole system working? The one set of checks behind ``noemactl status`` and ``/readyz``.

Per part: NATS answers and the streams exist; PostgreSQL answers; the projector is no further behind
the event stream than ``max_lag``; every expected process has a fresh heartbeat (:mod:`noema.runtime.health`:
it is running and connected); and every durable consumer makes progress — while messages wait, its
ack floor advances within ``stall_after_s``, and some live process of its worker is there to do it —
holds no more than ``max_lag`` messages, and, once a backlog has waited a whole rate window, would
work it off within ``max_drain_s`` at its current rate (:mod:`noema.runtime.backlog`). A worker with nothing
to do (decay between hourly ticks, embed with nothing to embed) is idle, not stalled. Beside the
checks, every expected worker gets a row of figures (:class:`~noema.runtime.backlog.WorkerLoad`: live
processes, backlog, rate, drain estimate, state), the per-worker table of ``status``. The verdicts
are pure functions of what was read (:func:`assess`), tested without servers.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.api import ClusterInfo
from nats.js.errors import NotFoundError

from noema.runtime.backlog import RATE_WINDOW_S, Sample, WorkerLoad, drain_estimate, format_drain, rate_since
from noema.runtime.health import (
    IO_TIMEOUT_S,
    HeartbeatRecord,
    WatchedConsumer,
    consumer_figures,
    read_heartbeats,
    watched_consumer,
)
from noema.runtime.settings import Settings
from noema.topology import Topology

__all__ = [
    "STARTING",
    "Check",
    "ConsumerState",
    "SystemStatus",
    "Thresholds",
    "assess",
    "assess_consumer",
    "assess_heartbeats",
    "assess_stream",
    "consumer_rate",
    "problems",
    "starting",
    "system_status",
    "unready",
]


@dataclass(frozen=True)
class Check:
    """One verdict: the part it is about, whether it is fine, and what was seen."""

    name: str
    ok: bool
    detail: str
    state: str = ""
    """For a consumer check, the word for it: idle, working, lagging, behind, stalled or missing;
    ``degraded`` for a problem that leaves every part working (a stream replica's server down);
    ``starting`` (:data:`STARTING`) while a worker's instances take their claim for the first time."""

    @property
    def line(self) -> str:
        """``<part>: <detail>``, the form status prints and ``/readyz`` lists."""
        return f"{self.name}: {self.detail}"


@dataclass(frozen=True)
class Thresholds:
    """When a part counts as down, stalled or lagging (from :class:`~noema.runtime.settings.Settings`)."""

    stale_s: float = 20.0
    stall_s: float = 60.0
    max_lag: int = 10_000
    max_drain_s: float = 600.0
    """A backlog whose drain estimate exceeds this is behind (0: never judged)."""

    @classmethod
    def of(cls, settings: Settings) -> Thresholds:
        """As configured: ``NOEMA_HEARTBEAT_STALE``, ``NOEMA_STALL_AFTER``, ``NOEMA_MAX_LAG``,
        ``NOEMA_MAX_DRAIN``."""
        return cls(settings.heartbeat_stale_s, settings.stall_after_s, settings.max_lag, settings.max_drain_s)


@dataclass(frozen=True)
class SystemStatus:
    """Every check, and the per-worker figures (backlog, rate, drain estimate) behind them."""

    checks: list[Check]
    workers: list[WorkerLoad]

    @property
    def healthy(self) -> bool:
        """Every check passed."""
        return all(c.ok for c in self.checks)


@dataclass(frozen=True)
class ConsumerState:
    """A durable consumer as the server reports it now."""

    durable: str
    pending: int
    """Messages not yet delivered."""
    ack_pending: int
    """Delivered, not yet acknowledged."""
    ack_floor: int
    """Consumer sequence below which everything is acknowledged."""
    delivered: int | None = None
    """Consumer sequence of the last delivery (None: not read)."""
    ack_wait: float | None = None
    """Seconds a delivery may go unacknowledged before it is delivered again (None: not read)."""

    @property
    def backlog(self) -> int:
        """The consumer's lag: waiting plus in flight."""
        return self.pending + self.ack_pending

    @property
    def settled(self) -> int | None:
        """Deliveries settled: delivered less in flight (None when ``delivered`` was not read)."""
        return None if self.delivered is None else max(0, self.delivered - self.ack_pending)


T = TypeVar("T")

DEGRADED = "degraded"
"""The state of a failed check that leaves the system working, with less to spare."""

STARTING = "starting"
"""The state of a check that does not pass yet because its instances have just started and are
taking their claim (:mod:`noema.runtime.claims`): not working yet, not failed either. ``status``
exits 3 when such checks are all that does not pass."""

START_SLACK_S = 5.0
"""How much earlier than the instance's recorded start its processes' own start may be (``up``
records it after spawning them)."""

REPLICA_SILENT_S = 10.0
"""A stream replica its leader has not heard from for this long is counted as down."""


def assess_stream(name: str, messages: int, cluster: ClusterInfo | None) -> Check:
    """Is stream ``name`` fully served? On a NATS cluster (``cluster``: the stream's placement as
    its leader reports it) it needs a leader — a majority of its servers answering — and every
    replica's server up: a replica whose server is offline or silent for :data:`REPLICA_SILENT_S`
    fails the check, naming the server, as :data:`DEGRADED` (the stream still works on the others,
    but one more loss stops it). A replica that is up and catching up (after its server came back)
    is fine, and said.
    """
    label = f"stream {name}"
    detail = f"{messages} messages"
    if cluster is None or not cluster.replicas:
        return Check(label, True, detail)  # one copy: nothing more to judge (or to be read)
    if not cluster.leader:
        return Check(label, False, f"{detail}; no leader: fewer than a majority of its servers answer")
    down: list[str] = []
    behind: list[str] = []
    for peer in cluster.replicas or []:
        silent_s = None if peer.active is None else peer.active / 1e9  # nanoseconds since last seen
        if peer.offline or (not peer.current and (silent_s is None or silent_s > REPLICA_SILENT_S)):
            down.append(peer.name or "?")
        elif not peer.current:
            behind.append(peer.name or "?")
    servers = 1 + len(cluster.replicas or [])
    if down:
        where = ", ".join(sorted(down))
        return Check(
            label,
            False,
            f"{detail}; replica on server {where} down ({servers - len(down)} of {servers} servers "
            f"serve it, leader {cluster.leader})",
            DEGRADED,
        )
    catching_up = f"; catching up on {', '.join(sorted(behind))}" if behind else ""
    return Check(label, True, f"{detail}; {servers} replicas, leader {cluster.leader}{catching_up}")


LABELS = {"service": "agent service"}
"""How a worker kind is named in a check (the rest by their own name)."""


def _ago(now: float, then: float) -> str:
    return f"{max(0.0, now - then):.0f} s ago"


def assess_heartbeats(
    worker: str,
    records: Sequence[HeartbeatRecord],
    limits: Thresholds,
    now: float,
    started_at: float | None = None,
) -> Check:
    """Is at least one process of ``worker`` running and connected (a fresh heartbeat)? For a worker
    run under a claim, does one of them own it (:func:`_assess_claim`)? ``started_at``: when the
    whole instance was started (``noemactl up``), if known; for ``stall_s`` after it, a worker with
    no live heartbeat yet is :data:`STARTING`, not down."""
    label = LABELS.get(worker, worker)
    mine = [r for r in records if r.worker == worker]
    live = [r for r in mine if not r.stopped and now - r.beat_at <= limits.stale_s]
    errors = sorted((r for r in mine if r.last_error and r.last_error_at), key=lambda r: r.last_error_at or 0)
    last_error = ""
    if errors:
        e = errors[-1]
        last_error = f"; last error {_ago(now, e.last_error_at or now)} (pid {e.pid}): {e.last_error}"
    if live:
        newest = max(live, key=lambda r: r.beat_at)
        silent = len(mine) - len(live)
        beat = _ago(now, newest.beat_at)
        claimed = [r for r in live if r.claim is not None]
        if claimed:
            return _assess_claim(label, claimed, silent, now, last_error, limits)
        detail = f"{len(live)} live (pid {newest.pid} on {newest.host}, heartbeat {beat})"
        if silent:
            detail += f"; {silent} earlier instance(s) silent, ignored"
        return Check(label, True, detail + last_error)
    # Starting: just after the instance's start, and not one heartbeat of this run yet (one that
    # stopped or went silent means the process started, then died).
    this_run = [r for r in mine if started_at is not None and r.started_at >= started_at - START_SLACK_S]
    if started_at is not None and 0 <= now - started_at <= limits.stall_s and not this_run:
        return Check(label, False, f"starting: no heartbeat yet (started {_ago(now, started_at)})", STARTING)
    if not mine:
        return Check(label, False, "no heartbeat: not running, or never connected to NATS")
    newest = max(mine, key=lambda r: r.beat_at)
    state = "crashed" if newest.stopped else "stopped, hung or disconnected from NATS"
    detail = (
        f"no heartbeat for {now - newest.beat_at:.0f} s (threshold {limits.stale_s:g} s): "
        f"pid {newest.pid} on {newest.host} {state}"
    )
    return Check(label, False, detail + last_error)


def _assess_claim(
    label: str,
    live: Sequence[HeartbeatRecord],
    silent: int,
    now: float,
    last_error: str,
    limits: Thresholds,
) -> Check:
    """The heartbeat check of a worker run under a claim (:mod:`noema.runtime.claims`): which live
    instance owns it, how many stand by; failing while none owns it (nothing works meanwhile) —
    :data:`STARTING` instead while every live instance started less than ``stall_s`` ago (they are
    taking the claim for the first time, as right after ``noemactl up``)."""
    owners = [r for r in live if (r.claim or "").partition(":")[0] == "owner"]
    standby = [r for r in live if r.claim == "standby"]
    waiting = f"{len(standby)} standing by" + (
        f" (pid {', '.join(str(r.pid) for r in standby)})" if standby else ""
    )
    tail = (f"; {silent} earlier instance(s) silent, ignored" if silent else "") + last_error
    if not owners:
        oldest = min(r.started_at for r in live)
        if now - oldest <= limits.stall_s:
            detail = f"starting: {len(live)} live (started {_ago(now, oldest)}), taking the claim: {waiting}"
            return Check(label, False, detail + tail, STARTING)
        return Check(label, False, f"{len(live)} live, none owns the claim yet: {waiting}" + tail)
    if any(":" in (r.claim or "") for r in owners):  # partitions (noema.runtime.partitions)
        shares = ", ".join(f"pid {r.pid} owns {(r.claim or '').partition(':')[2]}" for r in owners)
        return Check(label, True, f"{len(live)} live, partitions: {shares}; {waiting}" + tail)
    owner = max(owners, key=lambda r: r.beat_at)
    beat = _ago(now, owner.beat_at)
    detail = f"{len(live)} live: owner pid {owner.pid} on {owner.host} (heartbeat {beat}), {waiting}"
    if len(owners) > 1:  # a former owner's last beats, before it noticed the loss and exited
        detail += f"; {len(owners) - 1} other(s) still report ownership"
    return Check(label, True, detail + tail)


def _counts(consumer: ConsumerState) -> str:
    return f"{consumer.pending} waiting, {consumer.ack_pending} in flight"


def _pace(rate: float | None, backlog: int) -> str:
    if rate is None:
        return "rate not known yet"
    drain = drain_estimate(backlog, rate)
    return f"{rate:.1f}/s" + (f", drains in {format_drain(drain)}" if backlog and rate > 0 else "")


def _rate_samples(records: Sequence[HeartbeatRecord], settled: bool) -> list[Sample]:
    """The window start and last report of the newest heartbeat that carries a rate window: of the
    settled deliveries, or (``settled`` False, heartbeats of earlier versions) of the ack floor."""

    def window(r: HeartbeatRecord) -> int | None:
        return r.window_settled if settled else r.window_floor

    windowed = [r for r in records if r.window_at is not None and window(r) is not None]
    if not windowed:
        return []
    last = max(windowed, key=lambda r: r.beat_at)
    start = window(last)
    assert last.window_at is not None
    assert start is not None
    samples = [Sample(last.window_at, start)]
    reported = last.settled if settled else last.ack_floor
    if reported is not None:
        samples.append(Sample(last.beat_at, reported))
    return samples


def consumer_rate(records: Sequence[HeartbeatRecord], consumer: ConsumerState, now: float) -> float | None:
    """Deliveries ``consumer`` settled per second over about the last minute
    (:func:`noema.runtime.backlog.rate_since`, from its worker's heartbeats); measured on the ack
    floor when the heartbeats predate the settled count."""
    settled = consumer.settled
    if settled is not None:
        samples = _rate_samples(records, settled=True)
        if samples:
            return rate_since(samples, settled, now)
    return rate_since(_rate_samples(records, settled=False), consumer.ack_floor, now)


def _live(records: Sequence[HeartbeatRecord], limits: Thresholds, now: float) -> list[HeartbeatRecord]:
    return [r for r in records if not r.stopped and now - r.beat_at <= limits.stale_s]


def assess_consumer(
    worker: str,
    consumer: ConsumerState | None,
    records: Sequence[HeartbeatRecord],
    limits: Thresholds,
    now: float,
    durable: str,
) -> Check:
    """Does ``worker``'s durable consumer keep up? It fails when it is missing; when its backlog
    exceeds ``max_lag`` (lagging); when messages wait and nothing acknowledges them, because no
    process of ``worker`` is live or neither its ack floor nor its settled deliveries have moved for
    ``stall_s`` (stalled); or when a backlog older than the rate window would take more than
    ``max_drain_s`` at its rate (behind).

    A worker that acknowledges messages while the ack floor stays put — held back by messages in
    flight to a process that was killed, which come back only after the consumer's ack wait — is
    working, not stalled: progress is the settled deliveries moving, not just the floor."""
    name = f"{worker} consumer"
    if consumer is None:
        return Check(name, False, f"{durable} missing (the {worker} worker never started)", "missing")
    mine = [r for r in records if r.worker == worker]
    rate = consumer_rate(mine, consumer, now)
    counts, pace, backlog = _counts(consumer), _pace(rate, consumer.backlog), consumer.backlog
    if backlog == 0:
        return Check(name, True, f"{durable}: idle, nothing waiting ({pace})", "idle")
    if backlog > limits.max_lag:
        detail = f"{durable} lagging: {counts}, {pace} (threshold {limits.max_lag})"
        return Check(name, False, detail, "lagging")
    seen = [r for r in mine if r.progress_at is not None]
    last = max(seen, key=lambda r: r.beat_at) if seen else None
    moved = last is not None and (
        consumer.ack_floor != last.ack_floor
        or (consumer.settled is not None and last.settled is not None and consumer.settled != last.settled)
    )
    if not moved and not _live(mine, limits, now):
        detail = f"{durable} stalled: {counts}, 0/s: no live {worker} process works it off"
        return Check(name, False, detail, "stalled")
    if not moved and last is not None:
        assert last.progress_at is not None
        quiet = now - last.progress_at
        orphaned = _orphaned(consumer, mine, limits, now)
        if quiet > limits.stall_s and orphaned is not None:
            return Check(name, True, f"{durable}: {counts}, {orphaned}", "working")
        if quiet > limits.stall_s:
            detail = (
                f"{durable} stalled: {counts}, 0/s: nothing acknowledged for {quiet:.0f} s "
                f"(ack floor {consumer.ack_floor}; threshold {limits.stall_s:g} s)"
            )
            return Check(name, False, detail, "stalled")
    busy_since = last.busy_since if last is not None else None
    drain = drain_estimate(backlog, rate)
    if (
        limits.max_drain_s > 0
        and rate is not None
        and rate > 0
        and drain is not None
        and drain > limits.max_drain_s
        and busy_since is not None
        and now - busy_since >= RATE_WINDOW_S
    ):
        detail = f"{durable} behind: {counts}, {pace} (threshold {limits.max_drain_s:g} s)"
        return Check(name, False, detail, "behind")
    return Check(name, True, f"{durable}: {counts}, {pace}, progressing", "working")


def _orphaned(
    consumer: ConsumerState, records: Sequence[HeartbeatRecord], limits: Thresholds, now: float
) -> str | None:
    """Why nothing is acknowledged, when it is messages in flight to a process that is gone: nothing
    waits, the live processes hold none of what is in flight (their heartbeats say), and the gone
    one's ack wait, counted from its last heartbeat, has not ended yet — they are delivered again
    by then. None otherwise (a stall, or not known)."""
    live = _live(records, limits, now)
    gone = [r for r in records if r not in live]
    if consumer.pending or not consumer.ack_pending or not live or not gone or consumer.ack_wait is None:
        return None
    if any(r.held is None or r.held > 0 for r in live):
        return None
    last = max(gone, key=lambda r: r.beat_at)
    due = last.beat_at + limits.stale_s + consumer.ack_wait
    if now > due:
        return None
    return (
        f"held by pid {last.pid}, which stopped: delivered again within its ack wait "
        f"({consumer.ack_wait:g} s), in ~{max(0.0, due - now):.0f} s"
    )


def assess(
    worker: str,
    records: Sequence[HeartbeatRecord],
    consumer: ConsumerState | None,
    limits: Thresholds,
    now: float,
    topology: Topology,
    started_at: float | None = None,
) -> tuple[list[Check], WorkerLoad]:
    """The checks of ``worker`` — its heartbeat's and, when it reads a durable consumer, that
    consumer's — and its row of the per-worker table (``started_at``: see :func:`assess_heartbeats`)."""
    checks = [assess_heartbeats(worker, records, limits, now, started_at)]
    mine = [r for r in records if r.worker == worker]
    live = len(_live(mine, limits, now))
    watched = watched_consumer(worker, topology)
    if watched is None:
        state = "running" if checks[0].ok else STARTING if checks[0].state == STARTING else "down"
        return checks, WorkerLoad(worker=worker, live=live, state=state, ok=checks[0].ok)
    check = assess_consumer(worker, consumer, records, limits, now, watched.durable)
    if checks[0].state == STARTING and not check.ok:
        # The consumer is created by the worker as it starts (under a claim, by its owner only):
        # missing, or not read, until then.
        check = Check(check.name, False, f"starting: {check.detail}", STARTING)
    checks.append(check)
    rate = None if consumer is None else consumer_rate(mine, consumer, now)
    backlog = consumer.backlog if consumer is not None else None
    drain = None if backlog is None else drain_estimate(backlog, rate)
    load = WorkerLoad(
        worker=worker,
        live=live,
        consumer=watched.durable,
        backlog=backlog,
        rate=rate,
        drain_s=None if drain is None or math.isinf(drain) else drain,
        state=STARTING if checks[0].state == STARTING else "down" if live == 0 else check.state,
        ok=all(c.ok for c in checks),
    )
    return checks, load


_abandoned: set[asyncio.Task[object]] = set()


async def _within(work: Awaitable[T], timeout: float) -> T:
    """``work``'s result, or TimeoutError after ``timeout`` without waiting for it to cancel.

    ``asyncio.wait_for`` waits for the cancelled work to finish, and cancelling an asyncpg query
    on a server that does not answer hangs as long as the server does; a probe must answer anyway.
    """
    task: asyncio.Task[T] = asyncio.ensure_future(work)
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if task in done:
        return task.result()
    task.cancel()
    _abandoned.add(task)  # kept referenced until it ends; its outcome no longer matters
    task.add_done_callback(_forget)
    raise TimeoutError


async def _settled(work: Awaitable[T], timeout: float) -> T | Exception:
    """``work``'s result within ``timeout`` (see :func:`_within`), or the exception it failed with."""
    try:
        return await _within(work, timeout)
    except Exception as exc:  # told as that part's check (:func:`_failure`)
        return exc


def _failure(exc: BaseException, timeout: float) -> str:
    """What a NATS read that failed with ``exc`` says: any client error means the same to an
    operator (NATS, or that part of it, is not usable)."""
    if isinstance(exc, (TimeoutError, OSError)):
        return f"no answer within {timeout:g} s ({type(exc).__name__})"
    return f"{type(exc).__name__}: {exc}"


def _forget(task: asyncio.Task[object]) -> None:
    _abandoned.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not log it as never retrieved


async def _consumer(nc: NATS, watched: WatchedConsumer) -> ConsumerState | None:
    figures = await consumer_figures(nc.jetstream(), watched)
    if figures is None:
        return None
    return ConsumerState(
        watched.durable,
        figures.pending,
        figures.ack_pending,
        figures.ack_floor,
        figures.delivered,
        figures.ack_wait,
    )


def _missing_stream(stream: str, topology: Topology) -> Check:
    if stream == topology.vector_stream:  # memory only: a NATS restart empties it of its stream
        return Check(
            f"stream {stream}",
            False,
            "missing: the vector cache (memory only) went with a NATS restart; vectors are computed "
            "again until `noemactl up` recreates it (it does after a restart) or `noemactl prepare` does",
            DEGRADED,
        )
    return Check(f"stream {stream}", False, "missing (run `noemactl up` or `noemactl prepare`)")


async def _stream_check(js: JetStreamContext, stream: str, topology: Topology) -> tuple[Check, int | None]:
    """Stream ``stream``'s check and its last sequence. A stream that does not answer fails its own
    check only: on a cluster, one stream between leaders must not hide what the others say (e.g.
    which server is down)."""
    label = f"stream {stream}"
    try:
        info = await asyncio.wait_for(js.stream_info(stream), IO_TIMEOUT_S)
    except NotFoundError:
        return _missing_stream(stream, topology), None
    except TimeoutError:
        return Check(label, False, f"no answer within {IO_TIMEOUT_S:g} s (no leader?)"), None
    except Exception as exc:  # e.g. JetStream unavailable on the server asked: this stream unread
        return Check(label, False, f"{type(exc).__name__}: {exc}".rstrip(": ")), None
    return assess_stream(stream, int(info.state.messages), info.cluster), int(info.state.last_seq)


async def _stream_checks(nc: NATS, topology: Topology) -> tuple[list[Check], int | None]:
    """Every stream's check, read concurrently, and the event stream's last sequence (for the lag)."""
    js = nc.jetstream()
    streams = (
        topology.observation_stream,
        topology.event_stream,
        topology.dead_letter_stream,
        topology.health_stream,
        topology.vector_stream,
    )
    found = await asyncio.gather(*(_stream_check(js, s, topology) for s in streams))
    last_seq = dict(zip(streams, (seq for _, seq in found), strict=True))[topology.event_stream]
    return [check for check, _ in found], last_seq


async def _worker_checks(
    nc: NATS, settings: Settings, limits: Thresholds, now: float, started_at: float | None
) -> tuple[list[Check], list[WorkerLoad]]:
    """Heartbeats and consumers: each expected worker's checks and figures."""
    topology = settings.topology
    try:
        records = await read_heartbeats(nc, topology)
    except NotFoundError:
        records = []
    expected = settings.expected_workers
    watched = {w: watched_consumer(w, topology) for w in expected}
    states = await asyncio.gather(*(_consumer(nc, c) for c in watched.values() if c is not None))
    by_worker = dict(zip([w for w, c in watched.items() if c is not None], states, strict=True))
    checks: list[Check] = []
    loads: list[WorkerLoad] = []
    for worker in expected:
        found, load = assess(worker, records, by_worker.get(worker), limits, now, topology, started_at)
        checks += found
        loads.append(load)
    return checks, loads


async def system_status(
    settings: Settings,
    nc: NATS | None,
    position: Callable[[], Awaitable[int]],
    *,
    nats_error: str | None = None,
    clock: Callable[[], float] = time.time,
    timeout: float = 5.0,
    started_at: float | None = None,
) -> SystemStatus:
    """Every check of the running system, NATS and PostgreSQL probed concurrently, with the
    per-worker figures (none when NATS cannot be read).

    ``nc`` is the caller's connection (None with ``nats_error`` when it could not connect);
    ``position`` reads the projector's committed position from PostgreSQL; ``started_at``: when
    the instance was started (``noemactl up``'s state says), so that processes without a heartbeat
    yet read as starting for ``NOEMA_STALL_AFTER`` seconds after it (None: not known).
    """
    limits = Thresholds.of(settings)
    now = clock()
    checks: list[Check] = []
    loads: list[WorkerLoad] = []
    last_seq: int | None = None

    async def nats_part() -> list[Check]:
        nonlocal last_seq, loads
        if nc is None or not nc.is_connected:
            return [Check("nats", False, nats_error or "not connected")]
        # The streams and the workers are read side by side, and a part that does not answer fails
        # on its own: what the other says (a stream naming a server that is down) is still told.
        streams, workers = await asyncio.gather(
            _settled(_stream_checks(nc, settings.topology), timeout),
            _settled(_worker_checks(nc, settings, limits, now, started_at), timeout),
        )
        if isinstance(streams, BaseException) and isinstance(workers, BaseException):
            return [Check("nats", False, _failure(streams, timeout))]
        found: list[Check] = [Check("nats", True, "connected")]
        if isinstance(streams, BaseException):
            found.append(Check("streams", False, _failure(streams, timeout)))
        else:
            checks, last_seq = streams
            found += checks
        if isinstance(workers, BaseException):
            found.append(Check("heartbeats and consumers", False, _failure(workers, timeout)))
        else:
            checks, loads = workers
            found += checks
        return found

    async def pg_part() -> tuple[Check, int | None]:
        try:
            at = await _within(position(), timeout)
        except TimeoutError:
            return Check("postgres", False, f"no answer within {timeout:g} s"), None
        except Exception as exc:  # refused, auth, missing schema: all mean the read model is unusable
            return Check("postgres", False, f"{type(exc).__name__}: {exc}"), None
        return Check("postgres", True, f"schema {settings.db_schema}"), at

    found, (pg, at), embedder = await asyncio.gather(
        nats_part(), pg_part(), _embedder_check(settings, timeout)
    )
    checks += [found[0], pg, *found[1:]]
    if embedder is not None:
        checks.append(embedder)
        if not embedder.ok:
            checks = [_caused_by_embedder(c, embedder) for c in checks]
    if last_seq is not None and at is not None:
        lag = max(0, last_seq - at)
        checks.append(
            Check(
                "projector lag",
                lag <= limits.max_lag,
                f"{lag} events behind (at seq {at} of {last_seq}; threshold {limits.max_lag})",
            )
        )
    return SystemStatus(checks, loads)


def starting(checks: Sequence[Check]) -> bool:
    """Some check does not pass because its part is starting, and none fails for another reason:
    ``status`` exits 3 (see :data:`STARTING`)."""
    failed = [c for c in checks if not c.ok]
    return bool(failed) and all(c.state == STARTING for c in failed)


async def _embedder_check(settings: Settings, timeout: float) -> Check | None:
    """Does the remote embedding server answer (None: the embedder runs in each process)? While it
    does not, the system works with less: memories wait for their vectors and searches answer
    without the vector voice — :data:`DEGRADED`, until the embed consumer stalls (NOEMA_STALL_AFTER)."""
    remote = settings.remote_embedder
    if remote is None:
        return None
    from noema.adapters.openai_embedder import OpenAIEmbedder

    try:
        embedder = OpenAIEmbedder(remote)
    except Exception as exc:  # unusable settings: told as the finding
        return Check("embedder", False, f"{type(exc).__name__}: {exc}")
    reason = await _settled(asyncio.to_thread(embedder.ping, min(timeout, 3.0)), timeout)
    if reason is None:
        return Check("embedder", True, f"{embedder.base} answers (model {embedder.name})")
    if isinstance(reason, BaseException):
        reason = _failure(reason, timeout)
    return Check(
        "embedder",
        False,
        f"{embedder.base} does not answer ({reason}): new memories wait for their vectors (the embed "
        "backlog grows) and searches answer without the vector voice; start the embedding server, or "
        "fix NOEMA_EMBEDDER",
        DEGRADED,
    )


def _caused_by_embedder(check: Check, embedder: Check) -> Check:
    """A failed embed or retrieve consumer check, naming the embedding server that does not answer."""
    if check.ok or check.name not in ("embed consumer", "retrieve consumer"):
        return check
    where = embedder.detail.split(" does not answer", 1)[0]
    return Check(
        check.name, False, f"{check.detail}; cause: the embedder {where} does not answer", check.state
    )


def problems(checks: Sequence[Check]) -> list[str]:
    """The lines of the failed checks."""
    return [c.line for c in checks if not c.ok]


def unready(checks: Sequence[Check]) -> list[str]:
    """The lines of the failed checks that make the system unready: all but the :data:`DEGRADED`
    ones. A readiness probe that failed while a NATS server of a cluster restarts (a rolling
    upgrade) would take every API pod out of its Service although each one works."""
    return [c.line for c in checks if not c.ok and c.state != DEGRADED]
