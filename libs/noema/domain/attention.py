"""Attention: candidates compete for a limited number of admissions (requirements §6), as pure functions.

A cycle takes the observations fetched together, groups them by (workspace, mind), scores each on
salience, novelty, importance, credibility and context relevance to the mind's working memory,
admits the best ones above the threshold up to the capacity, and returns the events that record the
decision: one ``attention.decided`` per group, a ``memory.created`` per admitted observation, and
the mind's new working memory (admitted items enter it; it holds at most 9 by default and decays,
see :class:`noema.domain.knowledge.WorkingMemory`). Event ids are derived from the inputs, so a
redelivered observation yields the same events and JetStream's duplicate window stores them once.
"""

from __future__ import annotations

import math
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, NamedTuple

from noema.domain.dynamics import ACTIVATION_FLOOR, HALF_LIFE_DAYS, RECALL_BOOST, initial_confidence
from noema.domain.knowledge import (
    DEFAULT_WM_CAPACITY,
    WorkingMemory,
    WorkingMemoryEntry,
    context_relevance,
    session_digest,
)
from noema.ids import derive_id
from noema_events import (
    AttentionDecided,
    AttentionDecidedPayload,
    AttentionDecision,
    Event,
    MemoryCreated,
    MemoryCreatedPayload,
    MemoryRetrieved,
    MemoryRetrievedPayload,
    ObservationRecorded,
    RecallProposed,
    RelationshipAdded,
    RelationshipAddedPayload,
    SessionHead,
    WorkingMemoryItem,
    WorkingMemoryUpdated,
    WorkingMemoryUpdatedPayload,
)
from noema_events.vocabulary import CHANNEL_CREDIBILITY

__all__ = [
    "AttentionConfig",
    "Candidate",
    "Scored",
    "decide_cycle",
    "estimate_salience",
    "memory_id_for",
    "score",
    "score_recall",
    "working_memory_of",
]

ACTOR = "attend"
GIST_CHARS = 200


@dataclass(frozen=True)
class AttentionConfig:
    """Admission threshold, admissions per cycle and per (workspace, mind), and feature weights."""

    threshold: float = 0.5
    capacity: int = 256
    weights: dict[str, float] = field(
        default_factory=lambda: {
            "salience": 0.40,
            "novelty": 0.25,
            "importance": 0.15,
            "credibility": 0.20,
            "context": 0.10,
        }
    )
    """Context relevance is a bonus on top of the other four (which sum to 1): with an empty working
    memory nothing changes; a candidate about what the mind is holding gains up to 0.10."""
    wm_capacity: int = DEFAULT_WM_CAPACITY


Candidate = ObservationRecorded | RecallProposed
"""What competes for attention: an observation, or a memory recalled for one."""


@dataclass(frozen=True)
class Scored:
    """A candidate with its score and the features that produced it."""

    observation: ObservationRecorded | RecallProposed
    """The candidate (an observation or a recall proposal)."""
    score: float
    components: dict[str, float]
    reason: str


def estimate_salience(content: str) -> float:
    """Salience when the publisher gave none: near-empty utterances ("ok") stand out least.

    ``0.2`` under three words, else ``0.3 + 0.1·log2(1 + words)`` capped at 0.9.
    """
    words = len(content.split())
    if words < 3:
        return 0.2
    return min(0.9, 0.3 + 0.1 * math.log2(1 + words))


def _normalized(content: str) -> str:
    return " ".join(content.lower().split())


class _Intrinsic(NamedTuple):
    """The features a candidate brings to a cycle (novelty and context depend on the cycle)."""

    salience: float
    importance: float
    credibility: float


def _observation_features(obs: ObservationRecorded) -> _Intrinsic:
    p = obs.payload
    return _Intrinsic(
        salience=p.salience if p.salience is not None else estimate_salience(p.content),
        importance=p.importance if p.importance is not None else 0.5,
        credibility=CHANNEL_CREDIBILITY[p.channel],
    )


def _recall_features(proposal: RecallProposed) -> _Intrinsic:
    """A recall candidate's recall score is its salience."""
    p = proposal.payload
    return _Intrinsic(
        salience=min(1.0, max(0.0, p.score)), importance=p.importance, credibility=p.credibility
    )


def _weigh(
    intrinsic: _Intrinsic, novelty: float, context: float, config: AttentionConfig
) -> tuple[float, dict[str, float]]:
    """Weighted sum of features; components hold each weighted term and each raw ``<name>_value``."""
    features = {
        "salience": intrinsic.salience,
        "novelty": novelty,
        "importance": intrinsic.importance,
        "credibility": intrinsic.credibility,
        "context": context,
    }
    components = {k: round(config.weights.get(k, 0.0) * v, 6) for k, v in features.items()}
    return round(sum(components.values()), 6), {
        **components,
        **{f"{k}_value": v for k, v in features.items()},
    }


def score(
    obs: ObservationRecorded, novelty: float, config: AttentionConfig, context: float = 0.0
) -> tuple[float, dict[str, float]]:
    """Weighted sum of the candidate's features; returns the score and its components."""
    return _weigh(_observation_features(obs), novelty, context, config)


def score_recall(
    proposal: RecallProposed, novelty: float, config: AttentionConfig, context: float = 0.0
) -> tuple[float, dict[str, float]]:
    """A recall candidate's features: its recall score is its salience."""
    return _weigh(_recall_features(proposal), novelty, context, config)


def _memory_retrieved(proposal: RecallProposed, scored: Scored, now: datetime) -> MemoryRetrieved:
    p = proposal.payload
    attention = {f"attention_{k}": v for k, v in scored.components.items() if not k.endswith("_value")}
    return MemoryRetrieved(
        id=derive_id("memory.retrieved", proposal.id),
        workspace=proposal.workspace,
        mind=proposal.mind,
        occurred_at=now,
        causation_id=proposal.id,
        correlation_id=proposal.correlation_id,
        actor=ACTOR,
        payload=MemoryRetrievedPayload(
            memory_id=p.memory_id,
            query=p.query,
            score=p.score,
            components={**p.components, **attention},
            boost=RECALL_BOOST,
            half_life_days=HALF_LIFE_DAYS,
            activation_floor=ACTIVATION_FLOOR,
        ),
    )


def memory_id_for(observation_id: str) -> str:
    """The id of the memory an admitted observation becomes (stable across redeliveries)."""
    return derive_id("memory", observation_id)


def _memory_created(obs: ObservationRecorded, scored: Scored, now: datetime) -> MemoryCreated:
    p = obs.payload
    return MemoryCreated(
        id=derive_id("memory.created", obs.id),
        workspace=obs.workspace,
        mind=obs.mind,
        occurred_at=now,
        causation_id=obs.id,
        correlation_id=obs.correlation_id,
        actor=ACTOR,
        payload=MemoryCreatedPayload(
            memory_id=memory_id_for(obs.id),
            half_life_days=HALF_LIFE_DAYS,
            activation_floor=ACTIVATION_FLOOR,
            # An operator's change to a mind is part of that mind's own history.
            kind="autobiographical" if p.channel == "operator" else "episodic",
            epistemic_kind=p.epistemic_kind,
            content=p.content,
            memory_type=p.memory_type or "observation",
            confidence=initial_confidence(None),
            importance=scored.components["importance_value"],
            salience=scored.components["salience_value"],
            credibility=scored.components["credibility_value"],
            channel=p.channel,
            source=p.source,
            participants=list(p.participants),
            source_observation_ids=[obs.id],
            subjects=list(p.subjects),
            happened_at=p.happened_at or obs.occurred_at,
            session=p.session,
        ),
    )


def _working_memory_updated(
    workspace: str, mind: str, wm: WorkingMemory, ids: list[str], first: Candidate, now: datetime
) -> WorkingMemoryUpdated:
    return WorkingMemoryUpdated(
        id=derive_id("working_memory.updated", workspace, mind, *ids),
        workspace=workspace,
        mind=mind,
        occurred_at=now,
        causation_id=first.id,
        correlation_id=first.correlation_id,
        actor=ACTOR,
        payload=WorkingMemoryUpdatedPayload(
            items=[
                WorkingMemoryItem(
                    memory_id=i.memory_id, weight=i.weight, entered_at=i.entered_at, gist=i.gist
                )
                for i in wm.items
            ],
            capacity=wm.capacity,
            sessions=[SessionHead(session=s, memory_id=m) for s, m in wm.sessions],
        ),
    )


def working_memory_of(event: WorkingMemoryUpdated, capacity: int) -> WorkingMemory:
    """A mind's working memory, with its sessions' heads, as its last ``working_memory.updated``
    recorded it: what whoever decides the mind's next cycle starts from. ``capacity`` is the one
    configured now, not the one recorded: a changed capacity applies from the mind's next admission
    (which trims a set over it, in a recorded event)."""
    p = event.payload
    items = tuple(WorkingMemoryEntry(i.memory_id, i.weight, i.entered_at, i.gist) for i in p.items)
    sessions = tuple((h.session, h.memory_id) for h in p.sessions)
    return WorkingMemory(items, event.occurred_at, capacity, sessions)


def _episodic_next(prev: str, new: str, obs: Candidate, now: datetime) -> RelationshipAdded:
    rel_id = derive_id("episodic_next", prev, new)
    return RelationshipAdded(
        id=rel_id,
        workspace=obs.workspace,
        mind=obs.mind,
        occurred_at=now,
        causation_id=obs.id,
        correlation_id=obs.correlation_id,
        actor=ACTOR,
        payload=RelationshipAddedPayload(
            relationship_id=rel_id, from_id=prev, to_id=new, relation="episodic_next", source="attend:session"
        ),
    )


@dataclass(frozen=True)
class _Traits:
    """What a cycle needs to know of a candidate, whatever its kind (see :func:`_traits`)."""

    kind: Literal["observation", "recall"]
    key: str
    """Two candidates of a group with the same key say the same thing: the later one is not novel."""
    text: str
    """What it says: weighed against the mind's working memory, and kept there as its gist."""
    memory_id: str
    """The memory it becomes (an observation) or reinforces (a recall)."""
    session: str | None
    """The session whose episodes it continues (an observation's; a recall is no new episode)."""
    intrinsic: _Intrinsic


def _traits(candidate: Candidate) -> _Traits:
    """The one place where an observation and a recall proposal differ in how they compete (what
    admitting each records is :func:`_admission`)."""
    match candidate:
        case RecallProposed(payload=p):
            return _Traits(
                kind="recall",
                key=f"recall:{p.memory_id}",
                # The recalled memory's own content; proposals recorded before they carried it
                # offer only the text it was recalled for.
                text=p.content or p.query,
                memory_id=p.memory_id,
                session=None,
                intrinsic=_recall_features(candidate),
            )
        case ObservationRecorded(payload=p):
            return _Traits(
                kind="observation",
                key=_normalized(p.content),
                text=p.content,
                memory_id=memory_id_for(candidate.id),
                session=p.session or None,
                intrinsic=_observation_features(candidate),
            )


@dataclass(frozen=True)
class _Entrant:
    """A candidate of a group: what it is and how it scored."""

    traits: _Traits
    scored: Scored


def _by_mind(candidates: Sequence[Candidate]) -> dict[tuple[str, str], list[Candidate]]:
    """Candidates by (workspace, mind): groups in order of first appearance, each in input order."""
    groups: dict[tuple[str, str], list[Candidate]] = {}
    for candidate in candidates:
        groups.setdefault((candidate.workspace, candidate.mind), []).append(candidate)
    return groups


def _score_group(group: Sequence[Candidate], held: WorkingMemory, config: AttentionConfig) -> list[_Entrant]:
    """Each candidate of a mind's group scored against what the mind holds, in input order."""
    seen: set[str] = set()
    entrants = []
    for candidate in group:
        traits = _traits(candidate)
        novelty = 0.0 if traits.key in seen else 1.0
        seen.add(traits.key)
        value, components = _weigh(traits.intrinsic, novelty, context_relevance(traits.text, held), config)
        reason = "duplicate within cycle" if novelty == 0.0 else ""
        entrants.append(_Entrant(traits, Scored(candidate, value, components, reason)))
    return entrants


def _admit(entrants: Sequence[_Entrant], config: AttentionConfig) -> list[bool]:
    """Whether each entrant is admitted: the best scores at or above the threshold, up to the
    capacity (of equal scores, the earlier candidate)."""
    ranked = sorted(range(len(entrants)), key=lambda i: (-entrants[i].scored.score, i))
    admitted: set[int] = set()
    for i in ranked:
        if entrants[i].scored.score < config.threshold:
            continue
        if len(admitted) >= config.capacity:
            break
        admitted.add(i)
    return [i in admitted for i in range(len(entrants))]


def _decision(entrant: _Entrant, admitted: bool, config: AttentionConfig) -> AttentionDecision:
    s = entrant.scored
    if admitted:
        reason = "admitted"
    elif s.score < config.threshold:
        reason = s.reason or f"score {s.score:.3f} below threshold {config.threshold}"
    else:
        reason = "over capacity"
    return AttentionDecision(
        candidate_id=s.observation.id,
        candidate_kind=entrant.traits.kind,
        memory_id=entrant.traits.memory_id if admitted else None,
        admitted=admitted,
        score=s.score,
        components={k: v for k, v in s.components.items() if not k.endswith("_value")},
        reason=reason,
    )


def _attention_decided(
    group: Sequence[Candidate],
    decisions: list[AttentionDecision],
    ids: list[str],
    config: AttentionConfig,
    now: datetime,
    through_seq: int | None,
) -> AttentionDecided:
    first = group[0]
    return AttentionDecided(
        id=derive_id("attention.decided", *ids),
        workspace=first.workspace,
        mind=first.mind,
        occurred_at=now,
        causation_id=first.id,
        correlation_id=first.correlation_id,
        actor=ACTOR,
        payload=AttentionDecidedPayload(
            decisions=decisions, threshold=config.threshold, capacity=config.capacity, through_seq=through_seq
        ),
    )


def _admission(entrant: _Entrant, now: datetime) -> MemoryCreated | MemoryRetrieved:
    """What admitting a candidate records: an observation becomes a memory, a recall reinforces one."""
    match entrant.scored.observation:
        case RecallProposed() as proposal:
            return _memory_retrieved(proposal, entrant.scored, now)
        case ObservationRecorded() as obs:
            return _memory_created(obs, entrant.scored, now)


def _held_after(held: WorkingMemory, admitted: Sequence[_Entrant], now: datetime) -> WorkingMemory:
    """The mind's working memory once the admitted entered it (each weighs its score)."""
    entries = [
        WorkingMemoryEntry(
            memory_id=e.traits.memory_id,
            weight=min(1.0, e.scored.score),
            entered_at=now,
            gist=e.traits.text[:GIST_CHARS],
        )
        for e in admitted
    ]
    return held.admit(entries, now)


def _chain_episodes(
    admitted: Sequence[_Entrant], held: WorkingMemory, now: datetime
) -> tuple[list[RelationshipAdded], list[tuple[str, str]]]:
    """The ``episodic_next`` edges from each session's latest memory (as the mind's working memory
    holds it) through the admitted observations of that session, in input order; and the moves of
    the sessions' heads, in order (session digest, new latest memory)."""
    edges: list[RelationshipAdded] = []
    moved: list[tuple[str, str]] = []
    latest: dict[str, str] = {}
    for e in admitted:
        if not e.traits.session:
            continue
        session = session_digest(e.traits.session)
        new = e.traits.memory_id
        prev = latest.get(session) or held.head(session)
        if prev is not None and prev != new:
            edges.append(_episodic_next(prev, new, e.scored.observation, now))
        latest[session] = new
        moved.append((session, new))
    return edges, moved


@dataclass(frozen=True)
class _GroupDecision:
    """One mind's part of a cycle: its events, in order, and the state they leave behind."""

    events: list[Event]
    held: WorkingMemory | None
    """The mind's working memory after the cycle, with its sessions' heads; ``None`` if nothing
    entered it (left as it was)."""


def _decide_group(
    group: Sequence[Candidate],
    held: WorkingMemory,
    now: datetime,
    config: AttentionConfig,
    through_seq: int | None,
) -> _GroupDecision:
    """Score one mind's candidates, admit the best, and record it: the decision, a memory event per
    admission (in input order), the new working memory (with its sessions' heads), the session
    edges."""
    entrants = _score_group(group, held, config)
    verdicts = _admit(entrants, config)
    admitted = [e for e, ok in zip(entrants, verdicts, strict=True) if ok]
    ids = sorted(c.id for c in group)
    decisions = [_decision(e, ok, config) for e, ok in zip(entrants, verdicts, strict=True)]
    events: list[Event] = [_attention_decided(group, decisions, ids, config, now, through_seq)]
    events += [_admission(e, now) for e in admitted]
    if not admitted:
        return _GroupDecision(events, None)
    edges, moved = _chain_episodes(admitted, held, now)
    after = _held_after(held, admitted, now).continued(moved)
    first = group[0]
    events.append(_working_memory_updated(first.workspace, first.mind, after, ids, first, now))
    return _GroupDecision([*events, *edges], after)


def decide_cycle(
    observations: Sequence[Candidate],
    now: datetime,
    config: AttentionConfig,
    memories: MutableMapping[tuple[str, str], WorkingMemory] | None = None,
    through_seq: int | None = None,
) -> list[Event]:
    """Decide one attention cycle; returns the events to publish, in order.

    Observations and recall candidates compete for the same admissions. An admitted observation
    becomes a memory; an admitted recall becomes a ``memory.retrieved`` (reinforcement). Admitted
    observations of a session are chained with ``episodic_next`` edges (temporal adjacency
    of episodes). ``memories`` holds each mind's working memory across cycles, with the latest
    memory of each of its recent sessions (updated, and published whole, so a restarted or another
    instance continues exactly from the last ``working_memory.updated``).
    ``through_seq`` (the highest stream sequence of the cycle's input) is recorded on its decisions.
    """
    memories = {} if memories is None else memories
    events: list[Event] = []
    for key, group in _by_mind(observations).items():
        held = memories.get(key, WorkingMemory(capacity=config.wm_capacity)).decayed(now)
        decided = _decide_group(group, held, now, config, through_seq)
        events += decided.events
        if decided.held is not None:
            memories[key] = decided.held
    return events
