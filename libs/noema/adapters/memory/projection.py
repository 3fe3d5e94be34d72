"""The in-memory read model's state and how each event changes it: what the projector's handlers
(:mod:`noema.adapters.postgres.handlers`, :mod:`noema.adapters.postgres.knowledge_handlers`) do to
the tables, for the tables the knowledge ports read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from noema_events import (
    ConflictRecorded,
    DomainCreated,
    Event,
    FactMentioned,
    FactProposed,
    GrantChanged,
    MemoryCreated,
    MemoryEmbedded,
    MemorySuperseded,
    NotesUpdated,
    OperatorAction,
    PolicyProposed,
    PolicySuperseded,
    RelationshipAdded,
    WorkingMemoryUpdated,
    WorkspaceConfigured,
)
from noema_events.vocabulary import VERACITY_WEIGHT

from ...domain.dynamics import CONFIDENCE_CAP, mention_rate

__all__ = ["Tables"]

Row = dict[str, Any]
_STATUS_BY_ACTION = {"retract": "retracted", "archive": "archived", "restore": "active"}


def _memory(ev: Event, seq: int, **fields: Any) -> Row:
    """A memories row: the envelope gives scope, provenance and times; a new memory starts active,
    mentioned once (as :func:`noema.adapters.postgres.handlers.memory_row`)."""
    return {
        "workspace": ev.workspace,
        "mind": ev.mind,
        "status": "active",
        "superseded_by": None,
        "mention_count": 1,
        "origin_event": ev.id,
        "origin_seq": seq,
        "created_at": ev.occurred_at,
        "updated_at": ev.occurred_at,
        "tier": "long",
        **fields,
    }


@dataclass
class Tables:
    """The rows, keyed as the PostgreSQL tables' primary keys."""

    memories: dict[str, Row] = field(default_factory=dict)
    policies: dict[str, Row] = field(default_factory=dict)
    domains: dict[tuple[str, str], Row] = field(default_factory=dict)
    grants: dict[tuple[str, str, str], Row] = field(default_factory=dict)
    access_modes: dict[str, str] = field(default_factory=dict)
    notes: dict[tuple[str, str], str] = field(default_factory=dict)
    working_memory: dict[tuple[str, str], Row] = field(default_factory=dict)
    conflicts: dict[str, Row] = field(default_factory=dict)
    relationships: dict[str, Row] = field(default_factory=dict)
    embeddings: dict[tuple[str, str], int] = field(default_factory=dict)
    """(memory id, model) → dimensions."""
    position: int = 0
    """The last stream sequence applied."""

    def apply(self, ev: Event, seq: int) -> None:
        """Apply one event stored at ``seq`` (an already-applied sequence changes nothing)."""
        if seq <= self.position:
            return
        self.position = seq
        match ev:
            case MemoryCreated(payload=p):
                self.memories.setdefault(
                    p.memory_id,
                    _memory(
                        ev,
                        seq,
                        id=p.memory_id,
                        kind=p.kind,
                        epistemic_kind=p.epistemic_kind,
                        content=p.content,
                        domain=p.domain,
                        topic=p.topic,
                        repo=p.repo,
                        confidence=p.confidence,
                        importance=p.importance,
                        salience=p.salience,
                        credibility=p.credibility,
                        veracity=p.veracity,
                        memory_type=p.memory_type,
                        source_observation_ids=list(p.source_observation_ids),
                        channel=p.channel,
                        source=p.source,
                        participants=list(p.participants),
                        session=p.session,
                        happened_at=p.happened_at,
                        valid_until=p.valid_until,
                        tier=p.tier,
                    ),
                )
            case FactProposed(payload=p):
                self.memories.setdefault(
                    p.memory_id,
                    _memory(
                        ev,
                        seq,
                        id=p.memory_id,
                        kind="semantic",
                        epistemic_kind=p.epistemic_kind,
                        content=p.content,
                        domain=p.domain,
                        topic=p.topic,
                        repo=p.repo,
                        confidence=p.confidence,
                        importance=0.5,
                        salience=0.5,
                        credibility=VERACITY_WEIGHT[p.veracity],
                        veracity=p.veracity,
                        memory_type=p.memory_type,
                        source_observation_ids=list(p.source_observation_ids),
                        channel=None,
                        source=p.role or None,
                        participants=[ev.actor],
                        session=None,
                        happened_at=None,
                        valid_until=p.valid_until,
                    ),
                )
            case FactMentioned(payload=p) if p.memory_id in self.memories:
                m = self.memories[p.memory_id]
                rate = mention_rate(p.veracity, p.mentions)
                m["confidence"] = min(CONFIDENCE_CAP, m["confidence"] + rate * (1 - m["confidence"]))
                m["mention_count"] += p.mentions
                m["source_observation_ids"] = [*m["source_observation_ids"], *p.source_observation_ids]
                m["updated_at"] = max(m["updated_at"], ev.occurred_at)
            case MemorySuperseded(payload=p) if p.memory_id in self.memories:
                m = self.memories[p.memory_id]
                m.update(status="superseded", superseded_by=p.superseded_by, updated_at=ev.occurred_at)
            case OperatorAction(payload=p):
                status = _STATUS_BY_ACTION.get(p.action)
                target = self.memories.get(p.target_id or "")
                if status is not None and target is not None and target["status"] != "superseded":
                    target.update(status=status, updated_at=ev.occurred_at)
            case PolicyProposed(payload=p):
                self.policies.setdefault(
                    p.policy_id,
                    {
                        "id": p.policy_id,
                        "workspace": ev.workspace,
                        "domain": p.domain,
                        "repo": p.repo,
                        "rule": p.rule,
                        "required_role": p.required_role,
                        "active": True,
                        "superseded_by": None,
                        "proposed_by": ev.actor,
                        "created_at": ev.occurred_at,
                        "origin_seq": seq,
                    },
                )
            case PolicySuperseded(payload=p) if p.policy_id in self.policies:
                self.policies[p.policy_id].update(active=False, superseded_by=p.superseded_by)
            case DomainCreated(payload=p):
                self.domains.setdefault(
                    (ev.workspace, p.domain),
                    {
                        "domain": p.domain,
                        "name": p.domain.split("/", 1)[1] if p.repo else p.domain,
                        "repo": p.repo,
                        "created_by": ev.actor,
                        "created_at": ev.occurred_at,
                    },
                )
            case GrantChanged(payload=p):
                self.grants[(ev.workspace, p.role, p.domain)] = {
                    "role": p.role,
                    "domain": p.domain,
                    "access": p.access,
                    "seeded": p.seeded,
                    "changed_by": ev.actor,
                    "updated_at": ev.occurred_at,
                }
            case WorkspaceConfigured(payload=p):
                self.access_modes[ev.workspace] = p.access_mode
            case ConflictRecorded(payload=p):
                self.conflicts.setdefault(
                    p.conflict_id,
                    {
                        "id": p.conflict_id,
                        "workspace": ev.workspace,
                        "domain": p.domain,
                        "topic": p.topic,
                        "rule": p.rule,
                        "detail": p.detail,
                        "decided_by": ev.actor,
                        "created_at": ev.occurred_at,
                        "winner_id": p.winner_id,
                        "loser_id": p.loser_id,
                        "origin_seq": seq,
                    },
                )
            case NotesUpdated(payload=p):
                self.notes[(ev.workspace, p.agent)] = p.notes
            case WorkingMemoryUpdated(payload=p):
                self.working_memory[(ev.workspace, ev.mind)] = {
                    "capacity": p.capacity,
                    "items": msgspec.to_builtins(p.items),
                    "updated_at": ev.occurred_at,
                }
            case RelationshipAdded(payload=p):
                ends = [self.memories.get(p.from_id), self.memories.get(p.to_id)]
                # PostgreSQL's foreign keys refuse an edge across minds or to a missing memory.
                if all(
                    m is not None and (m["workspace"], m["mind"]) == (ev.workspace, ev.mind) for m in ends
                ):
                    self.relationships.setdefault(
                        p.relationship_id,
                        {
                            "id": p.relationship_id,
                            "from_id": p.from_id,
                            "to_id": p.to_id,
                            "relation": p.relation,
                            "confidence": p.confidence,
                            "source": p.source,
                            "created_at": ev.occurred_at,
                        },
                    )
            case MemoryEmbedded(payload=p) if p.memory_id in self.memories:
                self.embeddings[(p.memory_id, p.model)] = p.dimensions
            case _:
                pass  # events that change nothing the knowledge ports read
