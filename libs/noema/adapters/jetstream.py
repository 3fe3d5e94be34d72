"""JetStream adapter: connection, idempotent stream setup, publishing events, reading the stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import nats
import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    DiscardPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.errors import NotFoundError

from noema_events import Event, encode_event

from ..topology import Topology

__all__ = [
    "EventPublisher",
    "connect",
    "ensure_streams",
    "msg_id_header",
    "read_stream",
    "stream_last_seq",
]

log = structlog.get_logger("noema.jetstream")


def msg_id_header(message_id: str) -> dict[str, str]:
    """The header that makes JetStream store a retried publish once."""
    return {"Nats-Msg-Id": message_id}


async def connect(url: str, name: str, **kwargs: object) -> NATS:
    """Connect to NATS; fails fast (no endless reconnect on the first connect)."""
    return await nats.connect(
        url, name=name, connect_timeout=5, allow_reconnect=True, max_reconnect_attempts=10, **kwargs  # type: ignore[arg-type]
    )


def _stream_configs(topology: Topology, duplicate_window_s: float) -> list[StreamConfig]:
    common = {
        "retention": RetentionPolicy.LIMITS,
        "storage": StorageType.FILE,
        "max_age": 0,  # retained indefinitely: the stream is the source of truth
        "max_msgs": -1,
        "max_bytes": -1,
        "discard": DiscardPolicy.OLD,
        "duplicate_window": duplicate_window_s,
        "deny_delete": True,
        "deny_purge": True,
    }
    return [
        StreamConfig(name=topology.observation_stream, subjects=[topology.observation_subjects],
                     description="Noema observations", **common),  # type: ignore[arg-type]
        StreamConfig(name=topology.event_stream, subjects=[topology.event_subjects],
                     description="Noema events: every state change", **common),  # type: ignore[arg-type]
        StreamConfig(name=topology.dead_letter_stream, subjects=[topology.dead_letter_subjects],
                     description="Rejected messages with the reason", **common),  # type: ignore[arg-type]
    ]


async def ensure_streams(js: JetStreamContext, topology: Topology, duplicate_window_s: float = 7200.0) -> None:
    """Create the observation, event and dead-letter streams, or update them to this config."""
    for config in _stream_configs(topology, duplicate_window_s):
        try:
            await js.stream_info(config.name)  # type: ignore[arg-type]
        except NotFoundError:
            await js.add_stream(config)
            log.info("stream created", stream=config.name)
        else:
            await js.update_stream(config)


async def stream_last_seq(js: JetStreamContext, stream: str) -> int:
    """The sequence of the newest message in a stream (0 when empty)."""
    info = await js.stream_info(stream)
    return int(info.state.last_seq)


class EventPublisher:
    """Publishes events on their subjects with ``Nats-Msg-Id`` = event id, pipelined."""

    def __init__(self, js: JetStreamContext, topology: Topology) -> None:
        self._js = js
        self._topology = topology

    async def publish(self, events: Sequence[Event]) -> list[int]:
        """Publish and wait until JetStream stored every event; returns their stream sequences.

        A duplicate (same id within the window) returns the sequence of the stored copy.
        """
        futures = [
            await self._js.publish_async(
                self._topology.event_subject(ev), encode_event(ev), headers=msg_id_header(ev.id)
            )
            for ev in events
        ]
        acks = await asyncio.gather(*futures)
        return [int(a.seq) for a in acks]


async def read_stream(
    js: JetStreamContext, stream: str, subjects: str, start_seq: int, end_seq: int, batch: int = 1000
) -> AsyncIterator[list[Msg]]:
    """Yield the messages of ``stream`` from ``start_seq`` to ``end_seq`` in batches, in order.

    Uses an ephemeral pull consumer with no acks: reading never changes any durable state.
    """
    if end_seq < start_seq:
        return
    psub = await js.pull_subscribe(
        subjects,
        stream=stream,
        config=ConsumerConfig(
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=start_seq,
            ack_policy=AckPolicy.NONE,
            inactive_threshold=60.0,
        ),
    )
    try:
        seen = start_seq - 1
        while seen < end_seq:
            try:
                msgs = await psub.fetch(min(batch, end_seq - seen), timeout=5)
            except TimeoutError:
                raise RuntimeError(f"stream {stream} stopped delivering at seq {seen} (wanted {end_seq})") from None
            msgs = [m for m in msgs if m.metadata.sequence.stream <= end_seq]
            if msgs:
                seen = msgs[-1].metadata.sequence.stream
                yield msgs
    finally:
        await psub.unsubscribe()
