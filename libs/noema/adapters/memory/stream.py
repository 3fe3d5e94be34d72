"""The event stream in memory (:class:`InMemoryEventStream`): a publisher, a JetStream stream and a
caught-up projector in one."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from noema.adapters.memory.readmodel import InMemoryKnowledge
from noema.adapters.postgres.handlers import Projected
from noema.runtime.topology import Topology
from noema_events import Event

__all__ = ["InMemoryEventStream", "Reaction"]

Reaction = Callable[[Event], Awaitable[Sequence[Event]]]


class InMemoryEventStream:
    """An :class:`noema.ports.EventSink` that keeps the events and projects them at once.

    Events are stored on the subjects ``topology`` names, as :class:`~noema.adapters.jetstream.EventPublisher`
    stores them, so the audit copy names the same subjects."""

    def __init__(
        self,
        *read_models: InMemoryKnowledge,
        reactions: Sequence[Reaction] = (),
        topology: Topology | None = None,
    ) -> None:
        self.events: list[Event] = []
        """Every event stored, in stream order (sequence = index + 1)."""
        self.topology = topology or Topology()
        self._ids: set[str] = set()
        self._models = read_models
        self.reactions = list(reactions)

    async def publish(self, events: Sequence[Event]) -> int:
        """Store the events not stored yet (an id is stored once, as ``Nats-Msg-Id`` makes
        JetStream do), apply them, let the reactions answer; returns the last sequence."""
        fresh = []
        for ev in events:
            if ev.id in self._ids:
                continue
            self._ids.add(ev.id)
            self.events.append(ev)
            fresh.append(Projected(len(self.events), self.topology.event_subject(ev), ev))
        for model in self._models:
            model.apply(fresh)
        for item in fresh:
            for react in self.reactions:
                answer = await react(item.event)
                if answer:
                    await self.publish(answer)
        return len(self.events)

    def of_type(self, kind: type[Event]) -> list[Event]:
        """The stored events of one type, in order."""
        return [ev for ev in self.events if isinstance(ev, kind)]
