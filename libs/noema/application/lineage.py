"""Why an id is what it is: the events that name it, the causes they follow from and what they
caused, through causation and correlation ids (``noemactl why``, ``GET /v1/why/{id}``).

An id may be an event's, a memory's or fact's, a policy's, an observation's or anything an event
carries. The events that *name* it (as id, causation or correlation id, or anywhere in the payload)
are its history; each one's parent is found from its causation id, by these rules in order:

1. an event with that id;
2. an observation or a recall proposal (they travel on the observation stream, so no event is
   theirs): a candidate some ``attention.decided`` among the steps decided, a source observation of
   a ``memory.created`` among them, or what a ``memory.retrieved`` was caused by — a step of its own,
   carrying the attention decision about it;
3. the first event of the correlation it names, when that came earlier (a ``memory.superseded`` is
   caused by the winning fact's id, which is the correlation its ``fact.proposed`` starts);
4. otherwise a ``cause`` step: an id nothing recorded explains.

Causes are followed up to the first ones; effects down from the events that name the id (the other
effects of their causes are not its history). The gathering reads the read model
(:class:`noema.ports.EventReads`); :func:`lineage` makes the steps from what was read, without I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from noema.application.audit_views import StepKind, Subject, Why, WhyStep
from noema.application.reads import event_records
from noema.application.views import EventRecord
from noema.errors import InvalidQuery, NotFound
from noema.ids import id_prefix
from noema.ports import MemoryReads

__all__ = ["MAX_HOPS", "lineage", "name_of", "subject_of", "why"]

Link = Literal["causation", "correlation"]

MAX_HOPS = 16
"""How many causes up, and effects down, are followed from the events that name the id."""


def name_of(event_type: str) -> str:
    """An event type without its version (``memory.created.v1`` → ``memory.created``)."""
    return event_type.rsplit(".v", 1)[0]


def _by_seq(events: Iterable[EventRecord]) -> list[EventRecord]:
    return sorted(events, key=lambda e: e.seq)


# --- gathering ----------------------------------------------------------------------------------


async def _naming(
    reads: MemoryReads, ref: str, workspace: str | None, limit: int
) -> tuple[str, list[EventRecord]]:
    """The full id ``ref`` stands for and the events naming it (of one workspace)."""
    if workspace is None:
        places = await reads.reference_workspaces(ref)
        if len(places) > 1:
            raise InvalidQuery(f"{ref} is recorded in several workspaces ({', '.join(places)}): give one")
        workspace = places[0] if places else None
    found = event_records(await reads.events_naming(workspace, ref, limit))
    if not found and id_prefix(ref) is not None:
        try:  # a unique prefix of a memory's, a policy's or an event's id, as listings show them
            full = await reads.resolve_reference(ref, workspace)
        except LookupError as exc:
            raise InvalidQuery(str(exc)) from None
        if full is not None:
            ref = full
            found = event_records(await reads.events_naming(workspace, ref, limit))
    if not found:
        where = f" in workspace {workspace}" if workspace else ""
        raise NotFound(
            f"nothing is recorded about {ref}{where}: no event, memory, fact or policy has this id"
        )
    places = sorted({e.workspace for e in found})
    if len(places) > 1:
        raise InvalidQuery(f"{ref} is recorded in several workspaces ({', '.join(places)}): give one")
    return ref, found


async def _causes(reads: MemoryReads, workspace: str, named: Sequence[EventRecord]) -> list[EventRecord]:
    """The events the causation ids point to, up to the first causes: each named event, else the
    first event of the correlation it names (rules 1 and 3; :func:`lineage` picks)."""
    known = {e.id for e in named}
    pending = list(named)
    asked: set[str] = set()
    found: list[EventRecord] = []
    for _ in range(MAX_HOPS):
        causes = {e.causation_id for e in pending if e.causation_id and e.causation_id not in known} - asked
        if not causes:
            break
        asked |= causes
        parents = event_records(await reads.events_with_ids(workspace, sorted(causes)))
        unnamed = sorted(causes - {p.id for p in parents})
        starts = event_records(await reads.correlation_starts(workspace, unnamed)) if unnamed else []
        pending = [e for e in (*parents, *starts) if e.id not in known]
        known |= {e.id for e in pending}
        found += pending
    return found


async def _effects(
    reads: MemoryReads, workspace: str, ref: str, named: Sequence[EventRecord], budget: int
) -> tuple[list[EventRecord], bool]:
    """The events caused by the id, by the events naming it, or by the correlations they start, and
    so on down; whether ``budget`` cut them short."""
    known = {e.id for e in named}
    frontier = {ref, *known, *(e.correlation_id for e in named if e.causation_id is None)}
    found: list[EventRecord] = []
    for _ in range(MAX_HOPS):
        if not frontier or len(found) >= budget:
            break
        caused = event_records(await reads.events_caused_by(workspace, sorted(frontier), budget - len(found)))
        fresh = [e for e in caused if e.id not in known]
        known |= {e.id for e in fresh}
        found += fresh
        frontier = {e.id for e in fresh}
    return found, len(found) >= budget


async def why(reads: MemoryReads, ref: str, workspace: str | None = None, limit: int = 500) -> Why:
    """The chain of events behind ``ref`` (in ``workspace`` when given, else the one that has it).

    Raises :class:`NotFound` when nothing names it, :class:`InvalidQuery` when several workspaces do
    (or a prefix matches several memories).
    """
    full, named = await _naming(reads, ref, workspace, limit)
    place = named[0].workspace
    causes = await _causes(reads, place, named)
    effects, cut = await _effects(reads, place, full, named, limit)
    steps = lineage(full, named, [*causes, *effects])
    return Why(
        id=full,
        subject=subject_of(full, named),
        workspace=place,
        steps=steps,
        truncated=cut or len(named) >= limit,
    )


# --- the steps, from what was read --------------------------------------------------------------


@dataclass(frozen=True)
class _Candidate:
    kind: StepKind
    decision: dict[str, Any] | None


def _candidates(events: Sequence[EventRecord]) -> dict[str, _Candidate]:
    """Observations and recall proposals the events know of: attention's candidates (with the
    decision about each) and memories' source observations."""
    found: dict[str, _Candidate] = {}
    for e in events:
        name = name_of(e.type)
        if name == "attention.decided":
            for d in e.payload.get("decisions", []):
                if isinstance(d, dict) and isinstance(d.get("candidate_id"), str):
                    kind: StepKind = "recall" if d.get("candidate_kind") == "recall" else "observation"
                    decision = {**d, "event_id": e.id, "seq": e.seq}
                    found.setdefault(d["candidate_id"], _Candidate(kind, decision))
        elif name == "memory.created":
            for oid in e.payload.get("source_observation_ids", []):
                if isinstance(oid, str):
                    found.setdefault(oid, _Candidate("observation", None))
    return found


@dataclass(frozen=True)
class _Parent:
    id: str
    link: Link
    cause: StepKind | None
    """Set when the parent is no event: the kind of step it is."""


class _Graph:
    """The parent of each event by the module's rules, over the events read."""

    def __init__(self, events: Sequence[EventRecord]) -> None:
        self.events: dict[str, EventRecord] = {}
        for e in _by_seq(events):
            self.events.setdefault(e.id, e)  # an id stored twice (beyond the duplicate window): the first
        self.candidates = _candidates(list(self.events.values()))
        self.starts: dict[str, EventRecord] = {}
        for e in self.events.values():
            self.starts.setdefault(e.correlation_id, e)

    def parent(self, e: EventRecord) -> _Parent | None:
        cause = e.causation_id
        if not cause or cause == e.id:
            return None
        if cause in self.events:
            return _Parent(cause, "causation", None)
        candidate = self.candidates.get(cause)
        if candidate is not None:
            return _Parent(cause, "causation", candidate.kind)
        if name_of(e.type) == "memory.retrieved":
            return _Parent(cause, "causation", "recall")
        start = self.starts.get(cause)
        if start is not None and start.seq < e.seq:
            return _Parent(start.id, "correlation", None)
        return _Parent(cause, "causation", "cause")


def _kept(graph: _Graph, named: Sequence[EventRecord], effects: Sequence[str]) -> set[str]:
    """The events that are steps: those naming the id, their effects, and every cause up from them."""
    kept = {e.id for e in named} | set(effects)
    for start in list(kept):
        e: EventRecord | None = graph.events.get(start)
        for _ in range(len(graph.events)):
            up = graph.parent(e) if e is not None else None
            if up is None or up.cause is not None or up.id in kept:
                break
            kept.add(up.id)
            e = graph.events[up.id]
    return kept


def lineage(ref: str, named: Sequence[EventRecord], others: Sequence[EventRecord]) -> list[WhyStep]:
    """The steps behind ``ref`` in stream order (a cause that is no event right before its first
    effect), from the events that name it and the other events read (causes and effects; a cause
    that explains none of the steps is left out)."""
    graph = _Graph([*named, *others])
    effects = [e.id for e in others if _descends(graph, e, {n.id for n in named} | {ref})]
    kept = _kept(graph, named, effects)
    steps: list[tuple[tuple[int, int, str], WhyStep]] = []
    causes: dict[str, tuple[StepKind, int, str]] = {}
    """A cause that is no event → its kind, and the sequence and correlation of its first effect."""
    for event_id in kept:
        e = graph.events[event_id]
        up = graph.parent(e)
        steps.append(((e.seq, 0, e.id), _event_step(e, up)))
        if up is not None and up.cause is not None:
            first = causes.get(up.id)
            if first is None or e.seq < first[1]:
                causes[up.id] = (up.cause, e.seq, e.correlation_id)
    subject = graph.candidates.get(ref)
    if subject is not None and subject.decision and ref not in causes and ref not in graph.events:
        causes[ref] = (subject.kind, int(subject.decision["seq"]), ref)  # decided, caused nothing here
    for cause_id, (kind, seq, correlation) in causes.items():
        candidate = graph.candidates.get(cause_id)
        steps.append(
            (
                (seq, -1, cause_id),
                _cause_step(cause_id, kind, _cause_parent(cause_id, correlation, kept, causes), candidate),
            )
        )
    return [step for _, step in sorted(steps, key=lambda s: s[0])]


def _cause_parent(
    cause_id: str, correlation: str, kept: set[str], causes: dict[str, tuple[StepKind, int, str]]
) -> str | None:
    """What a cause that is no event follows from: the step its first effect's correlation names
    (an event, or a cause that starts its own correlation), if that is another step."""
    if correlation == cause_id:
        return None
    if correlation in kept:
        return correlation
    other = causes.get(correlation)
    return correlation if other is not None and other[2] == correlation else None


def _cause_step(cause_id: str, kind: StepKind, parent: str | None, candidate: _Candidate | None) -> WhyStep:
    return WhyStep(
        id=cause_id,
        kind=kind,
        parent=parent,
        link="correlation" if parent else None,
        event=None,
        decision=candidate.decision if candidate else None,
    )


def _descends(graph: _Graph, e: EventRecord, roots: set[str]) -> bool:
    """Whether walking up from ``e`` reaches one of ``roots`` (an event naming the id, or the id)."""
    node: EventRecord | None = e
    for _ in range(MAX_HOPS + 1):
        up = graph.parent(node) if node is not None else None
        if up is None:
            return False
        if up.id in roots:
            return True
        node = graph.events.get(up.id)
    return False


def _event_step(e: EventRecord, up: _Parent | None) -> WhyStep:
    return WhyStep(
        id=e.id,
        kind="event",
        parent=up.id if up else None,
        link=up.link if up else None,
        event=e,
        decision=None,
    )


_CREATES: dict[str, tuple[str, Subject]] = {
    "memory.created": ("memory_id", "memory"),
    "fact.proposed": ("memory_id", "fact"),
    "policy.proposed": ("policy_id", "policy"),
}


def subject_of(ref: str, named: Sequence[EventRecord]) -> Subject:
    """What ``ref`` is, as the events naming it tell."""
    if any(e.id == ref for e in named):
        return "event"
    for e in named:
        creates = _CREATES.get(name_of(e.type))
        if creates and e.payload.get(creates[0]) == ref:
            return creates[1]
    candidate = _candidates(named).get(ref)
    if candidate is not None:
        return "recall" if candidate.kind == "recall" else "observation"
    if any(e.causation_id == ref and name_of(e.type) == "memory.created" for e in named):
        return "observation"
    return "reference"
