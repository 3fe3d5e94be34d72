"""Worker lifecycle shared by every service: pull in bounded batches, survive any message, stop
gracefully on SIGTERM.

Every consumer handles failures the same way (:class:`PullWorker`):

- **Transient** failures (:data:`noema.adapters.errors.TRANSIENT`: a server gone or restarting, a
  lost race), and a pooled database connection left in a state the driver refuses
  (:func:`noema.adapters.errors.broken_connection`), are retried with capped exponential backoff
  for as long as they last; the messages are kept in progress meanwhile, so JetStream does not
  hand them out again.
- **Any other exception** is held against the batch, not the worker: the batch is split and each
  message handled alone, so the good ones go through. A message that keeps failing on its own is
  retried :data:`MAX_ATTEMPTS` times, then dead-lettered as ``failed`` (most likely a bug: fix it, then
  ``noemactl dlq retry``) and skipped.
- A message JetStream has delivered more than :data:`MAX_DELIVER` times (each time the worker
  crashed or timed out on it) is dead-lettered as ``failed`` before it is handed to the handler.
- Messages that can never be processed (undecodable, wrong subject) are the handler's own to
  reject as ``invalid``, or to skip when another worker, the stream's owner, rejects them
  (:func:`decode_each` sets them apart).

Only :class:`WorkerFatal` (and cancellation) stops the loop: the process then exits and is restarted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Iterable
from contextlib import AsyncExitStack, suppress
from typing import Any, Generic, NamedTuple, NoReturn, Protocol, TypeVar, overload

import structlog
from nats.aio.msg import Msg

from noema.adapters import tracing
from noema.adapters.errors import TRANSIENT, broken_connection
from noema.adapters.jetstream import FAILED
from noema.adapters.liveness import watch_connections
from noema.adapters.metrics import Metrics
from noema.adapters.pull import Puller, interrupt_all
from noema.errors import Kind, NoemaError, WorkerFatal
from noema.runtime.health import ErrorTap, Heartbeat, connection_of
from noema.runtime.locate import locate
from noema.runtime.logging import configure_logging
from noema.runtime.probes import PATHS as PROBE_PATHS
from noema.runtime.probes import LoopWatch, Probe, Readiness
from noema.runtime.settings import Located, Settings
from noema.runtime.tasks import cancel_and_wait
from noema_events import Event, EventDecodeError, decode_event

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_DELIVER",
    "BatchHandler",
    "Build",
    "ConsumerGap",
    "Decoded",
    "PullWorker",
    "Service",
    "WorkerFatal",
    "backoff",
    "decode_each",
    "run_service",
    "run_until_signalled",
    "serve",
    "until_connection_lost",
]

MAX_ATTEMPTS = 5
"""Times one message is handled alone, failing, before it is dead-lettered as ``failed``."""
MAX_DELIVER = 5
"""JetStream deliveries after which a message that was never acked is dead-lettered unhandled."""
BACKOFF_CAP_S = 5.0
"""The longest wait between two retries: a retry is cheap, and a worker that waited 30 s would leave
work undone for that long after its server is back (measured: 33 s from a PostgreSQL restart to the
first new memory with a 30 s cap)."""
KEEPALIVE_S = 10.0
"""While a batch is being handled, its messages are marked in progress this often, so that a batch
slower than the consumer's ack wait (30 s at least) under load is not redelivered meanwhile."""


def backoff(attempt: int, base: float = 0.25, cap: float = BACKOFF_CAP_S) -> float:
    """Seconds to wait before retry number ``attempt`` (1, 2, ...): doubling from ``base`` to ``cap``."""
    return float(min(cap, base * 2 ** max(0, attempt - 1)))


class ConsumerGap(WorkerFatal):
    """The consumer delivered to this worker with a gap in its consumer sequence: someone else (a
    partition's former owner, still connected) took the messages in between. They would come back
    only after their ack wait, behind later ones: the consumer must be re-created at its ack floor."""


class BatchHandler(Protocol):
    """Handles a batch of messages (acks what it handled) and can reject one message for good."""

    async def __call__(self, msgs: list[Msg]) -> None:
        """Handle ``msgs`` in order and ack them; raise to have them retried."""
        ...

    async def reject(self, msg: Msg, reason: str, kind: str) -> None:
        """Dead-letter ``msg`` with ``reason`` and ack it, so it is never handed out again."""
        ...


T = TypeVar("T")


class Decoded(NamedTuple, Generic[T]):
    """A batch as :func:`decode_each` splits it, each part in stream order."""

    events: list[tuple[Msg, T]]
    """Each message that decoded, with what it carries."""
    undecodable: list[tuple[Msg, EventDecodeError]]
    """Each message that did not, with the reason."""


def _event(msg: Msg) -> Event:
    return decode_event(msg.data)


@overload
def decode_each(msgs: Iterable[Msg]) -> Decoded[Event]: ...


@overload
def decode_each(msgs: Iterable[Msg], decode: Callable[[Msg], T]) -> Decoded[T]: ...


def decode_each(msgs: Iterable[Msg], decode: Callable[[Msg], Any] = _event) -> Decoded[Any]:
    """Decode every message of a batch with ``decode`` (by default: the event it carries), setting
    apart those that raise :class:`~noema_events.EventDecodeError`. What becomes of those is the
    handler's to say: the worker that owns their stream dead-letters them, the others skip them."""
    decoded: Decoded[Any] = Decoded([], [])
    for msg in msgs:
        try:
            decoded.events.append((msg, decode(msg)))
        except EventDecodeError as exc:
            decoded.undecodable.append((msg, exc))
    return decoded


class PullWorker:
    """Fetches batches from a pull consumer and hands them to ``handler`` until stopped."""

    def __init__(
        self,
        name: str,
        puller: Puller,
        handler: BatchHandler,
        batch: int,
        *,
        max_attempts: int = MAX_ATTEMPTS,
        max_deliver: int = MAX_DELIVER,
        backoff_base: float = 0.25,
        metrics: Metrics | None = None,
        before_fetch: Callable[[], Awaitable[None]] | None = None,
        contiguous: bool = False,
    ) -> None:
        self.name = name
        metrics = metrics or Metrics()
        self._processed = metrics.processed.labels(name)
        self._batch_seconds = metrics.batch_seconds.labels(name)
        self._failures = {t: metrics.failures.labels(name, str(t).lower()) for t in (True, False)}
        # Raises when this worker may no longer fetch: a partition's former owner must not take
        # messages from the consumer its new owner re-created under the same name (they would come
        # back to the new owner only after their ack wait, behind later ones).
        self._before_fetch = before_fetch
        # Whether every delivery of the consumer must come to this worker (one owner per consumer,
        # created for it, delivering from consumer sequence 1): a gap then raises ConsumerGap.
        self._contiguous = contiguous
        self._delivered = 0  # consumer sequence of the last delivery seen
        self._puller = puller
        self._handler = handler
        self._batch = batch
        self._max_attempts = max_attempts
        self._max_deliver = max_deliver
        self._backoff_base = backoff_base
        self._stopping = asyncio.Event()
        self._in_hand = 0
        self.last_error: str | None = None
        """The last failure handling a message (None once a batch succeeds again)."""
        self.log = structlog.get_logger(f"noema.{name}")

    @property
    def held(self) -> int:
        """Messages this worker has been delivered and not finished: the batch in hand and those
        received for the next one (its heartbeat reports it; see :mod:`noema.runtime.readiness`)."""
        return self._in_hand + self._puller.queued

    async def run(self) -> None:
        """Loop until :meth:`shutdown`; the batch in hand is finished (or left for redelivery) first."""
        self.log.info("worker started", worker=self.name, batch=self._batch)
        try:
            while not self._stopping.is_set():
                if self._before_fetch is not None:
                    await self._before_fetch()
                msgs = await self._puller.fetch(timeout=1.0)
                if self._contiguous:
                    self._check_contiguous(msgs)
                msgs = [m for m in msgs if not await self._exhausted(m)]
                if msgs:
                    self._in_hand = len(msgs)
                    try:
                        with self._batch_seconds.time():
                            await self._handle(msgs)
                    finally:
                        self._in_hand = 0
        finally:
            await self._puller.stop()
        self.log.info("worker stopped", worker=self.name)

    def _check_contiguous(self, msgs: list[Msg]) -> None:
        for msg in msgs:
            seq = msg.metadata.sequence.consumer
            if seq != self._delivered + 1:  # the consumer was created for this worker: from 1
                raise ConsumerGap(f"{self.name}: consumer delivery {seq} after {self._delivered}")
            self._delivered = seq

    def shutdown(self) -> None:
        """Stop fetching; the current batch completes (drain), then :meth:`run` returns (at once
        when waiting for messages: not after the fetch timeout)."""
        self._stopping.set()
        self._puller.wake()

    async def _exhausted(self, msg: Msg) -> bool:
        delivered = msg.metadata.num_delivered
        if delivered <= self._max_deliver:
            return False
        await self._reject(
            msg, f"delivered {delivered} times and never acknowledged (the worker stopped on it each time)"
        )
        self._processed.inc()
        return True

    async def _handle(self, msgs: list[Msg]) -> None:
        """Handle a batch until it succeeds, is dead-lettered, or the worker stops (then the unacked
        messages are redelivered to the next run)."""
        failures = 0
        transient = 0
        while True:
            try:
                await self._kept_alive(self._handler(msgs), msgs)
            except WorkerFatal:
                raise
            except TRANSIENT as exc:
                transient += 1
                self._note(exc, msgs, "transient failure; retrying", transient)
                delay = backoff(transient, self._backoff_base)
            except Exception as exc:
                if broken_connection(exc):  # the pool's connection, not the message: retried
                    transient += 1
                    self._note(exc, msgs, "broken database connection; retrying", transient)
                    delay = backoff(transient, self._backoff_base)
                elif len(msgs) > 1:
                    # Hold it against one message, not the batch: each is handled alone.
                    self._note(exc, msgs, "batch failed; handling its messages one by one", 1)
                    for msg in msgs:
                        if self._stopping.is_set():
                            return
                        await self._handle([msg])
                    return
                else:
                    failures += 1
                    self._note(exc, msgs, "message failed", failures)
                    if failures >= self._max_attempts:
                        await self._reject(msgs[0], f"handling failed {failures} times: {_describe(exc)}")
                        self._processed.inc()
                        return
                    delay = backoff(failures, self._backoff_base)
            else:
                self.last_error = None
                self._processed.inc(len(msgs))
                return
            if self._stopping.is_set():
                return
            await self._pause(delay, msgs)

    @staticmethod
    async def _kept_alive(work: Awaitable[None], msgs: list[Msg]) -> None:
        async def keep() -> None:
            while True:
                await asyncio.sleep(KEEPALIVE_S)
                for msg in msgs:
                    with suppress(Exception):  # acked already, or NATS is away: nothing to keep
                        await msg.in_progress()

        keeping = asyncio.create_task(keep())
        try:
            await work
        finally:
            await cancel_and_wait(keeping)

    async def _reject(self, msg: Msg, reason: str) -> None:
        seq = msg.metadata.sequence.stream
        self.log.error("message dead-lettered", worker=self.name, seq=seq, subject=msg.subject, reason=reason)
        await self._handler.reject(msg, reason, FAILED)

    def _note(self, exc: BaseException, msgs: list[Msg], what: str, attempt: int) -> None:
        self.last_error = _describe(exc)
        self._failures[isinstance(exc, TRANSIENT)].inc()
        self.log.warning(
            what,
            worker=self.name,
            attempt=attempt,
            error=self.last_error,
            first_seq=msgs[0].metadata.sequence.stream,
            messages=len(msgs),
            traceback=None if isinstance(exc, TRANSIENT) else traceback.format_exc(limit=8),
        )

    async def _pause(self, seconds: float, msgs: list[Msg]) -> None:
        """Wait before a retry (cut short by shutdown), keeping the messages ours meanwhile."""
        for msg in msgs:
            with suppress(Exception):  # NATS may be the thing that is down
                await msg.in_progress()
        with suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:900]


DRAIN_S = 1.5
"""After SIGTERM, how long the batch in hand may take to finish before it is abandoned (cancelled:
its messages are redelivered, as after a crash, which every worker is built to survive), so a
process always exits within the few seconds ``noemactl up`` grants."""


async def run_until_signalled(run: Callable[[], Awaitable[None]], shutdown: Callable[[], None]) -> None:
    """Run a worker, turning SIGTERM/SIGINT into a graceful ``shutdown()``, and into cancelling the
    work if it has not drained after :data:`DRAIN_S`."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(run())
    stopping: list[asyncio.TimerHandle] = []

    def stop() -> None:
        shutdown()
        interrupt_all()  # a worker waiting for messages stops now, not after its fetch timeout
        if not stopping:
            stopping.append(loop.call_later(DRAIN_S, task.cancel))

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)
    try:
        await until_connection_lost(task)
    except asyncio.CancelledError:
        if not stopping or not task.cancelled():
            raise
        structlog.get_logger("noema.worker").warning("batch abandoned at shutdown; it is redelivered")
    finally:
        for handle in stopping:
            handle.cancel()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


async def until_connection_lost(work: Awaitable[None]) -> None:
    """Await ``work``, unless a NATS connection of this process closes for good first: then the work
    is cancelled and :class:`~noema.adapters.liveness.ConnectionLost` raised, so the process exits
    non-zero and is restarted rather than living on without a connection."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(watch_connections())
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
        if watch.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            watch.result()  # raises ConnectionLost
        await task
    finally:
        watch.cancel()
        task.cancel()


def run_service(main: Callable[[], Awaitable[None]]) -> None:
    """Run a service's async main on uvloop (less per-message overhead than the default loop)."""
    import uvloop

    uvloop.run(main())  # type: ignore[arg-type]
    if any(t.daemon and t.is_alive() for t in threading.enumerate()):
        # Blocking work abandoned at shutdown (see noema.threads) would hold the exit until it
        # finishes (native code winding down its own threads): everything is closed, so leave now.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


class Service(Protocol):
    """What a composition root builds: something to run until it is asked to shut down."""

    async def run(self) -> None:
        """Work until :meth:`shutdown`."""
        ...

    def shutdown(self) -> None:
        """Stop gracefully."""
        ...


def _held_of(service: object) -> Callable[[], int] | None:
    """The messages the service's pull workers hold (:attr:`PullWorker.held`), found among its parts
    at most three levels down; None when it has none."""
    workers: list[PullWorker] = []
    seen: set[int] = set()
    level: list[object] = [service]
    for _ in range(4):
        deeper: list[object] = []
        for obj in level:
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if isinstance(obj, PullWorker):
                workers.append(obj)
                continue
            if isinstance(obj, list | tuple | set):
                deeper.extend(obj)
            elif isinstance(obj, dict):
                deeper.extend(obj.values())
            with suppress(TypeError):
                deeper.extend(vars(obj).values())
        level = deeper
    if not workers:
        return None
    return lambda: sum(w.held for w in workers)


def _claim_state_of(service: object) -> Callable[[], str] | None:
    state = getattr(type(service), "claim_state", None)
    if not isinstance(state, property):
        return None
    return lambda: str(getattr(service, "claim_state", ""))


def _process_name() -> str:
    """The worker's module (``noema_projector``…), naming its metrics server before it is built."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return str(getattr(spec, "name", None) or sys.argv[0]).removesuffix(".__main__")


def _age(monotonic_at: float | None) -> float | None:
    return None if monotonic_at is None else time.monotonic() - monotonic_at


class Build(Protocol):
    """A service's composition root: builds it from located settings, its resources owned by
    ``stack``, instrumented into ``metrics``."""

    def __call__(
        self, settings: Located, stack: AsyncExitStack, *, metrics: Metrics
    ) -> Awaitable[Service]: ...


def serve(build: Build, *, background: bool = False) -> None:
    """The ``__main__`` of every worker: settings from the environment, logging, locate the running
    instance, build the service inside an exit stack, run it until SIGTERM/SIGINT (on uvloop).

    While it runs, the process records its heartbeat (:mod:`noema.runtime.health`) through the service's own
    NATS connection, named after the service's ``name``. A ``background`` worker (understanding that
    may lag: embed, retrieve, conflicts, decay) lowers its CPU priority by ``NOEMA_BACKGROUND_NICE``,
    so that on busy cores searches, attention and the projector are served first. With
    ``NOEMA_METRICS_PORT`` set, the process serves its Prometheus metrics there, and beside them its
    liveness (``/livez``: its event loop runs) and readiness (``/readyz``: alive, NATS connected, a
    heartbeat recorded lately) for Kubernetes' probes (:mod:`noema.runtime.probes`).
    """
    try:
        settings = Settings.from_env()
    except NoemaError as exc:
        _refuse(exc)
    if background and settings.background_nice:
        os.nice(settings.background_nice)
    errors = ErrorTap()
    configure_logging(settings.log_format, settings.log_level, observe=errors)

    async def main() -> None:
        async with AsyncExitStack() as stack:
            located = locate(settings)
            metrics = Metrics()
            # The loop's watch and the probes first: a worker that takes long to build (NATS or
            # PostgreSQL away, a model to load) is alive meanwhile, and not ready.
            watch = LoopWatch()
            watching = asyncio.create_task(watch.run(), name="loop-watch")
            stack.push_async_callback(cancel_and_wait, watching)
            ready = Readiness(watch.problem, located.heartbeat_interval_s)
            if located.metrics_port is not None:
                probes: dict[str, Probe] = dict(zip(PROBE_PATHS, (watch.problem, ready), strict=True))
                await stack.enter_async_context(
                    metrics.serving(located.metrics_host, located.metrics_port, _process_name(), probes)
                )
            service = await build(located, stack, metrics=metrics)
            name = str(getattr(service, "name", "worker"))
            tracing.configure(name)  # spans exported only when OTEL_* configures an exporter
            nc = connection_of(service)
            if nc is not None:
                heartbeat = Heartbeat(
                    nc,
                    located.topology,
                    name,
                    interval_s=located.heartbeat_interval_s,
                    errors=errors,
                    metrics=metrics,
                    # owner or standby, for a worker run under a claim (noema.runtime.claims)
                    claim=_claim_state_of(service),
                    held=_held_of(service),
                )
                ready.started(lambda: nc.is_connected, lambda: _age(heartbeat.recorded_at))
                # Entered last, so it stops (and records a crash) before the connections close.
                await stack.enter_async_context(heartbeat)
            else:
                ready.started(None, None)
                structlog.get_logger("noema.health").warning("no NATS connection found; no heartbeat")
            await run_until_signalled(service.run, service.shutdown)

    try:
        run_service(main)
    except NoemaError as exc:
        if exc.kind != Kind.INVALID:
            raise
        structlog.get_logger("noema.worker").error("cannot start", error=str(exc))
        _refuse(exc)


def _refuse(exc: NoemaError) -> NoReturn:
    """Exit 2 on a setting that must be fixed (a malformed one, an embedding server that cannot be
    used as configured), saying what to fix: a restart would only fail the same way."""
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(2)
