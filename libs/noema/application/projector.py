"""The projector's decision: the stored events, in stream order, applied to the read model with its
position in one transaction (:class:`ReadModelWriter`), without any transport.

What it keeps (docs/architecture.md, "Decisions without transport"; docs/reliability.md):

- the position only advances and continues the stream: an event at or below it is applied already
  (a redelivery changes nothing); one past the next sequence means delivery skipped part of the
  stream (:class:`StreamGap`: the worker stops, and its restart resumes from the committed position);
- an event the read model refuses (its values break a type, a constraint or a size limit) is skipped
  with the reason, its dead letter stored (:class:`Rejections`) before the skip is committed, the same
  way on every replay, so live and replayed read models stay equal;
- an event whose handling keeps failing is skipped for good (:meth:`Projecting.skip`): its dead
  letter first, then the position moves past it;
- once an erasure is applied, the erased observations it names are deleted
  (:class:`ErasedObservations`: the projector's part of an erasure, docs/privacy.md).

The NATS consumer around it (:class:`noema.runtime.consumer.ProjectionConsumer`) checks the
delivered sequences (:meth:`Projecting.unapplied`), decodes, dead-letters what does not decode (the
projector owns the event stream), carries the traces and acks after the commit; the fence (only the
claim's session can commit) is the writer's connection's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Protocol

import structlog

from noema.application.deliveries import Delivered
from noema.errors import Kind, WorkerFatal
from noema.ports import Projected
from noema_events import ContentErased

__all__ = [
    "ErasedObservations",
    "Projecting",
    "ReadModelWriter",
    "Refused",
    "Rejections",
    "StreamGap",
]

log = structlog.get_logger("noema.projector")


class Rejections(Protocol):
    """Where the projector keeps what it skips, with why (the dead-letter stream)."""

    async def dead_letter(self, seq: int, reason: str, kind: str) -> None:
        """Keep the event stored at ``seq`` as skipped for ``reason`` (``kind``: ``invalid`` or
        ``failed``); stored once however often it is called."""
        ...


Refused = Callable[[Projected, str], Awaitable[None]]
"""Told of each event the read model refused, with the reason, before the skip is committed."""


class ReadModelWriter(Protocol):
    """The read model as the projector writes it
    (:class:`noema.adapters.postgres.projection.ProjectionWriter`,
    :class:`noema.adapters.memory.readmodel.InMemoryKnowledge`)."""

    async def project(self, batch: Sequence[Projected], through: int, refused: Refused | None = None) -> int:
        """In one transaction: apply the events of ``batch`` after the position (skipping, after
        awaiting ``refused``, those the read model refuses) and move the position to ``through``
        (past entries that were not projectable too); returns how many were applied."""
        ...


class ErasedObservations(Protocol):
    """The observations an erasure names, deleted once the erasure is applied."""

    async def delete(self, erasures: Sequence[ContentErased]) -> int:
        """Delete what ``erasures`` name and is still stored; returns how many. Never raises (an
        erasure run again finishes it)."""
        ...


class StreamGap(WorkerFatal):
    """Delivery skipped part of the stream (after an ack timeout); a restart resumes from the position."""


class Projecting:
    """Applies each batch after ``position`` (the read model's committed position) in stream order."""

    def __init__(
        self,
        read_model: ReadModelWriter,
        rejections: Rejections,
        position: int,
        erased: ErasedObservations | None = None,
    ) -> None:
        self._read_model = read_model
        self._rejections = rejections
        self._erased = erased
        self.position = position
        """The last stream sequence applied, as committed."""

    def unapplied(self, seqs: Iterable[int]) -> list[int]:
        """The delivered sequences not applied yet, in order, checked to continue the stream from
        the position without a gap (:class:`StreamGap`)."""
        expected = self.position + 1
        fresh = []
        for seq in seqs:
            if seq < expected:
                continue  # applied already (a redelivery)
            if seq > expected:
                raise StreamGap(f"event stream gap: expected seq {expected}, got {seq}; restart resumes")
            fresh.append(seq)
            expected = seq + 1
        return fresh

    async def __call__(self, batch: Sequence[Delivered[Projected]], through: int) -> None:
        """Apply ``batch`` (the decoded events of the unapplied sequences up to ``through``, in
        order) and move the position to ``through``, in one transaction; then delete what an
        erasure among them names."""
        events = [d.event for d in batch]

        async def refused(projected: Projected, reason: str) -> None:
            await self._rejections.dead_letter(projected.seq, reason, Kind.INVALID.value)

        applied = await self._read_model.project(events, through, refused)
        self.position = through
        log.info("batch projected", events=applied, last_seq=through)
        erasures = [p.event for p in events if isinstance(p.event, ContentErased)]
        if erasures and self._erased is not None:
            await self._erased.delete(erasures)

    async def skip(self, seq: int, reason: str, kind: str) -> None:
        """Skip the event at ``seq`` for good: its dead letter first, then the position moves past
        it (nothing when it is applied already)."""
        if seq <= self.position:
            return
        if seq > self.position + 1:
            raise StreamGap(f"cannot skip seq {seq}: the position is at {self.position}")
        await self._rejections.dead_letter(seq, reason, kind)
        await self._read_model.project([], seq)
        self.position = seq
