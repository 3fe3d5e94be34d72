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

from noema.domain.dynamics import initial_confidence
from noema.domain.knowledge import DEFAULT_WM_CAPACITY, WorkingMemory, WorkingMemoryEntry, context_relevance
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


def score(
    obs: ObservationRecorded, novelty: float, config: AttentionConfig, context: float = 0.0
) -> tuple[float, dict[str, float]]:
    """Weighted sum of the candidate's features; returns the score and its components."""
    p = obs.payload
    features = {
        "salience": p.salience if p.salience is not None else estimate_salience(p.content),
        "novelty": novelty,
        "importance": p.importance if p.importance is not None else 0.5,
        "credibility": CHANNEL_CREDIBILITY[p.channel],
        "context": context,
    }
    return _weigh(features, config)


def _weigh(features: dict[str, float], config: AttentionConfig) -> tuple[float, dict[str, float]]:
    """Weighted sum of features; components hold each weighted term and each raw ``<name>_value``."""
    components = {k: round(config.weights.get(k, 0.0) * v, 6) for k, v in features.items()}
    return round(sum(components.values()), 6), {
        **components,
        **{f"{k}_value": v for k, v in features.items()},
    }


def score_recall(
    proposal: RecallProposed, novelty: float, config: AttentionConfig, context: float = 0.0
) -> tuple[float, dict[str, float]]:
    """A recall candidate's features: its recall score is its salience."""
    p = proposal.payload
    features = {
        "salience": min(1.0, max(0.0, p.score)),
        "novelty": novelty,
        "importance": p.importance,
        "credibility": p.credibility,
        "context": context,
    }
    return _weigh(features, config)


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
            memory_id=p.memory_id, query=p.query, score=p.score, components={**p.components, **attention}
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
            happened_at=p.happened_at or obs.occurred_at,
            session=p.session,
        ),
    )


def _text(candidate: ObservationRecorded | RecallProposed) -> str:
    """What the candidate says: an observation's content, a recalled memory's content (the text it
    was recalled for only in proposals recorded before they carried the memory's)."""
    if isinstance(candidate, RecallProposed):
        return candidate.payload.content or candidate.payload.query
    return candidate.payload.content


def _gist(candidate: ObservationRecorded | RecallProposed) -> str:
    return _text(candidate)[:GIST_CHARS]


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
        ),
    )


SessionHeads = MutableMapping[tuple[str, str, str], str]
"""(workspace, mind, session) → id of the latest memory admitted in that session."""


def _episodic_next(prev: str, new: str, obs: ObservationRecorded, now: datetime) -> RelationshipAdded:
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


Candidate = ObservationRecorded | RecallProposed


def decide_cycle(
    observations: Sequence[Candidate],
    now: datetime,
    config: AttentionConfig,
    heads: SessionHeads | None = None,
    memories: MutableMapping[tuple[str, str], WorkingMemory] | None = None,
    through_seq: int | None = None,
) -> list[Event]:
    """Decide one attention cycle; returns the events to publish, in order.

    Observations and recall candidates compete for the same admissions. An admitted observation
    becomes a memory; an admitted recall becomes a ``memory.retrieved`` (reinforcement). Admitted
    observations of a session are chained with ``episodic_next`` edges (temporal adjacency
    of episodes); ``heads`` carries each session's latest memory across cycles and is updated.
    ``memories`` holds each mind's working memory across cycles (updated, and published whole).
    ``through_seq`` (the highest stream sequence of the cycle's input) is recorded on its decisions.
    """
    heads = {} if heads is None else heads
    memories = {} if memories is None else memories
    groups: dict[tuple[str, str], list[Candidate]] = {}
    for obs in observations:
        groups.setdefault((obs.workspace, obs.mind), []).append(obs)

    events: list[Event] = []
    for (workspace, mind), group in groups.items():
        wm = memories.get((workspace, mind), WorkingMemory(capacity=config.wm_capacity)).decayed(now)
        seen: set[str] = set()
        scored: list[Scored] = []
        for obs in group:
            key = (
                f"recall:{obs.payload.memory_id}"
                if isinstance(obs, RecallProposed)
                else _normalized(obs.payload.content)
            )
            novelty = 0.0 if key in seen else 1.0
            seen.add(key)
            context = context_relevance(_text(obs), wm)
            if isinstance(obs, RecallProposed):
                value, components = score_recall(obs, novelty, config, context)
            else:
                value, components = score(obs, novelty, config, context)
            reason = "duplicate within cycle" if novelty == 0.0 else ""
            scored.append(Scored(obs, value, components, reason))

        ranked = sorted(range(len(scored)), key=lambda i: (-scored[i].score, i))
        admitted: set[int] = set()
        for i in ranked:
            if scored[i].score < config.threshold:
                continue
            if len(admitted) >= config.capacity:
                break
            admitted.add(i)

        decisions = []
        for i, s in enumerate(scored):
            ok = i in admitted
            if ok:
                reason = "admitted"
            elif s.score < config.threshold:
                reason = s.reason or f"score {s.score:.3f} below threshold {config.threshold}"
            else:
                reason = "over capacity"
            recall = isinstance(s.observation, RecallProposed)
            target = None
            if ok:
                target = (
                    s.observation.payload.memory_id
                    if isinstance(s.observation, RecallProposed)
                    else memory_id_for(s.observation.id)
                )
            decisions.append(
                AttentionDecision(
                    candidate_id=s.observation.id,
                    candidate_kind="recall" if recall else "observation",
                    memory_id=target,
                    admitted=ok,
                    score=s.score,
                    components={k: v for k, v in s.components.items() if not k.endswith("_value")},
                    reason=reason,
                )
            )
        ids = sorted(o.id for o in group)
        events.append(
            AttentionDecided(
                id=derive_id("attention.decided", *ids),
                workspace=workspace,
                mind=mind,
                occurred_at=now,
                causation_id=group[0].id,
                correlation_id=group[0].correlation_id,
                actor=ACTOR,
                payload=AttentionDecidedPayload(
                    decisions=decisions,
                    threshold=config.threshold,
                    capacity=config.capacity,
                    through_seq=through_seq,
                ),
            )
        )
        for i, s in enumerate(scored):
            if i not in admitted:
                continue
            if isinstance(s.observation, RecallProposed):
                events.append(_memory_retrieved(s.observation, s, now))
            else:
                events.append(_memory_created(s.observation, s, now))
        entries = [
            WorkingMemoryEntry(
                memory_id=(
                    s.observation.payload.memory_id
                    if isinstance(s.observation, RecallProposed)
                    else memory_id_for(s.observation.id)
                ),
                weight=min(1.0, s.score),
                entered_at=now,
                gist=_gist(s.observation),
            )
            for i, s in enumerate(scored)
            if i in admitted
        ]
        if entries:
            wm = wm.admit(entries, now)
            memories[(workspace, mind)] = wm
            events.append(_working_memory_updated(workspace, mind, wm, ids, group[0], now))
        for i, s in enumerate(scored):
            if i not in admitted or isinstance(s.observation, RecallProposed):
                continue
            session = s.observation.payload.session
            if not session:
                continue
            head = (workspace, mind, session)
            new = memory_id_for(s.observation.id)
            prev = heads.get(head)
            if prev is not None and prev != new:
                events.append(_episodic_next(prev, new, s.observation, now))
            heads[head] = new
    return events
