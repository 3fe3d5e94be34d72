"""Projector worker: event stream in order → read model, position tracked in the same transaction.

The database's tracking position is the truth about progress: on start the durable consumer is
(re)created to deliver from ``position + 1``, so a crash between commit and ack, or a kill at any
point, resumes exactly where the committed state ends. A gap in delivered sequences (possible only
after an ack timeout) stops the worker loudly (:class:`StreamGap`); its restart resumes from the
committed position.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import structlog

from noema.adapters import tracing
from noema.adapters.erased_observations import delete_erased_observations
from noema.adapters.jetstream import DeadLetters
from noema.adapters.metrics import Metrics
from noema.adapters.postgres.projection import Projected, ReadModelProjection
from noema.adapters.pull import Puller, in_order_puller
from noema.runtime.consumer import Connection, JetStream, Msg
from noema.runtime.wiring import DbConnection, Pool
from noema.runtime.worker import WorkerFatal
from noema.topology import Topology
from noema_events import ContentErased, EventDecodeError

__all__ = ["ProjectorHandler", "StreamGap", "subscribe_from_position"]

log = structlog.get_logger("noema.projector")


async def subscribe_from_position(nc: Connection, topology: Topology, position: int, batch: int) -> Puller:
    """(Re)create the projector's durable consumer to deliver from ``position + 1``, in order."""
    durable = topology.durable("projector")
    return await in_order_puller(nc, topology.event_stream, durable, topology.event_subjects, position, batch)


class ProjectorHandler:
    """Applies one batch of event messages and acks them after the commit.

    Skips are decided once and the same way as replay (:func:`noema.composition.replay.replay_into`): an event
    that cannot be decoded, or that the database refuses, is dead-lettered as ``invalid``; an event
    whose handling keeps failing for another reason is retried by :class:`noema.runtime.worker.PullWorker`
    and dead-lettered as ``failed`` only after that (see :meth:`reject`). Every dead letter is
    stored before the position moves past its event.
    """

    def __init__(
        self,
        js: JetStream,
        pool: Pool,
        topology: Topology,
        projection: ReadModelProjection,
        position: int,
        connection: Callable[[], AbstractAsyncContextManager[DbConnection]] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        # Writes go through ``connection`` (default: the pool's): the claim's own connection when
        # several instances run, so only the session holding the claim can commit (fencing).
        self._connection = connection or pool.acquire
        self._topology = topology
        self._projection = projection
        self._js = js
        self._dead_letters = DeadLetters(js, topology, "projector", metrics)
        # The read model's position as committed (a gauge: where the projection is, for scraping).
        self._position = (metrics or Metrics()).projection_position.labels(projection.name)
        self._position.set(position)
        self._expected = position + 1

    def _in_order(self, msgs: list[Msg]) -> list[Msg]:
        """The messages not applied yet, checked to continue the stream without a gap."""
        expected = self._expected
        fresh = []
        for msg in msgs:
            seq = msg.metadata.sequence.stream
            if seq < expected:
                continue  # already applied (a redelivery)
            if seq > expected:
                raise StreamGap(f"event stream gap: expected seq {expected}, got {seq}; restart resumes")
            fresh.append(msg)
            expected = seq + 1
        return fresh

    async def __call__(self, msgs: list[Msg]) -> None:
        """Decode, apply in one transaction, ack; when spans are recorded, each event's projection
        joins the event's trace (:mod:`noema.adapters.tracing`)."""
        fresh = self._in_order(msgs)
        if not fresh:
            await msgs[-1].ack()
            return
        with tracing.batch("noema.project", publishes=False) as traces:
            await self._apply(fresh, traces)
        await msgs[-1].ack()

    async def _apply(self, fresh: list[Msg], traces: tracing.Batch) -> None:
        by_seq = {m.metadata.sequence.stream: m for m in fresh}
        batch: list[Projected] = []
        for msg in fresh:
            seq = msg.metadata.sequence.stream
            try:
                event, recorded = self._topology.recorded_on_subject(msg.data, msg.subject)
                batch.append(Projected(seq, msg.subject, event, recorded))
                if tracing.recording():
                    traces.carry(event.id, msg.headers, **{"noema.event.type": event.type, "noema.seq": seq})
            except EventDecodeError as exc:
                # Kept with its reason and skipped, the same way on every replay, so live and
                # replayed read models stay equal. Written before the skip is committed.
                await self._dead_letters.write(msg, str(exc))

        async def refused(projected: Projected, reason: str) -> None:
            await self._dead_letters.write(by_seq[projected.seq], reason)

        through = fresh[-1].metadata.sequence.stream
        async with self._connection() as conn:
            applied = await self._projection.apply(conn, batch, through_seq=through, on_refused=refused)
        self._expected = through + 1
        self._position.set(through)
        log.info("batch projected", events=applied, last_seq=through)
        erasures = [p.event for p in batch if isinstance(p.event, ContentErased)]
        if erasures:
            await delete_erased_observations(self._js, self._topology, erasures)

    async def reject(self, msg: Msg, reason: str, kind: str) -> None:
        """Skip one event for good: its dead letter first, then the position moves past it, then the ack."""
        seq = msg.metadata.sequence.stream
        if seq >= self._expected:
            if seq > self._expected:
                raise StreamGap(f"cannot skip seq {seq}: the position is at {self._expected - 1}")
            await self._dead_letters.write(msg, reason, kind)
            async with self._connection() as conn:
                await self._projection.apply(conn, [], through_seq=seq)
            self._expected = seq + 1
            self._position.set(seq)
        await msg.ack()


class StreamGap(WorkerFatal):
    """Delivery skipped part of the stream (after an ack timeout); a restart resumes from the position."""
