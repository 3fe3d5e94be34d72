"""Workspace knowledge operations (SPEC §5, §7): facts, policies, domains, grants, notes, the hot
tier, consolidate, harmonize and meeting decisions.

Every operation checks what it can up front (raising :class:`OperationError` or
:class:`InsufficientMemoryPermission` before anything is published), then publishes events; the
projector builds the tables, so replay reproduces everything. Contradictions between facts are
decided by the ``conflicts`` worker, the single decider per stream order (see
:mod:`noema.domain.knowledge` for the rules). Used by the CLI, the API and the MCP server alike.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import asyncpg
from nats.aio.client import Client as NATS

from noema_events import (
    ConflictRecorded,
    ConflictRecordedPayload,
    DomainCreated,
    DomainCreatedPayload,
    Event,
    FactMentioned,
    FactMentionedPayload,
    FactProposed,
    FactProposedPayload,
    GrantChanged,
    GrantChangedPayload,
    MemoryCreated,
    MemoryCreatedPayload,
    MemorySuperseded,
    MemorySupersededPayload,
    NotesUpdated,
    NotesUpdatedPayload,
    OperatorAction,
    OperatorActionPayload,
    PolicyProposed,
    PolicyProposedPayload,
    PolicySuperseded,
    PolicySupersededPayload,
    WorkspaceConfigured,
    WorkspaceConfiguredPayload,
    decode_event,
)
from noema_events.envelope import NAME_PATTERN
from noema_events.vocabulary import MEMORY_TYPES, VERACITY_WEIGHT, Access, EpistemicKind, MemoryType, Veracity

from ..access import AccessControl, Caller, InsufficientMemoryPermission
from ..adapters.jetstream import ConcurrentWrite, EventPublisher, last_on_subject, publish_expecting
from ..domain.dynamics import initial_confidence
from ..domain.knowledge import (
    ACCESS_ORDER,
    DomainRef,
    FactView,
    Verdict,
    clusters,
    compare,
    decide_conflict,
    equivalent,
    keeper,
)
from ..ids import derive_id, id_prefix, new_id, short_prefix_hint
from ..operations import Conflict, InvalidQuery, NotFound, OperationError
from ..topology import Topology

__all__ = [
    "ACCESS_MODES",
    "FACT_COLUMNS",
    "Caller",
    "ConsolidateReport",
    "FactOutcome",
    "HarmonizeReport",
    "InsufficientMemoryPermission",
    "Knowledge",
    "conflict_events",
    "fact_view",
    "mention_event",
    "superseded_event",
]

ACCESS_MODES = ("compatible", "strict")
MAX_NOTES = 32_000
PROMOTE_IMPORTANCE = 0.6
"""A hot-tier item at least this important is promoted to a fact by consolidate."""
DECISIONS_DOMAIN = "decisions"


@dataclass(frozen=True)
class FactOutcome:
    """What ``propose_fact`` did: ``proposed`` a new fact or ``mentioned`` an equivalent one."""

    outcome: str
    memory_id: str
    domain: str
    topic: str


@dataclass
class ConsolidateReport:
    """What consolidate changed (memory ids)."""

    promoted: list[dict[str, Any]] = field(default_factory=list)
    merged: list[dict[str, Any]] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    """Hot-tier items worth promoting into a domain the caller may not write (strict mode)."""


@dataclass
class HarmonizeReport:
    """What harmonize changed (memory and conflict ids)."""

    corroborated: list[dict[str, Any]] = field(default_factory=list)
    conflicts: list[dict[str, str]] = field(default_factory=list)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def fact_view(r: asyncpg.Record) -> FactView:
    return FactView(
        id=r["id"],
        content=r["content"],
        veracity=r["veracity"],
        confidence=r["confidence"],
        created_at=r["created_at"],
        seq=r["origin_seq"],
        agent=r["mind"],
        domain=r["domain"] or "",
        topic=r["topic"] or "",
        mention_count=r["mention_count"],
        sources=tuple(r["source_observation_ids"]),
    )


FACT_COLUMNS = (
    "id, mind, content, veracity, confidence, created_at, origin_seq, domain, topic, mention_count, "
    "source_observation_ids"
)


def mention_event(
    workspace: str,
    actor: str,
    fact: FactView,
    veracity: str | None,
    sources: Sequence[str],
    now: datetime,
    *,
    merged_from: Sequence[str] = (),
    reason: str = "",
    event_id: str | None = None,
    mentions: int = 1,
) -> FactMentioned:
    """``fact`` mentioned again, ``mentions`` times (confidence and mention_count rise in the
    projection once per mention)."""
    event_id = event_id or new_id()
    return FactMentioned(
        id=event_id,
        workspace=workspace,
        mind=fact.agent,
        occurred_at=now,
        correlation_id=event_id,
        actor=actor,
        payload=FactMentionedPayload(
            memory_id=fact.id,
            veracity=cast(Veracity, veracity or "stated"),
            source_observation_ids=list(sources),
            merged_from=list(merged_from),
            reason=reason,
            mentions=mentions,
        ),
    )


def superseded_event(
    workspace: str, actor: str, old: FactView, by: str, reason: str, now: datetime
) -> MemorySuperseded:
    """``old`` superseded by ``by`` (the old record stays, pointing at its replacement)."""
    return MemorySuperseded(
        id=derive_id("memory.superseded", old.id, by),
        workspace=workspace,
        mind=old.agent,
        occurred_at=now,
        causation_id=by,
        correlation_id=by,
        actor=actor,
        payload=MemorySupersededPayload(memory_id=old.id, superseded_by=by, reason=reason),
    )


def conflict_events(
    workspace: str,
    verdict: Verdict,
    *,
    domain: str | None,
    topic: str | None,
    actor: str,
    now: datetime,
    cause: str,
    rule: str | None = None,
    detail: str | None = None,
) -> list[Event]:
    """The loser superseded by the winner, and the conflict row; ids derived from the pair.

    ``rule`` and ``detail`` default to the verdict's own.
    """
    winner, loser = verdict.winner, verdict.loser
    rule = rule or verdict.rule
    conflict_id = derive_id("conflict", winner.id, loser.id)
    return [
        superseded_event(workspace, actor, loser, winner.id, f"conflict: {rule}", now),
        ConflictRecorded(
            id=conflict_id,
            workspace=workspace,
            occurred_at=now,
            causation_id=cause,
            correlation_id=cause,
            actor=actor,
            payload=ConflictRecordedPayload(
                conflict_id=conflict_id,
                winner_id=winner.id,
                loser_id=loser.id,
                domain=domain,
                topic=topic,
                rule=rule,
                detail=verdict.detail if detail is None else detail,
            ),
        ),
    ]


class Knowledge:
    """The knowledge operations over one read model and event stream."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        nc: NATS,
        topology: Topology,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self.pool = pool
        self.access_control = AccessControl(pool)
        self._nc = nc
        self._topology = topology
        self._publisher = EventPublisher(nc, topology)
        self._clock = clock

    async def _publish(
        self,
        events: Sequence[Event],
        audit: tuple[Caller, str, str | None, str] | None = None,
        details: dict[str, str] | None = None,
    ) -> int:
        """Publish ``events`` atomically; ``audit`` = (caller, action, target, reason) adds the
        operator_action that records an operator's change (agents' changes carry their own actor)."""
        if not events:
            return 0
        if audit is not None and audit[0].operator:
            caller, action, target, reason = audit
            events = [
                *events,
                OperatorAction(
                    id=derive_id("operator.action", events[-1].id),
                    workspace=caller.workspace,
                    occurred_at=events[-1].occurred_at,
                    causation_id=events[-1].id,
                    correlation_id=events[-1].correlation_id,
                    actor=caller.actor,
                    payload=OperatorActionPayload(
                        action=cast(Any, action), target_id=target, reason=reason, details=dict(details or {})
                    ),
                ),
            ]
        return await self._publisher.publish(events)

    # --- access -------------------------------------------------------------------------------

    async def access_mode(self, workspace: str) -> str:
        """``compatible`` (default) or ``strict``."""
        return await self.access_control.access_mode(workspace)

    async def readable_domains(self, caller: Caller) -> list[str] | None:
        """Domains the caller may read, or None when reads are not gated."""
        return await self.access_control.readable_domains(caller)

    async def _require(self, caller: Caller, domain: str, needed: str, what: str) -> None:
        await self.access_control.require(caller, domain, needed, what)

    async def domain_events(self, caller: Caller, ref: DomainRef) -> list[Event]:
        """``domain.created`` on first use; in compatible mode it seeds write for every role."""
        exists = await self.pool.fetchval(
            "SELECT 1 FROM domains WHERE workspace = $1 AND domain = $2", caller.workspace, ref.key
        )
        if exists:
            return []
        now = self._clock()
        created_id = derive_id("domain.created", caller.workspace, ref.key)
        events: list[Event] = [
            DomainCreated(
                id=created_id,
                workspace=caller.workspace,
                occurred_at=now,
                correlation_id=created_id,
                actor=caller.actor,
                payload=DomainCreatedPayload(domain=ref.key, repo=ref.repo),
            )
        ]
        if await self.access_mode(caller.workspace) == "compatible":
            events.append(
                GrantChanged(
                    id=derive_id("grant.seeded", caller.workspace, ref.key),
                    workspace=caller.workspace,
                    occurred_at=now,
                    causation_id=created_id,
                    correlation_id=created_id,
                    actor=caller.actor,
                    payload=GrantChangedPayload(
                        role="*", domain=ref.key, repo=ref.repo, access="write", seeded=True
                    ),
                )
            )
        return events

    @staticmethod
    def _operator(caller: Caller, what: str) -> None:
        if not caller.operator:
            raise InsufficientMemoryPermission(f"{what} is for operators")

    async def set_grant(
        self,
        operator: Caller,
        role: str,
        domain: str,
        access: str,
        *,
        repo: str | None = None,
        reason: str = "",
    ) -> dict[str, Any]:
        """Set (role, domain) → none | read | write in the operator's workspace (``*`` as role: every
        role without a row of its own)."""
        self._operator(operator, "changing grants")
        if access not in ACCESS_ORDER:
            raise OperationError(f"access must be one of none, read, write (got {access!r})")
        if role != "*" and not re.match(NAME_PATTERN, role):
            raise OperationError(f"role must be 1-64 letters, digits, '_' or '-', or '*' (got {role!r})")
        ref = self._ref(domain, repo)
        previous = await self.pool.fetchval(
            "SELECT access FROM grants WHERE workspace = $1 AND role = $2 AND domain = $3",
            operator.workspace,
            role,
            ref.key,
        )
        event_id = new_id()
        events = await self.domain_events(operator, ref)
        events.append(
            GrantChanged(
                id=event_id,
                workspace=operator.workspace,
                occurred_at=self._clock(),
                correlation_id=event_id,
                actor=operator.actor,
                payload=GrantChangedPayload(
                    role=role,
                    domain=ref.key,
                    repo=ref.repo,
                    access=cast(Access, access),
                    previous=cast(Access | None, previous),
                ),
            )
        )
        await self._publish(
            events,
            (operator, "grant_change", None, reason or f"grant {role} {access} on {ref.key}"),
            {"role": role, "domain": ref.key, "access": access, "previous": str(previous or "")},
        )
        return {"role": role, "domain": ref.key, "access": access, "previous": previous}

    async def set_access_mode(self, operator: Caller, mode: str, *, reason: str = "") -> None:
        """Switch the operator's workspace between ``compatible`` and ``strict`` access."""
        self._operator(operator, "changing the access mode")
        if mode not in ACCESS_MODES:
            raise OperationError(f"access mode must be compatible or strict (got {mode!r})")
        event_id = new_id()
        await self._publish(
            [
                WorkspaceConfigured(
                    id=event_id,
                    workspace=operator.workspace,
                    occurred_at=self._clock(),
                    correlation_id=event_id,
                    actor=operator.actor,
                    payload=WorkspaceConfiguredPayload(access_mode=cast(Any, mode)),
                )
            ],
            (operator, "grant_change", None, reason or f"access mode {mode}"),
            {"access_mode": mode},
        )

    async def list_grants(self, workspace: str) -> list[dict[str, Any]]:
        """Every grant row of a workspace."""
        rows = await self.pool.fetch(
            "SELECT role, domain, access, seeded, changed_by, updated_at FROM grants WHERE workspace = $1 "
            "ORDER BY domain, role",
            workspace,
        )
        return [dict(r) for r in rows]

    async def list_domains(self, caller: Caller) -> list[dict[str, Any]]:
        """Domains of the workspace the caller may read."""
        readable = await self.readable_domains(caller)
        rows = await self.pool.fetch(
            "SELECT domain, name, repo, created_by, created_at FROM domains WHERE workspace = $1 "
            "AND ($2::text[] IS NULL OR domain = ANY($2::text[])) ORDER BY domain",
            caller.workspace,
            readable,
        )
        return [dict(r) for r in rows]

    # --- facts --------------------------------------------------------------------------------

    @staticmethod
    def _ref(domain: str, repo: str | None) -> DomainRef:
        try:
            return DomainRef.parse(domain, repo)
        except ValueError as exc:
            raise OperationError(str(exc)) from None

    async def _slot(self, workspace: str, domain: str, topic: str, at: datetime) -> list[asyncpg.Record]:
        """The slot's current facts: active and not expired at ``at`` (the proposal's time, which the
        conflicts worker uses too)."""
        return cast(
            list[asyncpg.Record],
            await self.pool.fetch(
                f"SELECT {FACT_COLUMNS} FROM memories WHERE workspace = $1 AND kind = 'semantic' "
                "AND status = 'active' AND domain = $2 AND topic = $3 "
                "AND (valid_until IS NULL OR valid_until > $4) ORDER BY origin_seq",
                workspace,
                domain,
                topic,
                at,
            ),
        )

    async def propose_fact(
        self,
        caller: Caller,
        domain: str,
        topic: str,
        content: str,
        *,
        veracity: str = "stated",
        memory_type: str = "fact",
        source_observation_ids: Sequence[str] = (),
        repo: str | None = None,
        valid_until: datetime | None = None,
        epistemic_kind: str = "fact",
        supersedes: str | None = None,
        reason: str = "",
        mind: str | None = None,
    ) -> FactOutcome:
        """Write a fact to domain/topic. An equivalent current fact there (active, not expired) is
        mentioned again (confidence and mention_count rise) instead of duplicated; a contradicting one
        is decided by the conflicts worker; any other fact of the topic stays beside it. Strict mode:
        needs write on the domain."""
        content, topic = content.strip(), topic.strip().lower()
        if not content:
            raise OperationError("content must not be blank")
        if not topic or len(topic) > 200:
            raise OperationError("topic must be 1-200 characters")
        if veracity not in VERACITY_WEIGHT:
            raise OperationError(f"veracity must be one of {', '.join(VERACITY_WEIGHT)}")
        if memory_type not in MEMORY_TYPES:
            raise OperationError(f"memory_type must be one of {', '.join(MEMORY_TYPES)}")
        if valid_until is not None and valid_until.tzinfo is None:
            raise OperationError("valid_until must carry a time zone")
        ref = self._ref(domain, repo)
        if await self.access_mode(caller.workspace) == "strict":
            await self._require(caller, ref.key, "write", "writing a fact")
        now = self._clock()
        if supersedes is None and (valid_until is None or valid_until > now):
            for row in await self._slot(caller.workspace, ref.key, topic, now):
                if equivalent(row["content"], content):
                    await self._publish(
                        [
                            mention_event(
                                caller.workspace,
                                caller.actor,
                                fact_view(row),
                                veracity,
                                source_observation_ids,
                                now,
                            )
                        ]
                    )
                    return FactOutcome("mentioned", row["id"], ref.key, topic)
        memory_id = new_id()
        events = await self.domain_events(caller, ref)
        events.append(
            FactProposed(
                id=derive_id("fact.proposed", memory_id),
                workspace=caller.workspace,
                mind=mind or caller.agent,
                occurred_at=now,
                correlation_id=memory_id,
                actor=caller.actor,
                payload=FactProposedPayload(
                    memory_id=memory_id,
                    domain=ref.key,
                    topic=topic,
                    content=content,
                    epistemic_kind=cast(EpistemicKind, epistemic_kind),
                    veracity=cast(Veracity, veracity),
                    memory_type=cast(MemoryType, memory_type),
                    role=caller.role,
                    repo=ref.repo,
                    confidence=initial_confidence(veracity),
                    valid_until=valid_until,
                    source_observation_ids=list(source_observation_ids),
                    supersedes=supersedes,
                ),
            )
        )
        if supersedes:
            audit = (caller, "correct", supersedes, reason or f"fact {supersedes} superseded by an operator")
        else:
            audit = (caller, "create", memory_id, reason or "fact entered by an operator")
        await self._publish(events, audit)
        return FactOutcome("proposed", memory_id, ref.key, topic)

    async def _full_id(self, what: str, workspace: str, given: str) -> str:
        """The id of the fact or policy ``given`` names: its full id, or a unique prefix of at least
        six characters (listings show eight). Unknown: NotFound; ambiguous: OperationError."""
        table, scope = ("policies", "") if what == "policy" else ("memories", "AND kind = 'semantic'")
        pattern = id_prefix(given)
        rows = await self.pool.fetch(
            f"SELECT id FROM {table} WHERE workspace = $1 {scope} AND (id = $2 OR id LIKE $3) "
            "ORDER BY id = $2 DESC, id LIMIT 2",
            workspace,
            given,
            pattern,
        )
        if not rows:
            hint = short_prefix_hint(given)
            if what == "fact" and not hint:
                other = await self.pool.fetchrow(
                    "SELECT id, kind FROM memories WHERE workspace = $1 AND (id = $2 OR id LIKE $3) "
                    "ORDER BY id = $2 DESC LIMIT 1",
                    workspace,
                    given,
                    pattern,
                )
                if other is not None:
                    article = "an" if other["kind"][0] in "aeiou" else "a"
                    hint = f" ({other['id']} is {article} {other['kind']} memory, not a fact)"
            raise NotFound(f"no {what} {given} in workspace {workspace}{hint}")
        if len(rows) > 1 and rows[0]["id"] != given:
            raise InvalidQuery(f"{given} matches several {what} ids; give more of the id")
        return str(rows[0]["id"])

    async def resolve_fact_id(self, caller: Caller, given: str) -> str:
        """A fact's full id from its id or a unique prefix (≥ 6 characters) in the caller's workspace."""
        return await self._full_id("fact", caller.workspace, given)

    async def resolve_policy_id(self, caller: Caller, given: str) -> str:
        """A policy's full id from its id or a unique prefix (≥ 6 characters) in the caller's workspace."""
        return await self._full_id("policy", caller.workspace, given)

    async def _active_fact(self, workspace: str, memory_id: str) -> asyncpg.Record:
        row = await self.pool.fetchrow(
            f"SELECT {FACT_COLUMNS}, status, repo, memory_type FROM memories "
            "WHERE id = $1 AND workspace = $2 AND kind = 'semantic'",
            memory_id,
            workspace,
        )
        if row is None:
            raise NotFound(f"no fact {memory_id} in workspace {workspace}")
        if row["status"] != "active":
            raise Conflict(f"fact {memory_id} is {row['status']}, not active")
        return cast(asyncpg.Record, row)

    async def supersede_fact(
        self,
        caller: Caller,
        old_id: str,
        content: str,
        *,
        reason: str = "",
        veracity: str = "stated",
        topic: str | None = None,
    ) -> FactOutcome:
        """Replace an active fact (by id or unique prefix) explicitly: the new one wins by the
        ``explicit`` rule."""
        old_id = await self.resolve_fact_id(caller, old_id)
        old = await self._active_fact(caller.workspace, old_id)
        if not old["domain"] or not old["topic"]:
            raise Conflict(f"memory {old_id} is not a fact of a domain and topic; correct it instead")
        return await self.propose_fact(
            caller,
            old["domain"],
            topic or old["topic"],
            content,
            veracity=veracity,
            memory_type=old["memory_type"],
            supersedes=old_id,
            reason=reason,
        )

    async def list_facts(
        self,
        caller: Caller,
        *,
        domain: str | None = None,
        topic: str | None = None,
        repo: str | None = None,
        include_inactive: bool = False,
        limit: int = 100,
    ) -> list[dict[str, Any]]:
        """Facts (semantic memories) the caller may read, the current repo's first: the active,
        unexpired ones, or every one with ``include_inactive`` (an active fact past its
        ``valid_until`` is listed with status ``expired``)."""
        key = self._ref(domain, repo).key if domain else None
        readable = await self.readable_domains(caller)
        rows = await self.pool.fetch(
            """SELECT id, mind AS agent, domain, topic, content, epistemic_kind, veracity, confidence,
                      mention_count,
                      CASE WHEN status = 'active' AND valid_until <= $8 THEN 'expired' ELSE status END
                          AS status,
                      superseded_by, repo, memory_type, valid_until, created_at, updated_at
               FROM memories WHERE workspace = $1 AND kind = 'semantic' AND tier = 'long'
                 AND ($2::text IS NULL OR domain = $2) AND ($3::text IS NULL OR topic = $3)
                 AND ($4 OR (status = 'active' AND (valid_until IS NULL OR valid_until > $8)))
                 AND ($5::text[] IS NULL OR domain = ANY($5::text[]))
               ORDER BY (repo IS NOT DISTINCT FROM $6) DESC, domain, topic, origin_seq DESC
               LIMIT $7""",
            caller.workspace,
            key,
            topic.strip().lower() if topic else None,
            include_inactive,
            readable,
            repo.strip().lower() if repo else None,
            limit,
            self._clock(),
        )
        return [dict(r) for r in rows]

    async def list_conflicts(
        self, caller: Caller, domain: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        """Recorded conflicts, newest first, with both sides' content."""
        readable = await self.readable_domains(caller)
        rows = await self.pool.fetch(
            """SELECT c.id, c.domain, c.topic, c.rule, c.detail, c.decided_by, c.created_at,
                      c.winner_id, w.content AS winner_content, w.mind AS winner_agent,
                      c.loser_id, l.content AS loser_content, l.mind AS loser_agent
               FROM conflicts c LEFT JOIN memories w ON w.id = c.winner_id
                    LEFT JOIN memories l ON l.id = c.loser_id
               WHERE c.workspace = $1 AND ($2::text IS NULL OR c.domain = $2)
                 AND ($3::text[] IS NULL OR c.domain = ANY($3::text[]))
               ORDER BY c.origin_seq DESC LIMIT $4""",
            caller.workspace,
            self._ref(domain, None).key if domain else None,
            readable,
            limit,
        )
        return [dict(r) for r in rows]

    # --- policies -----------------------------------------------------------------------------

    async def propose_policy(
        self,
        caller: Caller,
        domain: str,
        rule: str,
        *,
        repo: str | None = None,
        required_role: str | None = None,
        source_fact_ids: Sequence[str] = (),
        reason: str = "",
    ) -> str:
        """A new active policy; needs write on the domain (else InsufficientMemoryPermission)."""
        rule = rule.strip()
        if not rule:
            raise OperationError("rule must not be empty")
        ref = self._ref(domain, repo)
        events = await self.domain_events(caller, ref)
        if not events:
            await self._require(caller, ref.key, "write", "proposing a policy")
        elif await self.access_mode(caller.workspace) == "strict" and not caller.operator:
            raise InsufficientMemoryPermission(
                f"domain {ref.key!r} does not exist and strict mode grants no access to new domains; "
                "an operator must grant write first"
            )
        return await self._publish_policy(
            caller, ref, rule, required_role, source_fact_ids, events, reason=reason
        )

    async def _publish_policy(
        self,
        caller: Caller,
        ref: DomainRef,
        rule: str,
        required_role: str | None,
        source_fact_ids: Sequence[str],
        events: list[Event],
        supersedes: str | None = None,
        reason: str = "",
    ) -> str:
        policy_id = new_id()
        now = self._clock()
        events.append(
            PolicyProposed(
                id=derive_id("policy.proposed", policy_id),
                workspace=caller.workspace,
                occurred_at=now,
                correlation_id=policy_id,
                actor=caller.actor,
                payload=PolicyProposedPayload(
                    policy_id=policy_id,
                    domain=ref.key,
                    rule=rule,
                    repo=ref.repo,
                    required_role=required_role,
                    source_fact_ids=list(source_fact_ids),
                ),
            )
        )
        if supersedes:
            events.append(
                PolicySuperseded(
                    id=derive_id("policy.superseded", supersedes, policy_id),
                    workspace=caller.workspace,
                    occurred_at=now,
                    correlation_id=policy_id,
                    actor=caller.actor,
                    payload=PolicySupersededPayload(
                        policy_id=supersedes, superseded_by=policy_id, reason=reason
                    ),
                )
            )
        action, default = ("correct", "policy superseded") if supersedes else ("create", "policy entered")
        await self._publish(
            events, (caller, action, supersedes or policy_id, reason or f"{default} by an operator")
        )
        return policy_id

    async def supersede_policy(
        self, caller: Caller, policy_id: str, rule: str | None = None, *, reason: str = ""
    ) -> str | None:
        """Replace an active policy (by id or unique prefix) with a new rule (or deactivate it when
        ``rule`` is None)."""
        policy_id = await self.resolve_policy_id(caller, policy_id)
        row = await self.pool.fetchrow(
            "SELECT domain, repo, required_role, active FROM policies WHERE id = $1 AND workspace = $2",
            policy_id,
            caller.workspace,
        )
        if row is None:
            raise NotFound(f"no policy {policy_id} in workspace {caller.workspace}")
        if not row["active"]:
            raise Conflict(f"policy {policy_id} is no longer active")
        if rule is not None and not rule.strip():
            raise OperationError("the new rule must not be blank (give no rule to deactivate the policy)")
        await self._require(caller, row["domain"], "write", "superseding a policy")
        ref = self._ref(row["domain"], None)
        if rule is not None and rule.strip():
            return await self._publish_policy(
                caller, ref, rule.strip(), row["required_role"], (), [], supersedes=policy_id, reason=reason
            )
        event_id = new_id()
        await self._publish(
            [
                PolicySuperseded(
                    id=event_id,
                    workspace=caller.workspace,
                    occurred_at=self._clock(),
                    correlation_id=event_id,
                    actor=caller.actor,
                    payload=PolicySupersededPayload(policy_id=policy_id, reason=reason or "deactivated"),
                )
            ],
            (caller, "correct", policy_id, reason or "policy deactivated by an operator"),
        )
        return None

    async def list_policies(self, caller: Caller, *, include_inactive: bool = False) -> list[dict[str, Any]]:
        """Policies the caller may read, by domain."""
        readable = await self.readable_domains(caller)
        rows = await self.pool.fetch(
            """SELECT id, domain, repo, rule, required_role, active, superseded_by, proposed_by, created_at
               FROM policies WHERE workspace = $1 AND ($2 OR active)
                 AND ($3::text[] IS NULL OR domain = ANY($3::text[]))
               ORDER BY domain, origin_seq""",
            caller.workspace,
            include_inactive,
            readable,
        )
        return [dict(r) for r in rows]

    # --- notes --------------------------------------------------------------------------------

    def _notes_event(self, workspace: str, agent: str, notes: str, actor: str) -> NotesUpdated:
        if len(notes) > MAX_NOTES:
            raise OperationError(f"notes are limited to {MAX_NOTES} characters")
        event_id = new_id()
        return NotesUpdated(
            id=event_id,
            workspace=workspace,
            mind=agent,
            occurred_at=self._clock(),
            correlation_id=event_id,
            actor=actor,
            payload=NotesUpdatedPayload(agent=agent, notes=notes),
        )

    async def update_my_notes(self, caller: Caller, notes: str) -> None:
        """Replace the caller's own scratchpad."""
        await self._publish([self._notes_event(caller.workspace, caller.agent, notes, caller.actor)])

    async def record_observation(self, caller: Caller, content: str, *, attempts: int = 5) -> str:
        """Append a timestamped line to the caller's private notes and return it (optimistic
        concurrency on the notes subject, so concurrent appends all land). Nothing else is published:
        notes are private (SPEC §5), so the text never becomes a memory other agents could search."""
        content = content.strip()
        if not content:
            raise OperationError("content must not be blank")
        js = self._nc.jetstream()
        probe = self._notes_event(caller.workspace, caller.agent, "", caller.actor)
        subject = self._topology.event_subject(probe)
        line = f"- {self._clock():%Y-%m-%d %H:%M} {content}"
        for _ in range(attempts):
            last = await last_on_subject(js, self._topology.event_stream, subject)
            current = ""
            if last is not None:
                previous = decode_event(last[1])
                assert isinstance(previous, NotesUpdated)
                current = previous.payload.notes
            notes = f"{current}\n{line}" if current else line
            try:
                await publish_expecting(
                    js,
                    self._notes_event(caller.workspace, caller.agent, notes, caller.actor),
                    self._topology,
                    last[0] if last else 0,
                )
                return line
            except ConcurrentWrite:
                await asyncio.sleep(0.01)
        raise OperationError("the notes kept changing under this write; try again")

    async def set_notes(self, operator: Caller, agent: str, notes: str, *, reason: str = "") -> None:
        """An operator replaces an agent's notes."""
        self._operator(operator, "setting another agent's notes")
        Caller(operator.workspace, agent)
        await self._publish(
            [self._notes_event(operator.workspace, agent, notes, operator.actor)],
            (operator, "correct", None, reason or f"notes of {agent} set by an operator"),
            {"notes_of": agent},
        )

    async def get_notes(self, caller: Caller, agent: str | None = None) -> str:
        """An agent's notes: readable by that agent and by operators only."""
        agent = agent or caller.agent
        Caller(caller.workspace, agent)  # a valid agent name, or a clear error
        if agent != caller.agent and not caller.operator:
            raise InsufficientMemoryPermission(f"notes are private: {caller.agent!r} cannot read {agent!r}'s")
        value = await self.pool.fetchval(
            "SELECT notes FROM agent_notes WHERE workspace = $1 AND agent = $2", caller.workspace, agent
        )
        return str(value or "")

    # --- working memory -----------------------------------------------------------------------

    async def working_memory(self, workspace: str, mind: str) -> dict[str, Any]:
        """A mind's working memory with each item's content and its memory's current status (a
        memory retracted or archived since it entered stays held until it decays out, marked so)."""
        row = await self.pool.fetchrow(
            "SELECT capacity, items, updated_at FROM working_memory WHERE workspace = $1 AND mind = $2",
            workspace,
            mind,
        )
        if row is None:
            return {"workspace": workspace, "mind": mind, "capacity": None, "items": [], "updated_at": None}
        items = json.loads(row["items"])
        held = {
            r["id"]: r
            for r in await self.pool.fetch(
                "SELECT id, content, status FROM memories WHERE id = ANY($1::text[])",
                [i["memory_id"] for i in items],
            )
        }
        for item in items:
            memory = held.get(item["memory_id"])
            item["content"] = memory["content"] if memory else item.get("gist", "")
            item["status"] = memory["status"] if memory else "unknown"
        return {
            "workspace": workspace,
            "mind": mind,
            "capacity": row["capacity"],
            "items": items,
            "updated_at": row["updated_at"],
        }

    # --- hot tier and maintenance -------------------------------------------------------------

    async def remember(
        self,
        caller: Caller,
        session: str,
        content: str,
        *,
        domain: str | None = None,
        topic: str | None = None,
        importance: float | None = None,
    ) -> FactOutcome:
        """A session-scoped hot-tier item (the same item remembered again is mentioned instead)."""
        content, session = content.strip(), session.strip()
        if not content or not session:
            raise OperationError("session and content must not be empty")
        if importance is not None and not 0.0 <= importance <= 1.0:
            raise OperationError("importance must be between 0 and 1")
        ref = self._ref(domain, None) if domain else None
        if ref is not None and await self.access_mode(caller.workspace) == "strict":
            await self._require(caller, ref.key, "write", "remembering into a domain")
        now = self._clock()
        rows = await self.pool.fetch(
            f"SELECT {FACT_COLUMNS} FROM memories WHERE workspace = $1 AND mind = $2 AND session = $3 "
            "AND tier = 'hot' AND status = 'active'",
            caller.workspace,
            caller.agent,
            session,
        )
        for row in rows:
            if equivalent(row["content"], content):
                await self._publish(
                    [mention_event(caller.workspace, caller.actor, fact_view(row), "stated", (), now)]
                )
                return FactOutcome("mentioned", row["id"], ref.key if ref else "", topic or "")
        memory_id = new_id()
        await self._publish(
            [
                MemoryCreated(
                    id=derive_id("memory.created", memory_id),
                    workspace=caller.workspace,
                    mind=caller.agent,
                    occurred_at=now,
                    correlation_id=memory_id,
                    actor=caller.actor,
                    payload=MemoryCreatedPayload(
                        memory_id=memory_id,
                        kind="episodic",
                        epistemic_kind="memory",
                        content=content,
                        domain=ref.key if ref else None,
                        topic=topic.strip().lower() if topic else None,
                        repo=ref.repo if ref else None,
                        importance=0.5 if importance is None else importance,
                        channel="system",
                        source=caller.agent,
                        session=session,
                        tier="hot",
                    ),
                )
            ]
        )
        return FactOutcome("remembered", memory_id, ref.key if ref else "", topic or "")

    async def consolidate(
        self, caller: Caller, domain: str | None = None, *, stale_after: timedelta = timedelta(days=1)
    ) -> ConsolidateReport:
        """Promote hot-tier items worth keeping to facts, merge near-duplicate facts (the kept one
        records every merged one; they stay, superseded by it), archive stale hot-tier items."""
        report = ConsolidateReport()
        key = self._ref(domain, None).key if domain else None
        now = self._clock()
        hot = await self.pool.fetch(
            """SELECT id, mind, content, domain, topic, importance, mention_count, created_at,
                      source_observation_ids, session
               FROM memories WHERE workspace = $1 AND tier = 'hot' AND status = 'active'
                 AND ($2::text IS NULL OR domain = $2) AND ($3::text IS NULL OR mind = $3)
               ORDER BY origin_seq""",
            caller.workspace,
            key,
            None if caller.operator else caller.agent,  # an agent consolidates its own hot tier
        )
        # The same item remembered twice before the first was projected is two rows: group them.
        groups: list[list[asyncpg.Record]] = []
        for r in hot:
            for g in groups:
                if (g[0]["mind"], g[0]["session"]) == (r["mind"], r["session"]) and equivalent(
                    g[0]["content"], r["content"]
                ):
                    g.append(r)
                    break
            else:
                groups.append([r])
        for g in groups:
            head = g[0]
            if (
                max(r["importance"] for r in g) >= PROMOTE_IMPORTANCE
                or sum(r["mention_count"] for r in g) >= 2
            ):
                try:
                    outcome = await self.propose_fact(
                        caller,
                        next((r["domain"] for r in g if r["domain"]), None) or "general",
                        next((r["topic"] for r in g if r["topic"]), None) or f"session {head['session']}",
                        head["content"],
                        source_observation_ids=[
                            *(s for r in g for s in r["source_observation_ids"]),
                            *(r["id"] for r in g),
                        ],
                        mind=head["mind"],
                    )
                except InsufficientMemoryPermission as exc:
                    report.skipped.append({"hot_id": head["id"], "reason": str(exc)})
                    continue
                await self._publish(
                    [
                        superseded_event(
                            caller.workspace,
                            caller.actor,
                            FactView(r["id"], r["content"], None, 0.0, r["created_at"], 0, agent=r["mind"]),
                            outcome.memory_id,
                            "promoted to a fact",
                            now,
                        )
                        for r in g
                    ]
                )
                report.promoted.append(
                    {
                        "hot_id": head["id"],
                        "hot_ids": [r["id"] for r in g],
                        "fact_id": outcome.memory_id,
                        "outcome": outcome.outcome,
                    }
                )
            elif now - max(r["created_at"] for r in g) > stale_after:
                await self._publish(
                    [
                        OperatorAction(
                            id=derive_id("consolidate.archive", r["id"]),
                            workspace=caller.workspace,
                            mind=r["mind"],
                            occurred_at=now,
                            correlation_id=head["id"],
                            actor=caller.actor,
                            payload=OperatorActionPayload(
                                action="archive", target_id=r["id"], reason="consolidate: stale hot-tier item"
                            ),
                        )
                        for r in g
                    ]
                )
                report.archived += [r["id"] for r in g]
        facts = await self._facts_by_domain(caller.workspace, key, now)
        for group_facts in (await self._maintainable(caller, facts)).values():
            for group in clusters(group_facts):
                kept = keeper(group)
                merged = [f for f in group if f.id != kept.id]
                sources = sorted({s for f in merged for s in f.sources})
                events: list[Event] = [
                    mention_event(
                        caller.workspace,
                        caller.actor,
                        kept,
                        "stated",
                        sources,
                        now,
                        merged_from=[f.id for f in merged],
                        reason="merged near-duplicates",
                        mentions=len(merged),
                    )
                ]
                events += [
                    superseded_event(caller.workspace, caller.actor, f, kept.id, "merged near-duplicate", now)
                    for f in merged
                ]
                await self._publish(events)
                report.merged.append({"kept": kept.id, "merged": [f.id for f in merged]})
        return report

    async def _maintainable(
        self, caller: Caller, facts: dict[str, list[FactView]]
    ) -> dict[str, list[FactView]]:
        """The domains whose facts the caller may merge or supersede: in strict mode an agent needs
        write on the domain (operators may maintain every domain)."""
        if caller.operator or await self.access_mode(caller.workspace) != "strict":
            return facts
        allowed = await self.access_control.writable(caller, facts)
        return {d: f for d, f in facts.items() if d in allowed}

    async def _facts_by_domain(
        self, workspace: str, domain: str | None, at: datetime
    ) -> dict[str, list[FactView]]:
        """Current facts (active, not expired at ``at``) by domain: an expired fact neither absorbs
        merged ones nor wins a conflict."""
        rows = await self.pool.fetch(
            f"SELECT {FACT_COLUMNS} FROM memories WHERE workspace = $1 AND kind = 'semantic' "
            "AND tier = 'long' AND status = 'active' AND ($2::text IS NULL OR domain = $2) "
            "AND (valid_until IS NULL OR valid_until > $3) ORDER BY origin_seq",
            workspace,
            domain,
            at,
        )
        out: dict[str, list[FactView]] = {}
        for r in rows:
            out.setdefault(r["domain"] or "", []).append(fact_view(r))
        return out

    async def harmonize(self, caller: Caller, domain: str | None = None) -> HarmonizeReport:
        """Reconcile beliefs that diverged between agents: the same statement held by several agents
        becomes one corroborated fact (confidence raised once per corroborating agent); contradicting
        statements of different agents are decided by the conflict rules and recorded as conflicts."""
        report = HarmonizeReport()
        key = self._ref(domain, None).key if domain else None
        now = self._clock()
        domains = await self._maintainable(caller, await self._facts_by_domain(caller.workspace, key, now))
        for facts in domains.values():
            gone: set[str] = set()
            for i, a in enumerate(facts):
                for b in facts[i + 1 :]:
                    if a.agent == b.agent or a.id in gone or b.id in gone:
                        continue
                    relation = compare(a.content, b.content, same_topic=a.topic == b.topic)
                    if relation == "same":
                        kept = keeper((a, b))
                        other = b if kept is a else a
                        await self._publish(
                            [
                                mention_event(
                                    caller.workspace,
                                    caller.actor,
                                    kept,
                                    other.veracity,
                                    other.sources,
                                    now,
                                    merged_from=[other.id],
                                    reason=f"corroborated by {other.agent}",
                                ),
                                superseded_event(
                                    caller.workspace,
                                    caller.actor,
                                    other,
                                    kept.id,
                                    f"corroborates {kept.id}",
                                    now,
                                ),
                            ]
                        )
                        gone.add(other.id)
                        report.corroborated.append(
                            {"kept": kept.id, "merged": [other.id], "agents": [a.agent, b.agent]}
                        )
                    elif relation == "contradicts":
                        verdict = decide_conflict(b, a) if b.seq > a.seq else decide_conflict(a, b)
                        events = conflict_events(
                            caller.workspace,
                            verdict,
                            domain=a.domain or None,
                            topic=verdict.loser.topic or None,
                            actor=caller.actor,
                            now=now,
                            cause=verdict.loser.id,
                            rule=f"harmonize/{verdict.rule}",
                            detail=f"{verdict.detail}; {verdict.winner.agent} vs {verdict.loser.agent}",
                        )
                        await self._publish(events)
                        gone.add(verdict.loser.id)
                        report.conflicts.append(
                            {"winner": verdict.winner.id, "loser": verdict.loser.id, "rule": verdict.rule}
                        )
        return report

    async def record_meeting_decisions(
        self, caller: Caller, meeting: str, decisions: Sequence[str], *, repo: str | None = None
    ) -> list[FactOutcome]:
        """Each decision becomes a fact in the ``decisions`` domain. ``"topic: text"`` names the
        decision's topic (a later decision on the same topic supersedes it); otherwise the topic is
        the meeting and the decision's position."""
        meeting = meeting.strip()
        if not meeting or not decisions:
            raise OperationError("a meeting name and at least one decision are needed")
        outcomes = []
        for n, text in enumerate(decisions, start=1):
            head, sep, rest = text.partition(":")
            if sep and rest.strip() and 0 < len(head.strip()) <= 60 and " " not in head.strip():
                topic, content = head.strip(), rest.strip()
            else:
                topic, content = f"{meeting} #{n}", text
            outcomes.append(
                await self.propose_fact(
                    caller, DECISIONS_DOMAIN, topic, content, memory_type="decision", repo=repo
                )
            )
        return outcomes
