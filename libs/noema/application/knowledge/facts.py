"""Facts (requirements §7): semantic memories in a domain and topic. Proposing one mentions an equivalent
current fact again instead of duplicating it; a contradicting one is left to the ``conflicts`` worker;
an explicit supersede wins by the ``explicit`` rule. Also lists facts and the recorded conflicts."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from noema.application.access import Caller
from noema.application.knowledge.context import KnowledgeContext, domain_ref
from noema.application.knowledge.domains import Domains
from noema.application.knowledge.events import mention_event
from noema.domain.dynamics import (
    ACTIVATION_FLOOR,
    FACT_IMPORTANCE,
    FACT_SALIENCE,
    HALF_LIFE_DAYS,
    initial_confidence,
)
from noema.domain.knowledge import equivalent
from noema.errors import Conflict, NotFound, OperationError
from noema.ids import derive_id, new_id
from noema_events import FactProposed, FactProposedPayload
from noema_events.catalog import SUBJECT_KEY_PATTERN
from noema_events.vocabulary import MEMORY_TYPES, VERACITY_WEIGHT, EpistemicKind, MemoryType, Veracity

__all__ = ["FactOutcome", "Facts"]


@dataclass(frozen=True)
class FactOutcome:
    """What ``propose_fact`` did: ``proposed`` a new fact or ``mentioned`` an equivalent one."""

    outcome: str
    memory_id: str
    domain: str
    topic: str


class Facts:
    """Writing, superseding and listing facts, and listing conflicts."""

    def __init__(self, ctx: KnowledgeContext, domains: Domains) -> None:
        self._ctx = ctx
        self._domains = domains

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
        subjects: Sequence[str] = (),
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
        if len(subjects) > 32 or not all(re.fullmatch(SUBJECT_KEY_PATTERN, s) for s in subjects):
            raise OperationError(
                "subjects must be at most 32 keys of 1-200 letters, digits and . _ : @ / + = -"
            )
        ref = domain_ref(domain, repo)
        if await self._ctx.access_mode(caller.workspace) == "strict":
            await self._ctx.require(caller, ref.key, "write", "writing a fact")
        now = self._ctx.clock()
        if supersedes is None and (valid_until is None or valid_until > now):
            # The slot's current facts at the proposal's time (which the conflicts worker uses too).
            for fact in await self._ctx.reads.current_facts(
                caller.workspace, at=now, domain=ref.key, topic=topic
            ):
                if equivalent(fact.content, content):
                    await self._ctx.publish(
                        [
                            mention_event(
                                caller.workspace, caller.actor, fact, veracity, source_observation_ids, now
                            )
                        ]
                    )
                    return FactOutcome("mentioned", fact.id, ref.key, topic)
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
                    half_life_days=HALF_LIFE_DAYS,
                    activation_floor=ACTIVATION_FLOOR,
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
                    subjects=list(subjects),
                    supersedes=supersedes,
                    credibility=VERACITY_WEIGHT[veracity],
                    importance=FACT_IMPORTANCE,
                    salience=FACT_SALIENCE,
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

    async def _active_fact(self, workspace: str, memory_id: str) -> dict[str, Any]:
        row = await self._ctx.reads.fact(workspace, memory_id)
        if row is None:
            raise NotFound(f"no fact {memory_id} in workspace {workspace}")
        if row["status"] != "active":
            raise Conflict(f"fact {memory_id} is {row['status']}, not active")
        return row

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
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """Facts (semantic memories) the caller may read, the current repo's first: the active,
        unexpired ones, or every one with ``include_inactive`` (an active fact past its
        ``valid_until`` is listed with status ``expired``); ``limit`` of them after ``offset``."""
        key = domain_ref(domain, repo).key if domain else None
        readable = await self._ctx.readable_domains(caller)
        return await self._ctx.reads.list_facts(
            caller.workspace,
            at=self._ctx.clock(),
            domain=key,
            topic=topic.strip().lower() if topic else None,
            include_inactive=include_inactive,
            readable=readable,
            repo=repo.strip().lower() if repo else None,
            limit=limit,
            offset=offset,
        )

    async def list_conflicts(
        self, caller: Caller, domain: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[dict[str, Any]]:
        """Recorded conflicts, newest first, with both sides' content (``limit`` after ``offset``)."""
        readable = await self._ctx.readable_domains(caller)
        key = domain_ref(domain, None).key if domain else None
        return await self._ctx.reads.list_conflicts(caller.workspace, key, readable, limit, offset)
