"""A worker's shutdown ends its puller's wait for messages, without dropping what it received.

A worker stopped while its fetch waits for messages used to sit out the fetch timeout; a woken puller
returns at once, and still hands out the messages it holds (they are the batch the worker finishes).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import cast

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from noema.adapters.pull import Puller
from noema.runtime.worker import PullWorker


@dataclass
class _Bus:
    """What the puller asks of a NATS connection: an inbox, its reconnect count, and a place to send
    pull requests (which nothing answers)."""

    stats: dict[str, int] = field(default_factory=lambda: {"reconnects": 0})
    requested: asyncio.Event = field(default_factory=asyncio.Event)

    def new_inbox(self) -> str:
        return "_INBOX.test"

    async def publish(self, subject: str, payload: bytes = b"", reply: str = "") -> None:
        self.requested.set()


@dataclass
class _Delivery:
    data: bytes
    headers: dict[str, str] | None = None


def _puller(bus: _Bus) -> Puller:
    return Puller(cast(NATS, bus), "STREAM", "consumer", batch=10)


async def _waiting(bus: _Bus) -> None:
    """Until the fetch has sent its pull request: it waits for messages now."""
    await asyncio.wait_for(bus.requested.wait(), 10)


async def test_a_woken_puller_ends_the_wait_of_a_fetch_in_progress_and_of_later_ones() -> None:
    bus = _Bus()
    puller = _puller(bus)
    fetch = asyncio.create_task(puller.fetch(timeout=3600))
    await _waiting(bus)
    puller.wake()
    assert await asyncio.wait_for(fetch, 10) == [], "not after the hour it was given"
    assert await asyncio.wait_for(puller.fetch(timeout=3600), 10) == []


async def test_a_woken_puller_still_hands_out_what_it_received() -> None:
    puller = _puller(_Bus())
    delivered = cast(Msg, _Delivery(b"observation"))
    await puller._on_msg(delivered)
    puller.wake()
    assert await asyncio.wait_for(puller.fetch(timeout=3600), 10) == [delivered]


async def test_a_worker_shut_down_while_waiting_for_messages_stops_without_sitting_out_its_fetch() -> None:
    bus = _Bus()
    puller = _puller(bus)
    handled: list[Msg] = []

    class Handler:
        async def __call__(self, msgs: list[Msg]) -> None:
            handled.extend(msgs)

        async def reject(self, msg: Msg, reason: str, kind: str) -> None:
            raise AssertionError("nothing to reject")

    worker = PullWorker("test", puller, Handler(), 10)
    run = asyncio.create_task(worker.run())
    await _waiting(bus)
    worker.shutdown()
    fetch = asyncio.create_task(puller.fetch(timeout=3600))
    assert await asyncio.wait_for(fetch, 10) == [], "the worker's puller no longer waits"
    await asyncio.wait_for(run, 10)
    assert handled == []
