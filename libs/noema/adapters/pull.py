"""A pull-consumer client that never drops a delivered message.

nats-py's ``PullSubscription.fetch`` can leave messages that arrive after its timeout in limbo: the
server counts them as delivered, the client never returns them, and they come back only after the
consumer's ack wait (seen here as a 60 s stall of a few dozen observations). This client keeps one
pull request outstanding at a time and hands out everything that arrives on its inbox, in order,
whenever it arrives.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

__all__ = ["Puller", "durable_puller"]


class Puller:
    """Fetches batches from a (durable or ephemeral) pull consumer."""

    def __init__(self, nc: NATS, stream: str, consumer: str, batch: int, expires: float = 5.0) -> None:
        self._nc = nc
        self._subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"
        self._batch = batch
        self._expires_ns = int(expires * 1e9)
        self._inbox = nc.new_inbox()
        self._queue: deque[Msg] = deque()
        self._arrived = asyncio.Event()
        self._active = False  # a pull request is outstanding on the server
        self._remaining = 0
        self._sub: Subscription | None = None
        self.linger = 0.005

    async def start(self) -> Puller:
        """Subscribe to the inbox; returns self."""
        self._sub = await self._nc.subscribe(
            self._inbox, cb=self._on_msg, pending_msgs_limit=-1, pending_bytes_limit=-1
        )
        return self

    async def _on_msg(self, msg: Msg) -> None:
        status = msg.headers.get("Status") if msg.headers else None
        if status is not None and not msg.data:
            if status != "100":  # 404 no messages, 408 expired, 409 limits: the request is over
                self._active = False
        else:
            self._queue.append(msg)
            self._remaining -= 1
            if self._remaining <= 0:
                self._active = False
        self._arrived.set()

    async def _request(self) -> None:
        self._active = True
        self._remaining = self._batch
        body = json.dumps({"batch": self._batch, "expires": self._expires_ns}).encode()
        await self._nc.publish(self._subject, body, reply=self._inbox)

    async def fetch(self, timeout: float = 1.0) -> list[Msg]:
        """Up to ``batch`` messages, in stream order; empty after ``timeout`` with none."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not self._queue:
            if not self._active:
                await self._request()
            self._arrived.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except TimeoutError:
                return []
        # The server sends a request's messages in a burst: let the rest of it land (briefly), so
        # batches stay large, without ever waiting for a batch the stream cannot fill.
        while self._active and len(self._queue) < self._batch:
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), self.linger)
            except TimeoutError:
                break
        out = [self._queue.popleft() for _ in range(min(self._batch, len(self._queue)))]
        if not self._queue and not self._active:
            await self._request()  # pipeline: the next batch travels while this one is processed
        return out

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
) -> Puller:
    """Create (or keep) a shared durable consumer with explicit acks and return a started puller on it.

    ``filter_subject`` may be a list (the consumer then delivers messages matching any of them).
    """
    await nc.jetstream().add_consumer(
        stream,
        ConsumerConfig(
            durable_name=durable,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=deliver_policy,
            filter_subject=filter_subject if isinstance(filter_subject, str) else None,
            filter_subjects=None if isinstance(filter_subject, str) else filter_subject,
            ack_wait=ack_wait,
            max_ack_pending=max_ack_pending,
        ),
    )
    return await Puller(nc, stream, durable, batch).start()
