"""What a worker's decision is handed: the events of one delivered batch, decoded, each with its
stream sequence — no message, no ack. The NATS consumer around a decision
(:class:`noema.runtime.consumer.EventConsumer`) decodes, acks, dead-letters and carries the traces;
the in-memory runner hands the same events from the in-memory stream."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

__all__ = ["Decision", "Delivered"]

T_co = TypeVar("T_co", covariant=True)
T_contra = TypeVar("T_contra", contravariant=True)


@dataclass(frozen=True, slots=True)
class Delivered(Generic[T_co]):
    """One delivered event, decoded."""

    seq: int
    """Its sequence on the stream it was read from."""
    event: T_co


class Decision(Protocol[T_contra]):
    """A worker's decision over one batch, in stream order: what it stores is stored before it
    returns (the messages are acked after); raising has the batch retried. Any async callable
    returning None (all decided) fits."""

    async def __call__(self, batch: Sequence[Delivered[T_contra]], through: int) -> int | None:
        """Decide ``batch``; ``through`` is the highest sequence the batch covers (malformed and
        skipped messages included; 0 when it covers none). Returns None when the whole batch is
        decided, else how many of its first events are (a stop asked for: the rest comes again)."""
        ...
