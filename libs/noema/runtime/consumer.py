"""The NATS consumer around a worker's decision (:class:`noema.application.deliveries.Decision`):
the one place a worker's messages are decoded, skipped, dead-lettered, traced and acked, so the
decision itself is code over decoded events and ports (and runs in memory the same way).

One batch (:meth:`EventConsumer.__call__`):

1. messages the decision says are done already (``skip``: e.g. at or below attend's mark) are set
   aside undecoded; they are acked with the rest;
2. the others are decoded (``decode``, by default the event a message carries): one that does not
   decode is dead-lettered with the reason when this worker ``owns`` its stream, else skipped (the
   stream's owner dead-letters it, once for everyone);
3. each decoded message's trace context is carried on to what its event causes
   (:mod:`noema.adapters.tracing`);
4. the decision gets the decoded events in stream order with the highest sequence of the batch;
   what it stores is stored before it returns;
5. every message is acked.

:meth:`EventConsumer.reject` is the worker loop's (:class:`noema.runtime.worker.PullWorker`): a
message that keeps failing is dead-lettered and acked.
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
from noema.application.deliveries import Decision, Delivered
from noema.runtime.stopping import release
from noema.runtime.worker import decode_each
from noema_events import Event, decode_event

__all__ = ["Connection", "EventConsumer", "JetStream", "Msg"]

log = structlog.get_logger("noema.consumer")

T = TypeVar("T")


def _event(msg: Msg) -> Event:
    return decode_event(msg.data)


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
        decode: Callable[[Msg], T] = _event,  # type: ignore[assignment]
        skip: Callable[[Msg], Awaitable[bool]] | None = None,
        # Told (messages, how many were not skipped, how many decoded) once a batch is acked.
        done: Callable[[list[Msg], int, int], None] | None = None,
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
            await self._batch(msgs)
            return
        for start in range(0, len(msgs), self._chunk):
            if self._stopping():
                await release(msgs[start:])
                return
            await self._batch(msgs[start : start + self._chunk])

    async def _batch(self, msgs: list[Msg]) -> None:
        with tracing.batch(f"noema.{self.name}") if self._traced else contextlib.nullcontext() as traces:
            fresh = [m for m in msgs if not (self._skip is not None and await self._skip(m))]
            good, malformed = decode_each(fresh, self._decode)
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
            if self._done is not None:
                self._done(msgs, len(fresh), len(batch))

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


def _seq(msg: Msg) -> int:
    return int(msg.metadata.sequence.stream)


def _id(item: Any) -> str:
    return str(item.id)
