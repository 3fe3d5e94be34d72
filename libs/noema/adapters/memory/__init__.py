"""In-memory adapters: the knowledge read model (:class:`InMemoryKnowledge`), memory records for
memory operations (:class:`InMemoryRecords`, over the same tables) and an event stream
(:class:`InMemoryEventStream`) that stores events in order and applies each at once to the read
models it feeds — a publisher, a JetStream stream and a caught-up projector in one, so the
application's rules run in milliseconds without servers (the fast test tier).

``reactions`` stand for the workers that decide on events (the ``conflicts`` worker's
:meth:`~noema_conflicts.service.ConflictsHandler.decide`): each new event is offered to them in stream
order after it is applied, and what they return is published in turn, as the worker would.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from noema.adapters.memory.projection import Tables
from noema.adapters.memory.readmodel import InMemoryKnowledge, is_current, terms
from noema.adapters.memory.records import InMemoryRecords
from noema_events import Event

__all__ = [
    "InMemoryEventStream",
    "InMemoryKnowledge",
    "InMemoryRecords",
    "Reaction",
    "Tables",
    "is_current",
    "terms",
]

Reaction = Callable[[Event], Awaitable[Sequence[Event]]]


class InMemoryEventStream:
    """An :class:`noema.ports.EventSink` that keeps the events and projects them at once."""

    def __init__(self, *read_models: InMemoryKnowledge, reactions: Sequence[Reaction] = ()) -> None:
        self.events: list[Event] = []
        """Every event stored, in stream order (sequence = index + 1)."""
        self._ids: set[str] = set()
        self._models = read_models
        self.reactions = list(reactions)

    async def publish(self, events: Sequence[Event]) -> int:
        """Store the events not stored yet (an id is stored once, as ``Nats-Msg-Id`` makes
        JetStream do), apply them, let the reactions answer; returns the last sequence."""
        fresh = [ev for ev in events if ev.id not in self._ids]
        first = len(self.events) + 1
        for ev in fresh:
            self._ids.add(ev.id)
            self.events.append(ev)
        for model in self._models:
            model.apply(fresh, first)
        for ev in fresh:
            for react in self.reactions:
                answer = await react(ev)
                if answer:
                    await self.publish(answer)
        return len(self.events)

    def of_type(self, kind: type[Event]) -> list[Event]:
        """The stored events of one type, in order."""
        return [ev for ev in self.events if isinstance(ev, kind)]
