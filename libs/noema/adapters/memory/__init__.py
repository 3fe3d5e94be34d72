"""In-memory adapters: the knowledge read model (:class:`InMemoryKnowledge`), memory records for
memory operations and the operators' reads (:class:`InMemoryRecords`, :class:`InMemoryReads`, over
the same tables) and an event stream (:class:`InMemoryEventStream`) that stores events in order,
with optimistic appends on a subject, and applies each at once to the read models it feeds — a
publisher, a JetStream stream and a caught-up projector in one, so the application's rules run in
milliseconds without servers (the fast test tier).

``reactions`` stand for the workers that decide on events (the ``conflicts`` worker's
:meth:`~noema_conflicts.service.ConflictsHandler.decide`): each new event is offered to them in stream
order after it is applied, and what they return is published in turn, as the worker would.
"""

from __future__ import annotations

from noema.adapters.memory.projection import Tables
from noema.adapters.memory.readmodel import InMemoryKnowledge, is_current, terms
from noema.adapters.memory.reads import InMemoryReads
from noema.adapters.memory.records import InMemoryRecords
from noema.adapters.memory.stream import InMemoryEventStream, Reaction

__all__ = [
    "InMemoryEventStream",
    "InMemoryKnowledge",
    "InMemoryReads",
    "InMemoryRecords",
    "Reaction",
    "Tables",
    "is_current",
    "terms",
]
