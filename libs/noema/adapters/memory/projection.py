"""The in-memory read model's state and how each event changes it: what the projector
(:mod:`noema.adapters.postgres.projection` and its handlers, :mod:`noema.adapters.postgres.handlers`,
:mod:`noema.adapters.postgres.knowledge_handlers`) does to the tables, for the tables the ports read.
New memory rows and the audit copy of each event are built by the projector's own column mappings,
and activation and confidence follow the same formulas (:mod:`noema.domain.dynamics`) with the values
each event recorded, so both read models hold the same values."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from noema.adapters.postgres.handlers import Projected, created_columns, memory_columns
from noema.adapters.postgres.knowledge_handlers import proposed_columns
from noema.adapters.postgres.projection import EVENT_COLUMNS, event_row
from noema.domain.dynamics import decay_activation, reinforce_activation
from noema_events import Event
from noema_events import catalog as kinds

__all__ = ["Tables"]

Row = dict[str, Any]
_STATUS_BY_ACTION = {"retract": "retracted", "archive": "archived", "restore": "active"}


def _days(later: datetime, earlier: datetime) -> float:
    """Days between two instants (the projector's ``noema_days``)."""
    return (later - earlier).total_seconds() / 86400.0


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
    embeddings: dict[tuple[str, str], Row] = field(default_factory=dict)
    """(memory id, model) → model, dimensions, created_at (the vector itself is not kept)."""
    events: dict[int, Row] = field(default_factory=dict)
    """Sequence → the audit copy of the event stored there (``events``), in stream order."""
    position: int = 0
    """The last stream sequence applied."""
    history: list[Projected] = field(default_factory=list)
    """Every event applied, in stream order: the in-memory read model's history, from which
    :meth:`as_of` answers (PostgreSQL keeps row versions instead, migration 0016)."""
    _past: dict[int, Tables] = field(default_factory=dict)

    def as_of(self, seq: int) -> Tables:
        """The tables as they stood after stream sequence ``seq`` (the reads as of a point run over
        them, as PostgreSQL's run over the versions valid then); kept, since the past stays as it
        was."""
        found = self._past.get(seq)
        if found is None:
            found = Tables()
            for item in self.history:
                if item.seq > seq:
                    break
                found.apply(item)
            self._past[seq] = found
        return found

    def _insert(self, row: dict[str, object]) -> None:
        """A new memory (a re-published creation of an existing id changes nothing)."""
        self.memories.setdefault(str(row["id"]), {**row, "superseded_by": None})

    def _reinforce(
        self, ev: kinds.MemoryRetrieved | kinds.MemoryReinforced, boost: float, recalls: int
    ) -> None:
        """Decay to the event's time, then boost (the projector's recall and reinforcement update)."""
        p, at = ev.payload, ev.occurred_at
        m = self._own(ev, p.memory_id)
        if m is None:
            return
        days = _days(at, m["activation_at"])
        decayed = decay_activation(
            m["activation"], days, m["importance"], p.half_life_days, p.activation_floor
        )
        m["activation"] = reinforce_activation(decayed, boost)
        m["activation_at"] = max(m["activation_at"], at)
        m["half_life_days"], m["activation_floor"] = p.half_life_days, p.activation_floor
        m["recall_count"] += recalls
        m["updated_at"] = max(m["updated_at"], at)

    def _own(self, ev: Event, memory_id: str) -> Row | None:
        """The memory ``ev`` changes, if it is one of ``ev``'s workspace (an event of another that
        names the same id changes nothing, as in the projector's statements)."""
        m = self.memories.get(memory_id)
        return m if m is not None and m["workspace"] == ev.workspace else None

    def refusal(self, ev: Event) -> str | None:
        """Why PostgreSQL refuses the event, if it does (the projector then skips it whole, its
        audit copy too): an edge whose ends are not two memories of the edge's own mind (the
        foreign keys)."""
        if not isinstance(ev, kinds.RelationshipAdded):
            return None
        p = ev.payload
        ends = [self.memories.get(p.from_id), self.memories.get(p.to_id)]
        inside = all(m is not None and (m["workspace"], m["mind"]) == (ev.workspace, ev.mind) for m in ends)
        if p.from_id == p.to_id or not inside:
            return "refused by the read model: an edge must join two memories of its own mind"
        return None

    def apply(self, item: Projected) -> None:
        """Apply one stored event (an already-applied sequence changes nothing)."""
        ev, seq = item.event, item.seq
        if seq <= self.position:
            return
        self.position = seq
        self.history.append(item)
        if self.refusal(ev) is not None:
            return
        self.events[seq] = dict(zip(EVENT_COLUMNS, event_row(item), strict=True))
        match ev:
            case kinds.MemoryCreated(payload=p):
                self._insert(memory_columns(ev, seq, **created_columns(ev)))
            case kinds.FactProposed(payload=p):
                self._insert(memory_columns(ev, seq, **proposed_columns(ev)))
            case kinds.FactMentioned(payload=p) if (m := self._own(ev, p.memory_id)) is not None:
                m["confidence"] = min(p.confidence_cap, m["confidence"] + p.rate * (1 - m["confidence"]))
                m["mention_count"] += p.mentions
                m["source_observation_ids"] = [*m["source_observation_ids"], *p.source_observation_ids]
                m["updated_at"] = max(m["updated_at"], ev.occurred_at)
            case kinds.MemorySuperseded(payload=p) if (m := self._own(ev, p.memory_id)) is not None:
                m.update(status="superseded", superseded_by=p.superseded_by, updated_at=ev.occurred_at)
            case kinds.OperatorAction(payload=p):
                status = _STATUS_BY_ACTION.get(p.action)
                target = self._own(ev, p.target_id or "")
                if status is not None and target is not None and target["status"] != "superseded":
                    target.update(status=status, updated_at=ev.occurred_at)
            case kinds.PolicyProposed(payload=p):
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
            case kinds.PolicySuperseded(payload=p) if (
                self.policies.get(p.policy_id, {}).get("workspace") == ev.workspace
            ):
                self.policies[p.policy_id].update(active=False, superseded_by=p.superseded_by)
            case kinds.DomainCreated(payload=p):
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
            case kinds.GrantChanged(payload=p):
                self.grants[(ev.workspace, p.role, p.domain)] = {
                    "role": p.role,
                    "domain": p.domain,
                    "access": p.access,
                    "seeded": p.seeded,
                    "changed_by": ev.actor,
                    "updated_at": ev.occurred_at,
                }
            case kinds.WorkspaceConfigured(payload=p):
                self.access_modes[ev.workspace] = p.access_mode
            case kinds.ConflictRecorded(payload=p):
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
            case kinds.NotesUpdated(payload=p):
                self.notes[(ev.workspace, p.agent)] = p.notes
            case kinds.WorkingMemoryUpdated(payload=p):
                self.working_memory[(ev.workspace, ev.mind)] = {
                    "capacity": p.capacity,
                    "items": msgspec.to_builtins(p.items),
                    "updated_at": ev.occurred_at,
                }
            case kinds.RelationshipAdded(payload=p):
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
            # A vector of the wrong size is skipped, as the projector skips it (with a warning).
            case kinds.MemoryEmbedded(payload=p) if (
                self._own(ev, p.memory_id) and len(p.vector) == p.dimensions
            ):
                self.embeddings.setdefault(
                    (p.memory_id, p.model),
                    {"model": p.model, "dimensions": p.dimensions, "created_at": ev.occurred_at},
                )
            case kinds.MemoryRetrieved(payload=p):
                self._reinforce(ev, p.boost, 1)
            case kinds.MemoryReinforced(payload=p):
                self._reinforce(ev, min(1.0, max(0.0, p.amount)), 0)
            case kinds.ActivationDecayed(payload=p) if p.rewrite:  # an earlier release's tick (v1)
                for m in self.memories.values():
                    if m["workspace"] == ev.workspace and m["activation_at"] < p.tick_at:
                        days = _days(p.tick_at, m["activation_at"])
                        m["activation"] = decay_activation(
                            m["activation"], days, m["importance"], p.half_life_days, p.activation_floor
                        )
                        m["activation_at"] = p.tick_at
                        m["half_life_days"], m["activation_floor"] = p.half_life_days, p.activation_floor
            case _:
                pass  # events that change nothing the ports read (their audit copy is kept)
