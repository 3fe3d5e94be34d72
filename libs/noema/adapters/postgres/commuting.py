"""Which events of a batch the projection may apply together, without changing what they do.

A batch's events are applied in runs (one handler call, one statement, per run). Applying only
*consecutive* events of one type together costs a statement per event on a real stream, whose types
interleave (a memory is created, embedded, recalled, created, ...). Events that touch different rows
commute, though: applying ``created(m2)`` before ``embedded(m1)`` gives the same tables as the other
way round. So a batch is cut into segments; within a segment each type's events form one run, in
stream order, and the runs follow each other in :data:`ORDER` (the order things usually happen to a
memory: created, embedded, related, recalled, ...; other types after those, as they first appear).
An event joins the current segment only if every event it is thereby moved ahead of touches none of
its rows; otherwise a new segment starts. The result equals applying the events one by one, in
stream order, whatever the batch boundaries — which is what keeps a replay equal to the live
projection. The order only decides how few segments a batch needs, never what it does.

What an event touches is its *footprint*: the keys of the rows its handler reads or writes,
declared where the handler is registered (:meth:`~noema.adapters.postgres.registry.Handlers.touches`).
A type with a handler but no declared footprint is a barrier (it may touch anything); a type without
a handler touches nothing (it is only kept in ``events``, which no handler reads).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from noema.adapters.postgres.registry import ANYTHING, Footprint, Projected
from noema_events import Event
from noema_events import catalog as kinds

__all__ = ["ANYTHING", "ORDER", "Footprint", "segments"]

ORDER: tuple[type[Event], ...] = (
    kinds.MemoryCreated,
    kinds.FactProposed,
    kinds.DomainCreated,
    kinds.WorkspaceConfigured,
    kinds.GrantChanged,
    kinds.PolicyProposed,
    kinds.MemoryEmbedded,
    kinds.RelationshipAdded,
    kinds.MemoryRetrieved,
    kinds.MemoryReinforced,
    kinds.FactMentioned,
    kinds.MemorySuperseded,
    kinds.OperatorAction,
    kinds.PolicySuperseded,
    kinds.ConflictRecorded,
    kinds.WorkingMemoryUpdated,
)
"""The order of a segment's runs: what creates a row before what changes it, so that a batch of a
live system's usual traffic is one segment. Types not listed follow, in order of appearance: a type
whose rows only its own events and barriers touch needs no place here (after every listed type its
run holds none of theirs up)."""
_RANK = {kind: rank for rank, kind in enumerate(ORDER)}


class _Segment:
    """Runs by type, each with the rows its events touch (None: any), and where each run goes."""

    def __init__(self) -> None:
        self.runs: dict[type[Event], list[Projected]] = {}
        self.touched: dict[type[Event], set[Hashable] | None] = {}
        self._slot: dict[type[Event], tuple[int, int]] = {}

    def _slot_of(self, kind: type[Event]) -> tuple[int, int]:
        return self._slot.get(kind) or (_RANK.get(kind, len(ORDER)), len(self._slot))

    def admits(self, kind: type[Event], keys: Footprint) -> bool:
        """Whether an event of ``kind`` touching ``keys`` may join: it is moved ahead of the runs
        placed after its type's, so it must touch none of their rows."""
        if keys == frozenset():
            return True  # touching nothing commutes with everything, a barrier included
        slot = self._slot_of(kind)
        for other, at in self._slot.items():
            if at > slot:
                touched = self.touched[other]
                if touched is None or (touched and (keys is None or not keys.isdisjoint(touched))):
                    return False
        return True

    def add(self, item: Projected, keys: Footprint) -> None:
        kind = type(item.event)
        self._slot[kind] = self._slot_of(kind)
        self.runs.setdefault(kind, []).append(item)
        touched = self.touched.setdefault(kind, set())
        if keys is None:
            self.touched[kind] = None
        elif touched is not None:
            touched.update(keys)

    def in_order(self) -> list[list[Projected]]:
        """The runs in the order they are applied."""
        return [self.runs[kind] for kind in sorted(self.runs, key=self._slot.__getitem__)]


def segments(
    batch: Sequence[Projected], touches: Callable[[Event], Footprint]
) -> list[list[list[Projected]]]:
    """``batch`` (in stream order) as segments of runs: applying the runs in order, each run's
    events in order, gives the same rows as applying the events one by one in stream order.

    ``touches`` gives an event's footprint (the projection's:
    :meth:`~noema.adapters.postgres.registry.Handlers.touches`)."""
    out: list[list[list[Projected]]] = []
    current = _Segment()
    for item in batch:
        keys = touches(item.event)
        if not current.admits(type(item.event), keys):
            out.append(current.in_order())
            current = _Segment()
        current.add(item, keys)
    if current.runs:
        out.append(current.in_order())
    return out
