"""A pull-consumer client that never drops a delivered message and never stalls after an outage.

nats-py's ``PullSubscription.fetch`` can leave messages that arrive after its timeout in limbo: the
server counts them as delivered, the client never returns them, and they come back only after the
consumer's ack wait (seen here as a 60 s stall of a few dozen observations). This client keeps one
pull request outstanding at a time and hands out everything that arrives on its inbox, in order,
whenever it arrives.

A pull request lives on the server only: a NATS restart forgets it without a word. So a request is
considered over, and a new one is sent, when the connection has reconnected since it was sent or when
it has been outstanding longer than its expiry (the server's "expired" status never came) — an
outage of any length is followed by deliveries again without anyone's help.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import weakref
from collections import deque

import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

__all__ = [
    "ConsumerUnavailable",
    "DeliverPolicy",
    "Puller",
    "durable_puller",
    "durable_puller_after",
    "in_order_puller",
    "interrupt_all",
]

log = structlog.get_logger("noema.pull")

UNAVAILABLE_LIMIT_S = 60.0
"""How long the consumer may answer "no responders" before the process gives up on it (and is
restarted, which recreates the consumer)."""


_live: weakref.WeakSet[Puller] = weakref.WeakSet()


def interrupt_all() -> None:
    """Make every puller of this process stop waiting: a fetch in progress returns at once, and so
    does every later one. For shutdown, so a worker does not first sit out its fetch timeout."""
    for puller in list(_live):
        puller.interrupt()


class ConsumerUnavailable(RuntimeError):
    """The consumer was deleted, or has not answered for :data:`UNAVAILABLE_LIMIT_S`."""


class Puller:
    """Fetches batches from a (durable or ephemeral) pull consumer."""

    def __init__(self, nc: NATS, stream: str, consumer: str, batch: int, expires: float = 5.0) -> None:
        self._nc = nc
        self._name = f"{stream}/{consumer}"
        self._subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"
        self._batch = batch
        self._expires = expires
        self._inbox = nc.new_inbox()
        self._queue: deque[Msg] = deque()
        self._arrived = asyncio.Event()
        self._active = False  # a pull request is outstanding on the server
        self._requested_at = 0.0
        self._reconnects = 0  # the connection's reconnect count when the request was sent
        self._remaining = 0
        self._retry_at = 0.0  # after "no responders": not before this (loop time)
        self._unavailable_since: float | None = None
        self._gone: str | None = None
        self._sub: Subscription | None = None
        self._interrupted = False
        self._waking = False
        self.linger = 0.005
        _live.add(self)

    def interrupt(self) -> None:
        """Stop waiting for messages from now on (see :func:`interrupt_all`)."""
        self._interrupted = True
        self._arrived.set()

    def wake(self) -> None:
        """End the wait of a fetch in progress, and of every later one, without dropping what was
        received: a fetch returns what is queued, or nothing at once. For a worker's own shutdown,
        which then hands out what it holds instead of sitting out its fetch timeout."""
        self._waking = True
        self._arrived.set()

    async def start(self) -> Puller:
        """Subscribe to the inbox; returns self."""
        self._sub = await self._nc.subscribe(
            self._inbox, cb=self._on_msg, pending_msgs_limit=-1, pending_bytes_limit=-1
        )
        return self

    async def _on_msg(self, msg: Msg) -> None:
        status = msg.headers.get("Status") if msg.headers else None
        if status is not None and not msg.data:
            if status == "503":  # no responders: the consumer (or JetStream) is not there right now
                self._on_unavailable()
            else:
                self._unavailable_since = None  # the consumer answered
            if status == "409" and "deleted" in (msg.headers or {}).get("Description", "").lower():
                self._gone = "the consumer was deleted"
            if status != "100":  # 404 no messages, 408 expired, 409 limits: the request is over
                self._active = False
        else:
            self._unavailable_since = None
            self._queue.append(msg)
            self._remaining -= 1
            if self._remaining <= 0:
                self._active = False
        self._arrived.set()

    def _on_unavailable(self) -> None:
        now = asyncio.get_running_loop().time()
        if self._unavailable_since is None:
            self._unavailable_since = now
            log.warning("consumer not answering; retrying", consumer=self._name)
        elif now - self._unavailable_since > UNAVAILABLE_LIMIT_S:
            self._gone = f"the consumer has not answered for {UNAVAILABLE_LIMIT_S:.0f} s"
        self._retry_at = now + 0.5  # not a busy loop while JetStream recovers

    def _request_live(self, now: float) -> bool:
        """Whether the outstanding request can still deliver (see the module docstring)."""
        if not self._active:
            return False
        if self._nc.stats["reconnects"] != self._reconnects:
            return False  # the server may have restarted and forgotten it
        return now < self._requested_at + self._expires + 1.0

    async def _request(self) -> None:
        self._active = True
        self._remaining = self._batch
        self._requested_at = asyncio.get_running_loop().time()
        self._reconnects = self._nc.stats["reconnects"]
        body = json.dumps({"batch": self._batch, "expires": int(self._expires * 1e9)}).encode()
        await self._nc.publish(self._subject, body, reply=self._inbox)

    async def fetch(self, timeout: float = 1.0) -> list[Msg]:
        """Up to ``batch`` messages, in stream order; empty after ``timeout`` with none.

        Raises :class:`ConsumerUnavailable` when the consumer is gone (the process should exit and be
        restarted), and nats-py's ``ConnectionClosedError`` when the connection is closed for good.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not self._queue:
            if self._interrupted or self._waking:
                return []  # stopping: what is queued is redelivered to the next instance
            if self._gone is not None:
                raise ConsumerUnavailable(f"{self._name}: {self._gone}")
            now = loop.time()
            if now >= deadline:
                return []
            self._arrived.clear()
            if not self._request_live(now) and now >= self._retry_at:
                await self._request()
            if self._queue:
                break
            # Wake at the deadline, or sooner when the request must be sent again.
            if self._active:
                wake = min(deadline, self._requested_at + self._expires + 1.0)
            else:
                wake = min(deadline, max(self._retry_at, now + 0.01))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), max(wake - loop.time(), 0.001))
        # The server sends a request's messages in a burst: let the rest of it land (briefly), so
        # batches stay large, without ever waiting for a batch the stream cannot fill.
        while self._active and len(self._queue) < self._batch:
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), self.linger)
            except TimeoutError:
                break
        if self._interrupted:
            return []
        out = [self._queue.popleft() for _ in range(min(self._batch, len(self._queue)))]
        if not self._queue and not self._request_live(loop.time()) and loop.time() >= self._retry_at:
            await self._request()  # pipeline: the next batch travels while this one is processed
        return out

    @property
    def queued(self) -> int:
        """Messages received and not yet handed out by :meth:`fetch`."""
        return len(self._queue)

    async def stop(self) -> None:
        """Stop receiving (messages not handed out are redelivered after the ack wait)."""
        if self._sub is not None:
            await self._sub.unsubscribe()
            self._sub = None


async def durable_puller(
    nc: NATS,
    stream: str,
    durable: str,
    filter_subject: str | list[str],
    batch: int,
    *,
    ack_wait: float,
    max_ack_pending: int,
    deliver_policy: DeliverPolicy = DeliverPolicy.ALL,
    opt_start_seq: int | None = None,
    api_timeout: float = 5.0,
) -> Puller:
    """Create (or keep) a shared durable consumer with explicit acks and return a started puller on it.

    ``filter_subject`` may be a list (the consumer then delivers messages matching any of them);
    ``opt_start_seq`` goes with ``DeliverPolicy.BY_START_SEQUENCE``; ``api_timeout``: how long the
    request may wait for JetStream (nats-py's default, 5 s, unless given).
    """
    await nc.jetstream(timeout=api_timeout).add_consumer(
        stream,
        ConsumerConfig(
            durable_name=durable,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=deliver_policy,
            opt_start_seq=opt_start_seq,
            filter_subject=filter_subject if isinstance(filter_subject, str) else None,
            filter_subjects=None if isinstance(filter_subject, str) else filter_subject,
            ack_wait=ack_wait,
            max_ack_pending=max_ack_pending,
        ),
    )
    return await Puller(nc, stream, durable, batch).start()


async def durable_puller_after(
    nc: NATS,
    stream: str,
    durable: str,
    filter_subject: str | list[str],
    batch: int,
    *,
    after: int,
    ack_wait: float,
    max_ack_pending: int,
) -> Puller:
    """:func:`durable_puller` delivering from just after sequence ``after`` (a worker's mark), in
    order: the consumer is recreated there (a crashed process's unacked messages would otherwise
    come back only after their ack wait, behind newer ones). ``after`` 0: kept, from the start."""
    if after:
        with contextlib.suppress(NotFoundError):
            await nc.jetstream().delete_consumer(stream, durable)
    return await durable_puller(
        nc,
        stream,
        durable,
        filter_subject,
        batch,
        ack_wait=ack_wait,
        max_ack_pending=max_ack_pending,
        deliver_policy=DeliverPolicy.BY_START_SEQUENCE if after else DeliverPolicy.ALL,
        opt_start_seq=after + 1 if after else None,
    )


async def in_order_puller(
    nc: NATS, stream: str, durable: str, subjects: str, position: int, batch: int
) -> Puller:
    """(Re)create a durable consumer that delivers ``stream`` in order from ``position + 1`` (from the
    start when 0), for one reader that acks a batch by acking its last message (the projector)."""
    js = nc.jetstream()
    with contextlib.suppress(NotFoundError):
        await js.delete_consumer(stream, durable)
    config = ConsumerConfig(
        durable_name=durable,
        # One reader consumes in order, so acking the last message of a batch acknowledges the
        # whole batch: one ack per commit instead of one per event.
        ack_policy=AckPolicy.ALL,
        ack_wait=300.0,
        max_ack_pending=batch * 4,
        filter_subject=subjects,
        **(
            {"deliver_policy": DeliverPolicy.BY_START_SEQUENCE, "opt_start_seq": position + 1}
            if position
            else {"deliver_policy": DeliverPolicy.ALL}
        ),
    )
    await js.add_consumer(stream, config)
    return await Puller(nc, stream, durable, batch).start()
