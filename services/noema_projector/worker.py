"""Projector worker: event stream in order → read model, position tracked in the same transaction.

The database's tracking position is the truth about progress: on start the durable consumer is
(re)created to deliver from ``position + 1``, so a crash between commit and ack, or a kill at any
point, resumes exactly where the committed state ends. A gap in delivered sequences (possible only
after an ack timeout) stops the worker loudly; its restart resumes from the committed position.
"""

from __future__ import annotations

import contextlib

import asyncpg
import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from noema.adapters.jetstream import dead_letter
from noema.adapters.postgres.projection import Projected, ReadModelProjection
from noema.adapters.pull import Puller
from noema.topology import Topology
from noema_events import EventDecodeError, decode_event

__all__ = ["ProjectorHandler", "subscribe_from_position"]

log = structlog.get_logger("noema.projector")


async def subscribe_from_position(nc: NATS, topology: Topology, position: int, batch: int) -> Puller:
    """(Re)create the projector's durable consumer to deliver from ``position + 1``."""
    js = nc.jetstream()
    durable = topology.durable("projector")
    with contextlib.suppress(NotFoundError):
        await js.delete_consumer(topology.event_stream, durable)
    config = ConsumerConfig(
        durable_name=durable,
        # One projector per partition consumes in order, so acking the last message of a batch
        # acknowledges the whole batch: one ack per commit instead of one per event.
        ack_policy=AckPolicy.ALL,
        ack_wait=300.0,
        max_ack_pending=batch * 4,
        filter_subject=topology.event_subjects,
        **(
            {"deliver_policy": DeliverPolicy.BY_START_SEQUENCE, "opt_start_seq": position + 1}
            if position
            else {"deliver_policy": DeliverPolicy.ALL}
        ),
    )
    await js.add_consumer(topology.event_stream, config)
    return await Puller(nc, topology.event_stream, durable, batch).start()


class ProjectorHandler:
    """Applies one batch of event messages and acks them after the commit."""

    def __init__(
        self,
        js: JetStreamContext,
        pool: asyncpg.Pool,
        topology: Topology,
        projection: ReadModelProjection,
        position: int,
    ) -> None:
        self._js = js
        self._pool = pool
        self._topology = topology
        self._projection = projection
        self._expected = position + 1

    async def __call__(self, msgs: list[Msg]) -> None:
        """Decode, apply in one transaction, ack."""
        batch: list[Projected] = []
        for msg in msgs:
            seq = msg.metadata.sequence.stream
            if seq < self._expected:
                continue  # already applied (a redelivery)
            if seq > self._expected:
                raise RuntimeError(
                    f"event stream gap: expected seq {self._expected}, got {seq}; restart resumes"
                )
            self._expected = seq + 1
            try:
                batch.append(Projected(seq, msg.subject, decode_event(msg.data)))
            except EventDecodeError as exc:
                await self._dead_letter(msg, seq, str(exc))
        async with self._pool.acquire() as conn:
            applied = await self._projection.apply(conn, batch, through_seq=self._expected - 1)
        by_seq = {m.metadata.sequence.stream: m for m in msgs}
        for projected, reason in self._projection.refused:
            await self._dead_letter(
                by_seq[projected.seq], projected.seq, f"refused by the database: {reason}"
            )
        await msgs[-1].ack()
        log.info("batch projected", events=applied, last_seq=self._expected - 1)

    async def _dead_letter(self, msg: Msg, seq: int, reason: str) -> None:
        # An undecodable event cannot be projected; it is kept with its reason and skipped, the
        # same way on every replay, so live and replayed read models stay equal.
        await dead_letter(self._js, self._topology, "projector", msg, reason)
        log.error("event not projectable; dead-lettered", seq=seq, reason=reason)
