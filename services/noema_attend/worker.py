"""Attend worker: observations in, ``attention.decided`` and ``memory.created`` events out.

Each fetched batch is one attention cycle. Malformed observations are dead-lettered with the reason
(never turned into memory) and the worker keeps going; events are stored before the observations
are acked, and their ids are derived from the observations, so a crash between the two is harmless.

A cycle's events are stored all or none (one atomic batch: a cycle too big for one is split into
smaller cycles), and its decisions record the highest stream sequence they cover
(``through_seq``). Cycles are decided in stream order, so everything up to the mark is decided. On
start the worker reads the mark from the last ``attention.decided`` and recreates its consumer to
deliver from just after it, in order (a crashed process's unacked candidates would otherwise come
back only after their ack wait, behind newer ones); a candidate at or below the mark that arrives
anyway is acked without being decided again. So a redelivered observation never yields a second,
different decision, whatever was killed when.

With partitions (``NOEMA_PARTITIONS`` > 1) each partition has its own consumer, and the decisions of
several partitions interleave on the event stream, so the stream-wide mark says nothing about one
partition. Each mind's own mark is exact instead: a cycle decides its partition's candidates in
stream order, so every candidate of a mind at or below the ``through_seq`` of that mind's last
``attention.decided`` was decided. The handler of a partition reads that mark with the mind's
working memory, the first time it meets the mind, and acks a candidate at or below it without
deciding it again; it also acks, undecided, a candidate of a workspace of another partition (read
from the subjects of an earlier partition count, see noema.adapters.partition_consumers).

Each mind's mark is kept with a fence: the stream sequence of the mind's last decision, as this
instance read or stored it. A cycle's decisions are published with it as the expected last sequence
of their subjects (one ``attention.decided`` per mind decided), so the server stores the cycle only
if no other instance decided any of its minds since — a former owner that stalled after its claim
check cannot store a stale cycle, and a new owner whose cycle lost to one reads the minds again and
decides what is left (docs/reliability.md, "Claims, failover and fencing").

The decision is :class:`noema.application.attend.Attention`, code over decoded candidates and the
streams it reads (a port: JetStream here, the in-memory stream in the fast tier);
:class:`AttendHandler` is the NATS consumer around it (:class:`noema.runtime.consumer.EventConsumer`):
it skips what is decided, validates and dead-letters, carries traces and acks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import structlog

from noema.adapters.attend_log import JetStreamAttendLog
from noema.adapters.jetstream import DeadLetters
from noema.adapters.metrics import Metrics
from noema.application.attend import Attention, Candidate
from noema.application.attend import decided_through as _decided_through
from noema.domain.attention import AttentionConfig
from noema.ports import Sealer
from noema.runtime.consumer import Connection, EventConsumer
from noema.topology import Topology
from noema_events import EventDecodeError, ObservationRecorded, RecallProposed, decode_event

__all__ = ["AttendHandler", "decided_through"]

log = structlog.get_logger("noema.attend")


def _utcnow() -> datetime:
    return datetime.now(UTC)


async def decided_through(nc: Connection, topology: Topology) -> int:
    """The highest observation-stream sequence already decided, from the last stored decision (0
    when there is none, or it was written before decisions recorded it)."""
    return await _decided_through(JetStreamAttendLog(nc, topology))


class AttendHandler(EventConsumer[Candidate]):
    """Handles one batch of observation messages (one attention cycle, :attr:`attention`)."""

    def __init__(
        self,
        nc: Connection,
        topology: Topology,
        config: AttentionConfig,
        clock: Callable[[], datetime] = _utcnow,
        decided: int | None = None,
        fence: Callable[[], Awaitable[None]] | None = None,
        sealer: Sealer | None = None,
        metrics: Metrics | None = None,
        partition: int | None = None,
    ) -> None:
        self._topology = topology
        # Partitioned: the partition handled (see the module doc).
        self._partition = partition
        self.attention = Attention(
            JetStreamAttendLog(nc, topology, sealer),
            config,
            clock,
            decided=decided,
            fence=fence,
            sealer=sealer,
            partitioned=partition is not None,
        )
        # attend owns the observation stream: it dead-letters what does not decode.
        super().__init__(
            "attend",
            self.attention,
            DeadLetters(nc.jetstream(), topology, "attend", metrics),
            owns=True,
            decode=self._validate,
            skip=self._decided,
            done=self._logged,
        )

    async def _decided(self, seq: int, subject: str) -> bool:
        """Candidates up to the mark were decided before a restart (their events are stored), and
        a candidate of another partition's workspace is not this handler's."""
        return seq <= await self.attention.mark() or self._elsewhere(subject)

    def _elsewhere(self, subject: str) -> bool:
        """A candidate of a workspace of another partition (stored under an earlier layout)."""
        if self._partition is None:
            return False
        workspace = self._topology.workspace_of_subject(subject) or ""
        return self._topology.partition(workspace) != self._partition

    def _validate(self, data: bytes, subject: str) -> Candidate:
        event = decode_event(data)
        if isinstance(event, RecallProposed):
            expected = self._topology.recall_subject(event.workspace, event.mind)
        elif isinstance(event, ObservationRecorded):
            expected = self._topology.observation_subject(event.workspace, event.mind)
        else:
            raise EventDecodeError(f"expected observation.recorded or recall.proposed, got {event.type}")
        if self._topology.published_subject(subject) != expected:
            raise EventDecodeError(f"subject {subject} does not match the observation's scope {expected}")
        return event

    def _logged(self, seqs: list[int], fresh: int, valid: int) -> None:
        log.info(
            "cycle decided",
            observations=len(seqs),
            redelivered_decided=len(seqs) - fresh,
            valid=valid,
            admitted=self.attention.admitted,
            first_seq=seqs[0],
            last_seq=seqs[-1],
        )
