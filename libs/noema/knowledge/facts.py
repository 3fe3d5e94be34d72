"""Facts (requirements §7): semantic memories in a domain and topic. Proposing one mentions an equivalent
current fact again instead of duplicating it; a contradicting one is left to the ``conflicts`` worker;
an explicit supersede wins by the ``explicit`` rule. Also lists facts and the recorded conflicts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import asyncpg

from noema_events import FactProposed, FactProposedPayload
from noema_events.vocabulary import MEMORY_TYPES, VERACITY_WEIGHT, EpistemicKind, MemoryType, Veracity

from ..access import Caller
from ..domain.dynamics import initial_confidence
from ..domain.knowledge import FactView, equivalent
from ..ids import derive_id, new_id
from ..operations import Conflict, NotFound, OperationError
from .context import KnowledgeContext, domain_ref
from .domains import Domains
from .events import mention_event

__all__ = ["FACT_COLUMNS", "FactOutcome", "Facts", "fact_view"]


@dataclass(frozen=True)
class FactOutcome:
    """What ``propose_fact`` did: ``proposed`` a new fact or ``mentioned`` an equivalent one."""

    outcome: str
    memory_id: str
    domain: str
    topic: str


FACT_COLUMNS = (
    "id, mind, content, veracity, confidence, created_at, origin_seq, domain, topic, mention_count, "
    "source_observation_ids"
)
"""The columns of a memories row that :func:`fact_view` reads."""


def fact_view(r: asyncpg.Record) -> FactView:
    """A fact's row (selected with :data:`FACT_COLUMNS`) as the view the conflict rules decide on."""
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


class Facts:
    """Writing, superseding and listing facts, and listing conflicts."""

    def __init__(self, ctx: KnowledgeContext, domains: Domains) -> None:
        self._ctx = ctx
        self._domains = domains

    async def _slot(self, workspace: str, domain: str, topic: str, at: datetime) -> list[asyncpg.Record]:
        """The slot's current facts: active and not expired at ``at`` (the proposal's time, which the
        conflicts worker uses too)."""
        return cast(
            list[asyncpg.Record],
            await self._ctx.pool.fetch(
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
        ref = domain_ref(domain, repo)
        if await self._ctx.access_mode(caller.workspace) == "strict":
            await self._ctx.require(caller, ref.key, "write", "writing a fact")
        now = self._ctx.clock()
        if supersedes is None and (valid_until is None or valid_until > now):
            for row in await self._slot(caller.workspace, ref.key, topic, now):
                if equivalent(row["content"], content):
                    await self._ctx.publish(
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
        events = await self._domains.domain_events(caller, ref)
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
        await self._ctx.publish(events, audit)
        return FactOutcome("proposed", memory_id, ref.key, topic)

    async def resolve_fact_id(self, caller: Caller, given: str) -> str:
        """A fact's full id from its id or a unique prefix (≥ 6 characters) in the caller's workspace."""
        return await self._ctx.full_id("fact", caller.workspace, given)

    async def _active_fact(self, workspace: str, memory_id: str) -> asyncpg.Record:
        row = await self._ctx.pool.fetchrow(
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
        # Callers that show the full id resolve it first; a full id resolves again on the primary key.
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
        key = domain_ref(domain, repo).key if domain else None
        readable = await self._ctx.readable_domains(caller)
        rows = await self._ctx.pool.fetch(
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
            self._ctx.clock(),
        )
        return [dict(r) for r in rows]

    async def list_conflicts(
        self, caller: Caller, domain: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        """Recorded conflicts, newest first, with both sides' content."""
        readable = await self._ctx.readable_domains(caller)
        rows = await self._ctx.pool.fetch(
            """SELECT c.id, c.domain, c.topic, c.rule, c.detail, c.decided_by, c.created_at,
                      c.winner_id, w.content AS winner_content, w.mind AS winner_agent,
                      c.loser_id, l.content AS loser_content, l.mind AS loser_agent
               FROM conflicts c LEFT JOIN memories w ON w.id = c.winner_id
                    LEFT JOIN memories l ON l.id = c.loser_id
               WHERE c.workspace = $1 AND ($2::text IS NULL OR c.domain = $2)
                 AND ($3::text[] IS NULL OR c.domain = ANY($3::text[]))
               ORDER BY c.origin_seq DESC LIMIT $4""",
            caller.workspace,
            domain_ref(domain, None).key if domain else None,
            readable,
            limit,
        )
        return [dict(r) for r in rows]
