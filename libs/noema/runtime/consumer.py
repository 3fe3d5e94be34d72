"""The NATS consumer around a worker's decision (:class:`noema.application.deliveries.Decision`):
the one place a worker's messages are decoded, skipped, dead-lettered, traced and acked, so the
decision itself is code over decoded events and ports (and runs in memory the same way).

One batch (:meth:`EventConsumer.__call__`):

1. messages the decision says are done already (``skip``, told each one's stream sequence and
   subject: e.g. at or below attend's mark) are set aside undecoded; they are acked with the rest;
2. the others are decoded (``decode``, told each one's bytes and subject; by default the event they
   carry): one that does not decode is dead-lettered with the reason when this worker ``owns`` its
   stream, else skipped (the stream's owner dead-letters it, once for everyone);
3. each decoded message's trace context is carried on to what its event causes
   (:mod:`noema.adapters.tracing`);
4. the decision gets the decoded events in stream order with the highest sequence of the batch;
   what it stores is stored before it returns;
5. every message is acked; ``done`` is told the batch's stream sequences, how many were not
   skipped and how many decoded.

So the hooks a worker gives its consumer see sequences, subjects and bytes, never a message: the
worker modules hold no transport (tests/unit/test_layers.py checks that none imports ``Msg``).

:meth:`EventConsumer.reject` is the worker loop's (:class:`noema.runtime.worker.PullWorker`): a
message that keeps failing is dead-lettered and acked.

The projector's is :class:`ProjectionConsumer`, around :class:`noema.application.projector.Projecting`:
its stream is one ordered sequence, so it checks the delivered sequences with the decision before
decoding, and acks the batch's last message once its position is committed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

import structlog
from nats.aio.client import Client as Connection
from nats.aio.msg import Msg
from nats.js import JetStreamContext as JetStream

from noema.adapters import tracing
from noema.adapters.jetstream import DeadLetters
from noema.adapters.metrics import Metrics
from noema.application.deliveries import Decision, Delivered
from noema.application.projector import ErasedObservations, Projecting, ReadModelWriter
from noema.ports import Projected
from noema.runtime.stopping import release
from noema.runtime.worker import decode_each
from noema.topology import Topology
from noema_events import Event, EventDecodeError, decode_event

__all__ = ["Connection", "EventConsumer", "JetStream", "Msg", "ProjectionConsumer"]

log = structlog.get_logger("noema.consumer")

T = TypeVar("T")


def _event(data: bytes, subject: str) -> Event:
    return decode_event(data)


class EventConsumer(Generic[T]):
    """Hands each batch's decoded events to ``decide`` (see the module doc).

    How a batch is acked: all at once after the decision (the default); ``one_by_one``: each message
    as soon as its event is decided; ``chunk``: in chunks of that many messages, each decided and
    acked in turn, a stop (``stopping``) honoured between two (the rest is released, redelivered at
    once). A decision that returns a number handled only the first that many events: the messages
    of the others are released (a stop asked for mid-batch)."""

    def __init__(
        self,
        name: str,
        decide: Decision[T],
        dead_letters: DeadLetters | None,
        *,
        owns: bool,
        one_by_one: bool = False,
        chunk: int | None = None,
        stopping: Callable[[], bool] = lambda: False,
        traced: bool = True,
        decode: Callable[[bytes, str], T] = _event,  # type: ignore[assignment]
        skip: Callable[[int, str], Awaitable[bool]] | None = None,
        # Told (stream sequences, how many were not skipped, how many decoded) once a batch is acked.
        done: Callable[[list[int], int, int], None] | None = None,
    ) -> None:
        self.name = name
        self.decision = decide
        self._dead_letters = dead_letters
        self._owns = owns
        self._one_by_one = one_by_one
        self._chunk = chunk
        self._stopping = stopping
        self._traced = traced
        self._decode = decode
        self._skip = skip
        self._done = done

    async def __call__(self, msgs: list[Msg]) -> None:
        """Decode, decide, then ack; each event stored carries the trace context of the message
        that caused it."""
        if self._chunk is None:
            counts = await self._batch(msgs)
        else:
            counts = (0, 0)
            for start in range(0, len(msgs), self._chunk):
                if self._stopping():
                    await release(msgs[start:])
                    break
                fresh, decoded = await self._batch(msgs[start : start + self._chunk])
                counts = (counts[0] + fresh, counts[1] + decoded)
        if self._done is not None:
            self._done([_seq(m) for m in msgs], *counts)

    async def _batch(self, msgs: list[Msg]) -> tuple[int, int]:
        """One batch (or chunk): how many messages were not skipped, and how many decoded."""
        with tracing.batch(f"noema.{self.name}") if self._traced else contextlib.nullcontext() as traces:
            fresh = [m for m in msgs if not (self._skip is not None and await self._skip(_seq(m), m.subject))]
            good, malformed = decode_each(fresh, lambda m: self._decode(m.data, m.subject))
            for msg, exc in malformed:
                if self._owns and self._dead_letters is not None:
                    await self._dead_letters.write(msg, str(exc))
                else:
                    log.warning("undecodable event skipped", worker=self.name, seq=_seq(msg))
            batch = [Delivered(_seq(msg), item) for msg, item in good]
            for msg, item in good:
                if traces is not None:
                    traces.carry(_id(item), msg.headers, **{"messaging.destination.name": msg.subject})
            if self._one_by_one:
                await self._each(msgs, good)
            else:
                handled = await self.decision(batch, _seq(fresh[-1]) if fresh else 0)
                left = [] if handled is None else [msg for msg, _ in good[handled:]]
                unhandled = {id(msg) for msg in left}
                for msg in msgs:
                    if id(msg) not in unhandled:
                        await msg.ack()
                await release(left)
        return len(fresh), len(batch)

    async def _each(self, msgs: list[Msg], good: list[tuple[Msg, T]]) -> None:
        """One by one: what did not decode (or was skipped) is acked first, then each message is
        acked as soon as its event is decided (a retried batch starts after the last decided)."""
        decided = {id(msg) for msg, _ in good}
        for msg in msgs:
            if id(msg) not in decided:
                await msg.ack()
        for msg, item in good:
            await self.decision([Delivered(_seq(msg), item)], _seq(msg))
            await msg.ack()

    async def reject(self, msg: Msg, reason: str, kind: str) -> None:
        """Dead-letter a message that cannot be decided (without dead letters: only log it), and
        ack it."""
        if self._dead_letters is not None:
            await self._dead_letters.reject(msg, reason, kind)
        else:
            log.warning("message rejected", worker=self.name, seq=_seq(msg), kind=kind, reason=reason[:300])
            await msg.ack()


class ProjectionConsumer:
    """The NATS consumer around the projector's decision (:attr:`projecting`, over ``read_model``
    from ``position``): checks the delivered sequences, decodes (what does not decode is
    dead-lettered, the projector owning the event stream: written before the skip is committed),
    carries each event's trace into its projection (when spans are recorded), hands the decision the
    batch, and acks once the position is committed; the decision's dead letters name the messages
    of the batch it is deciding."""

    def __init__(
        self,
        read_model: ReadModelWriter,
        topology: Topology,
        dead_letters: DeadLetters,
        position: int,
        *,
        erased: ErasedObservations | None = None,
        metrics: Metrics | None = None,
        name: str = "read_model",
    ) -> None:
        self._topology = topology
        self._dead_letters = dead_letters
        self.projecting = Projecting(read_model, self, position, erased)
        # The read model's position as committed (a gauge: where the projection is, for scraping).
        self._position = (metrics or Metrics()).projection_position.labels(name)
        self._position.set(position)
        self._deciding: dict[int, Msg] = {}
        """Sequence → message of what the decision is deciding (what its dead letters name)."""

    async def __call__(self, msgs: list[Msg]) -> None:
        """Decode, apply in one transaction, ack; when spans are recorded, each event's projection
        joins the event's trace (:mod:`noema.adapters.tracing`)."""
        unapplied = set(self.projecting.unapplied(_seq(m) for m in msgs))
        fresh = [m for m in msgs if _seq(m) in unapplied]
        if fresh:
            with tracing.batch("noema.project", publishes=False) as traces:
                await self._apply(fresh, traces)
        await msgs[-1].ack()

    async def _apply(self, fresh: list[Msg], traces: tracing.Batch) -> None:
        batch: list[Delivered[Projected]] = []
        for msg in fresh:
            seq = _seq(msg)
            try:
                event, recorded = self._topology.recorded_on_subject(msg.data, msg.subject)
            except EventDecodeError as exc:
                # Kept with its reason and skipped, the same way on every replay, so live and
                # replayed read models stay equal. Written before the skip is committed.
                await self._dead_letters.write(msg, str(exc))
                continue
            batch.append(Delivered(seq, Projected(seq, msg.subject, event, recorded)))
            if tracing.recording():
                traces.carry(event.id, msg.headers, **{"noema.event.type": event.type, "noema.seq": seq})
        await self._deciding_on(fresh, lambda: self.projecting(batch, _seq(fresh[-1])))

    async def reject(self, msg: Msg, reason: str, kind: str) -> None:
        """Skip one event for good: its dead letter first, then the position moves past it, then the ack."""
        await self._deciding_on([msg], lambda: self.projecting.skip(_seq(msg), reason, kind))
        await msg.ack()

    async def _deciding_on(self, msgs: list[Msg], decide: Callable[[], Awaitable[None]]) -> None:
        self._deciding = {_seq(m): m for m in msgs}
        try:
            await decide()
        finally:
            self._deciding = {}
        self._position.set(self.projecting.position)

    async def dead_letter(self, seq: int, reason: str, kind: str) -> None:
        """The decision's dead letter (:class:`noema.application.projector.Rejections`): of the
        message at ``seq`` of what it is deciding."""
        await self._dead_letters.write(self._deciding[seq], reason, kind)


def _seq(msg: Msg) -> int:
    return int(msg.metadata.sequence.stream)


def _id(item: Any) -> str:
    return str(item.id)
