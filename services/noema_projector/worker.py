"""Projector worker: event stream in order → read model, position tracked in the same transaction.

The database's tracking position is the truth about progress: on start the durable consumer is
(re)created to deliver from ``position + 1``, so a crash between commit and ack, or a kill at any
point, resumes exactly where the committed state ends. A gap in delivered sequences (possible only
after an ack timeout) stops the worker loudly (:class:`StreamGap`); its restart resumes from the
committed position.

The decision is :class:`noema.application.projector.Projecting`, code over decoded events and its
ports (the read model it writes, where its skips are kept, the erased observations to delete);
:class:`ProjectorHandler` wires it to PostgreSQL and JetStream inside the NATS consumer
:class:`noema.runtime.consumer.ProjectionConsumer` (decode, dead-letter, trace, ack).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from noema.adapters.erased_observations import JetStreamErasedObservations
from noema.adapters.jetstream import DeadLetters
from noema.adapters.metrics import Metrics
from noema.adapters.postgres.projection import ProjectionWriter, ReadModelProjection
from noema.adapters.pull import Puller, in_order_puller
from noema.application.projector import StreamGap
from noema.runtime.consumer import Connection, JetStream, ProjectionConsumer
from noema.runtime.wiring import DbConnection, Pool
from noema.topology import Topology

__all__ = ["ProjectorHandler", "StreamGap", "subscribe_from_position"]


async def subscribe_from_position(nc: Connection, topology: Topology, position: int, batch: int) -> Puller:
    """(Re)create the projector's durable consumer to deliver from ``position + 1``, in order."""
    durable = topology.durable("projector")
    return await in_order_puller(nc, topology.event_stream, durable, topology.event_subjects, position, batch)


class ProjectorHandler(ProjectionConsumer):
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
        super().__init__(
            ProjectionWriter(projection, connection or pool.acquire),
            topology,
            DeadLetters(js, topology, "projector", metrics),
            position,
            erased=JetStreamErasedObservations(js, topology),
            metrics=metrics,
            name=projection.name,
        )
