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

What an event touches is its *footprint*: the keys of the rows its handler reads or writes. A type
with a handler but no declared footprint is a barrier (it may touch anything); a type without a
handler touches nothing (it is only kept in ``events``, which no handler reads).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from noema.adapters.postgres.registry import Projected
from noema_events import Event
from noema_events import catalog as kinds

__all__ = ["ANYTHING", "ORDER", "Footprint", "footprint", "segments"]

Footprint = frozenset[Hashable] | None
"""The keys of the rows an event's handler reads or writes; None: it may touch any row."""

ANYTHING: Footprint = None
"""The footprint of a barrier."""

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
    kinds.NotesUpdated,
)
"""The order of a segment's runs: what creates a row before what changes it, so that a batch of a
live system's usual traffic is one segment. Types not listed follow, in order of appearance."""
_RANK = {kind: rank for rank, kind in enumerate(ORDER)}


def footprint(event: Event) -> Footprint:
    """The rows the read-model handler of ``event`` reads or writes (:data:`ANYTHING` when not
    declared: a tick of an earlier release rewrites a whole workspace, and a new handler is a
    barrier until its footprint is written here).

    A memory's key stands for its row and everything hanging off it that a handler checks: its
    vectors (which need it to exist), the edges whose ends it is (a foreign key reads it).
    """
    match event:
        case (
            kinds.MemoryCreated()
            | kinds.FactProposed()
            | kinds.MemoryEmbedded()
            | kinds.MemoryRetrieved()
            | kinds.MemoryReinforced()
            | kinds.FactMentioned()
            | kinds.MemorySuperseded()
        ):
            return frozenset({("memory", event.payload.memory_id)})
        case kinds.RelationshipAdded():
            edge = event.payload
            return frozenset(
                {("memory", edge.from_id), ("memory", edge.to_id), ("relationship", edge.relationship_id)}
            )
        case kinds.OperatorAction():
            target = event.payload.target_id
            return frozenset({("memory", target)}) if target else frozenset()
        case kinds.WorkingMemoryUpdated():
            return frozenset({("working_memory", event.workspace, event.mind)})
        case kinds.NotesUpdated():
            return frozenset({("notes", event.workspace, event.payload.agent)})
        case kinds.DomainCreated():
            return frozenset({("domain", event.workspace, event.payload.domain)})
        case kinds.GrantChanged():
            return frozenset({("grant", event.workspace, event.payload.role, event.payload.domain)})
        case kinds.WorkspaceConfigured():
            return frozenset({("workspace", event.workspace)})
        case kinds.PolicyProposed() | kinds.PolicySuperseded():
            return frozenset({("policy", event.payload.policy_id)})
        case kinds.ConflictRecorded():
            return frozenset({("conflict", event.payload.conflict_id)})
        case kinds.ActivationDecayed() if not event.payload.rewrite:
            return frozenset()  # a tick only lists what faded: no row changes
    return ANYTHING


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

    ``touches`` gives an event's footprint (see :func:`footprint`)."""
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
