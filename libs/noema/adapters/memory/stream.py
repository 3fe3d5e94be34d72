"""The event stream in memory (:class:`InMemoryEventStream`): a publisher, a JetStream stream and a
caught-up projector in one."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from noema.adapters.memory.readmodel import InMemoryKnowledge
from noema.adapters.postgres.handlers import Projected
from noema.ports import ConcurrentWrite
from noema.topology import Topology
from noema_events import Event

__all__ = ["InMemoryEventStream", "Projector", "Reaction"]

Reaction = Callable[[Event], Awaitable[Sequence[Event]]]

Projector = Callable[[Sequence[Projected]], Awaitable[None]]
"""What projects each publication's new events, in order, before it returns (the projector's
decision over an in-memory read model: :class:`noema.composition.pipeline.InMemoryPipeline`)."""


class InMemoryEventStream:
    """An :class:`noema.ports.ExpectingSink` that keeps the events and projects them at once.

    Events are stored on the subjects ``topology`` names, as :class:`~noema.adapters.jetstream.EventPublisher`
    stores them, so the audit copy and the optimistic appends see the same subjects. What is stored
    is applied to ``read_models`` at once, and handed to ``projector`` when there is one."""

    def __init__(
        self,
        *read_models: InMemoryKnowledge,
        reactions: Sequence[Reaction] = (),
        topology: Topology | None = None,
        projector: Projector | None = None,
    ) -> None:
        self.events: list[Event] = []
        """Every event stored, in stream order (sequence = index + 1)."""
        self.topology = topology or Topology()
        self._seqs: dict[str, int] = {}
        """Event id → its sequence."""
        self._last: dict[str, int] = {}
        """Subject → the sequence of the last event on it."""
        self._models = read_models
        self._projector = projector
        self.reactions = list(reactions)

    async def publish(self, events: Sequence[Event]) -> int:
        """Store the events not stored yet (an id is stored once, as ``Nats-Msg-Id`` makes
        JetStream do), apply them, let the reactions answer; returns the last sequence."""
        fresh = []
        for ev in events:
            if ev.id in self._seqs:
                continue
            self.events.append(ev)
            item = Projected(len(self.events), self.topology.event_subject(ev), ev)
            self._seqs[ev.id] = self._last[item.subject] = item.seq
            fresh.append(item)
        for model in self._models:
            model.apply(fresh)
        if fresh and self._projector is not None:
            await self._projector(fresh)
        for item in fresh:
            for react in self.reactions:
                answer = await react(item.event)
                if answer:
                    await self.publish(answer)
        return len(self.events)

    async def last_on_subject(self, like: Event) -> tuple[int, Event] | None:
        """The sequence and the event last stored on ``like``'s subject."""
        seq = self._last.get(self.topology.event_subject(like))
        return None if seq is None else (seq, self.events[seq - 1])

    async def publish_expecting(self, event: Event, expected_last: int) -> int:
        """Store ``event`` only if its subject's last sequence is still ``expected_last``."""
        last = self._last.get(self.topology.event_subject(event), 0)
        if last != expected_last:
            raise ConcurrentWrite(f"wrong last sequence: {last}")
        await self.publish([event])
        return self._seqs[event.id]

    def of_type(self, kind: type[Event]) -> list[Event]:
        """The stored events of one type, in order."""
        return [ev for ev in self.events if isinstance(ev, kind)]
