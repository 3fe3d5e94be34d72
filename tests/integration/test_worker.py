"""PullWorker's one failure policy, on a real JetStream consumer (issue 11).

Transient failures are retried and never held against a message; any other failure is narrowed to
the message that causes it, which is dead-lettered as ``failed`` after its retries while the rest of
its batch goes on; a message JetStream delivered too often is dead-lettered before it is handled.
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig

from noema.adapters.jetstream import DeadLetters
from noema.adapters.pull import Puller
from noema.runtime.worker import PullWorker
from tests.conftest import Harness
from tests.support import assert_eventually

pytestmark = pytest.mark.integration


class Recorder:
    """A handler that handles a message unless its body names a failure."""

    def __init__(self, h: Harness) -> None:
        self.handled: list[bytes] = []
        self.calls = 0
        # The first calls meet a server that is away, then a pooled connection it dropped mid-operation
        # (asyncpg's client-side protocol error after a restart): more failures than max_attempts.
        self.outage: list[Exception] = [
            ConnectionRefusedError("server away"),
            ConnectionRefusedError("server away"),
            *[asyncpg.InternalClientError("cannot switch to state 15; another operation (2) is in progress")]
            * 4,
        ]
        self._dead_letters = DeadLetters(h.js, h.topology, "test")

    async def __call__(self, msgs: list[Msg]) -> None:
        self.calls += 1
        if self.outage:
            raise self.outage.pop(0)
        if any(m.data == b"bug" for m in msgs):
            raise KeyError("a bug in the handler")
        for msg in msgs:
            self.handled.append(msg.data)
            await msg.ack()

    async def reject(self, msg: Msg, reason: str, kind: str) -> None:
        await self._dead_letters.reject(msg, reason, kind)


async def _consumer(h: Harness, name: str, ack_wait: float = 30) -> Puller:
    await h.js.add_consumer(
        h.topology.observation_stream,
        ConsumerConfig(
            durable_name=name,
            ack_policy=AckPolicy.EXPLICIT,
            filter_subject=h.topology.observation_subjects,
            ack_wait=ack_wait,
        ),
    )
    return await Puller(h.nc, h.topology.observation_stream, name, 10).start()


async def _run(h: Harness, worker: PullWorker) -> None:
    task = asyncio.create_task(worker.run())

    async def stop() -> None:
        worker.shutdown()
        await asyncio.wait_for(task, 10)

    h.stack.push_async_callback(stop)


async def _dead_letter_headers(h: Harness) -> list[dict[str, str]]:
    info = await h.js.stream_info(h.topology.dead_letter_stream)
    return [
        dict((await h.js.get_msg(h.topology.dead_letter_stream, s)).headers or {})
        for s in range(info.state.first_seq, info.state.last_seq + 1)
        if info.state.messages
    ]


async def test_a_failing_message_is_dead_lettered_alone_and_an_outage_is_only_retried(
    harness: Harness,
) -> None:
    subject = harness.topology.observation_subject("acme", "ops")
    for body in (b"one", b"two", b"bug", b"four"):
        await harness.js.publish(subject, body)
    handler = Recorder(harness)
    worker = PullWorker(
        "test", await _consumer(harness, "w1"), handler, 10, max_attempts=3, backoff_base=0.01
    )
    await _run(harness, worker)

    await assert_eventually(lambda: _count(handler.handled, 3))
    assert handler.handled == [b"one", b"two", b"four"]  # in order, the bug skipped
    [letter] = await assert_eventually(lambda: _dead_letter_headers(harness))
    assert letter["Noema-Error"] == "handling failed 3 times: KeyError: 'a bug in the handler'"
    assert letter["Noema-Error-Kind"] == "failed"
    assert letter["Noema-Original-Seq"] == "3"
    assert worker.last_error is None  # healthy again once a batch succeeds


async def test_a_message_delivered_too_often_is_dead_lettered_without_being_handled(
    harness: Harness,
) -> None:
    subject = harness.topology.observation_subject("acme", "ops")
    await harness.js.publish(subject, b"crashes the worker every time")
    # Five deliveries that never end in an ack: each time the worker died on it.
    puller = await _consumer(harness, "w2", ack_wait=0.5)
    for _ in range(5):
        assert await assert_eventually(lambda: puller.fetch(timeout=2), timeout=10)
    await puller.stop()
    handler = Recorder(harness)
    handler.outage = []
    worker = PullWorker("test", await _consumer(harness, "w2", ack_wait=0.5), handler, 10, max_deliver=5)
    await _run(harness, worker)
    [letter] = await assert_eventually(lambda: _dead_letter_headers(harness))
    assert letter["Noema-Error-Kind"] == "failed"
    assert letter["Noema-Deliveries"] == "6"
    assert "delivered 6 times" in letter["Noema-Error"]
    assert handler.handled == []


async def _count(items: list[bytes], n: int) -> bool:
    return len(items) >= n
