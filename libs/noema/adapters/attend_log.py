"""What attend reads and writes on JetStream (:class:`noema.application.attend.AttendLog`): each
mind's last decision and working memory on the event stream, the candidate stream's last
sequence, and fenced atomic batches (:meth:`noema.adapters.jetstream.EventPublisher.publish_fenced`);
and what retrieve adds to attend's candidates (:class:`JetStreamProposals`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from nats.aio.client import Client as NATS

from noema.adapters.jetstream import EventPublisher, Outgoing, last_on_subject, publish_batch, stream_last_seq
from noema.ports import Sealer
from noema.topology import Topology
from noema_events import Event, RecallProposed, decode_event, encode_event

__all__ = ["JetStreamAttendLog", "JetStreamProposals"]


class JetStreamAttendLog:
    """Attend's streams on JetStream; events are published sealed with ``sealer``."""

    def __init__(self, nc: NATS, topology: Topology, sealer: Sealer | None = None) -> None:
        self._js = nc.jetstream()
        self._topology = topology
        self._publisher = EventPublisher(nc, topology, sealer)

    async def last_of(self, kind: str, workspace: str = "*", mind: str = "*") -> tuple[int, Event] | None:
        t = self._topology
        last = await last_on_subject(self._js, t.event_stream, t.event_subject_for(workspace, mind, kind))
        return None if last is None else (last[0], decode_event(last[1]))

    async def candidates_last_seq(self) -> int:
        return await stream_last_seq(self._js, self._topology.observation_stream)

    async def publish_fenced(self, events: Sequence[Event], fences: Mapping[str, int]) -> list[int]:
        return await self._publisher.publish_fenced(events, fences)


class JetStreamProposals:
    """Recall proposals onto the observation stream, on each mind's recall subject
    (:class:`noema.application.retrieve.ProposalSink`), content sealed with ``sealer``."""

    def __init__(self, nc: NATS, topology: Topology, sealer: Sealer | None = None) -> None:
        self._nc = nc
        self._topology = topology
        self._sealer = sealer

    async def propose(self, proposals: Sequence[RecallProposed]) -> None:
        if self._sealer is not None:
            proposals = await self._sealer.seal(proposals)
        t = self._topology
        outgoing = [Outgoing(t.recall_subject(p.workspace, p.mind), encode_event(p), p.id) for p in proposals]
        await publish_batch(self._nc, self._nc.jetstream(), outgoing)
