"""Workspace knowledge operations (requirements §5, §7): facts, policies, domains, grants, notes, the hot
tier, consolidate, harmonize and meeting decisions.

Every operation checks what it can up front (raising :class:`OperationError` or
:class:`InsufficientMemoryPermission` before anything is published), then publishes events; the
projector builds the tables, so replay reproduces everything. Contradictions between facts are
decided by the ``conflicts`` worker, the single decider per stream order (see
:mod:`noema.domain.knowledge` for the rules). Used by the CLI, the API and the MCP server alike.

The package has one module per concern, each a small class over a shared
:class:`~noema.application.knowledge.context.KnowledgeContext` (the read model and event sink ports, access
control, clock, and the publishing and checks every concern makes):

- :mod:`.domains`: domains, grants, the access mode;
- :mod:`.facts`: proposing, superseding and listing facts, listing conflicts;
- :mod:`.policies`: proposing, superseding and listing policies;
- :mod:`.notes`: agents' private notes and the working-memory view;
- :mod:`.maintenance`: the hot tier, consolidate, harmonize, meeting decisions;
- :mod:`.events`: the fact events the ``conflicts`` worker builds too.

:class:`Knowledge` composes them and exposes their operations under the names and signatures the
surfaces call, each an explicit method. Composition rather than mixins: each concern names what it
depends on (facts and policies need the domains' ``domain.created``; maintenance proposes facts)
instead of reaching into one shared ``self``, and the context is the only state they share.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from noema.application.access import AccessControl, Caller, InsufficientMemoryPermission
from noema.application.knowledge.context import KnowledgeContext, utcnow
from noema.application.knowledge.domains import ACCESS_MODES, Domains
from noema.application.knowledge.events import conflict_events, mention_event, superseded_event
from noema.application.knowledge.facts import FactOutcome, Facts
from noema.application.knowledge.maintenance import ConsolidateReport, HarmonizeReport, Maintenance
from noema.application.knowledge.notes import Notes
from noema.application.knowledge.policies import Policies
from noema.domain.knowledge import DomainRef
from noema.ports import EventSink, ExpectingSink, KnowledgeReadModel
from noema_events import Event

__all__ = [
    "ACCESS_MODES",
    "Caller",
    "ConsolidateReport",
    "FactOutcome",
    "HarmonizeReport",
    "InsufficientMemoryPermission",
    "Knowledge",
    "conflict_events",
    "mention_event",
    "superseded_event",
]


class Knowledge:
    """The knowledge operations over one read model and event stream.

    ``reads`` and ``publisher`` are ports (:mod:`noema.ports`): PostgreSQL and JetStream in
    production (:func:`noema.composition.instance.connected_knowledge`), the in-memory adapter in the
    fast tests. ``appends`` (an :class:`~noema.ports.ExpectingSink`, usually the publisher itself) is
    needed only by ``record_observation`` (an optimistic append on the notes' subject).
    Each operation is a method that hands the call to the concern that owns it, with that method's
    signature (so a reader, an IDE and mypy follow a call to it).
    """

    def __init__(
        self,
        reads: KnowledgeReadModel,
        publisher: EventSink,
        clock: Callable[[], datetime] = utcnow,
        *,
        appends: ExpectingSink | None = None,
    ) -> None:
        ctx = KnowledgeContext(reads, publisher, AccessControl(reads), clock, appends)
        self.reads = reads
        self.access_control = ctx.access_control
        self._domains = Domains(ctx)
        self._facts = Facts(ctx, self._domains)
        self._policies = Policies(ctx, self._domains)
        self._notes = Notes(ctx)
        self._maintenance = Maintenance(ctx, self._facts)

    # Each operation is the concern's that owns it (its docstring says which); these say only where.

    async def access_mode(self, workspace: str) -> str:
        """``compatible`` (default) or ``strict`` (:meth:`Domains.access_mode`)."""
        return await self._domains.access_mode(workspace)

    async def readable_domains(self, caller: Caller) -> list[str] | None:
        """Domains the caller may read, or None when reads are not gated
        (:meth:`Domains.readable_domains`)."""
        return await self._domains.readable_domains(caller)

    async def domain_events(self, caller: Caller, ref: DomainRef) -> list[Event]:
        """``domain.created`` on first use; in compatible mode it seeds write for every role
        (:meth:`Domains.domain_events`)."""
        return await self._domains.domain_events(caller, ref)

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
        """Set (role, domain) → none | read | write in the operator's workspace (``*`` as role: every role
        without a row of its own) (:meth:`Domains.set_grant`)."""
        return await self._domains.set_grant(operator, role, domain, access, repo=repo, reason=reason)

    async def set_access_mode(self, operator: Caller, mode: str, *, reason: str = "") -> None:
        """Switch the operator's workspace between ``compatible`` and ``strict`` access
        (:meth:`Domains.set_access_mode`)."""
        return await self._domains.set_access_mode(operator, mode, reason=reason)

    async def list_grants(self, workspace: str) -> list[dict[str, Any]]:
        """Every grant row of a workspace (:meth:`Domains.list_grants`)."""
        return await self._domains.list_grants(workspace)

    async def list_domains(self, caller: Caller) -> list[dict[str, Any]]:
        """Domains of the workspace the caller may read (:meth:`Domains.list_domains`)."""
        return await self._domains.list_domains(caller)

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
        """Write a fact to domain/topic. An equivalent current fact there (active, not expired) is mentioned
        again (confidence and mention_count rise) instead of duplicated; a contradicting one is decided by the
        conflicts worker; any other fact of the topic stays beside it. Strict mode: needs write on the domain
        (:meth:`Facts.propose_fact`)."""
        return await self._facts.propose_fact(
            caller,
            domain,
            topic,
            content,
            veracity=veracity,
            memory_type=memory_type,
            source_observation_ids=source_observation_ids,
            repo=repo,
            valid_until=valid_until,
            epistemic_kind=epistemic_kind,
            supersedes=supersedes,
            reason=reason,
            mind=mind,
            subjects=subjects,
        )

    async def resolve_fact_id(self, caller: Caller, given: str) -> str:
        """A fact's full id from its id or a unique prefix (≥ 6 characters) in the caller's workspace
        (:meth:`Facts.resolve_fact_id`)."""
        return await self._facts.resolve_fact_id(caller, given)

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
        """Replace an active fact (by id or unique prefix) explicitly: the new one wins by the ``explicit``
        rule (:meth:`Facts.supersede_fact`)."""
        return await self._facts.supersede_fact(
            caller, old_id, content, reason=reason, veracity=veracity, topic=topic
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
        """Facts (semantic memories) the caller may read, the current repo's first: the active, unexpired
        ones, or every one with ``include_inactive`` (an active fact past its ``valid_until`` is listed with
        status ``expired``); ``limit`` of them after ``offset`` (:meth:`Facts.list_facts`)."""
        return await self._facts.list_facts(
            caller,
            domain=domain,
            topic=topic,
            repo=repo,
            include_inactive=include_inactive,
            limit=limit,
            offset=offset,
        )

    async def list_conflicts(
        self, caller: Caller, domain: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[dict[str, Any]]:
        """Recorded conflicts, newest first, with both sides' content (``limit`` after ``offset``)
        (:meth:`Facts.list_conflicts`)."""
        return await self._facts.list_conflicts(caller, domain, limit, offset)

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
        """A new active policy; needs write on the domain (else InsufficientMemoryPermission)
        (:meth:`Policies.propose_policy`)."""
        return await self._policies.propose_policy(
            caller,
            domain,
            rule,
            repo=repo,
            required_role=required_role,
            source_fact_ids=source_fact_ids,
            reason=reason,
        )

    async def resolve_policy_id(self, caller: Caller, given: str) -> str:
        """A policy's full id from its id or a unique prefix (≥ 6 characters) in the caller's workspace
        (:meth:`Policies.resolve_policy_id`)."""
        return await self._policies.resolve_policy_id(caller, given)

    async def supersede_policy(
        self, caller: Caller, policy_id: str, rule: str | None = None, *, reason: str = ""
    ) -> str | None:
        """Replace an active policy (by id or unique prefix) with a new rule (or deactivate it when ``rule``
        is None) (:meth:`Policies.supersede_policy`)."""
        return await self._policies.supersede_policy(caller, policy_id, rule, reason=reason)

    async def list_policies(self, caller: Caller, *, include_inactive: bool = False) -> list[dict[str, Any]]:
        """Policies the caller may read, by domain (:meth:`Policies.list_policies`)."""
        return await self._policies.list_policies(caller, include_inactive=include_inactive)

    async def update_my_notes(self, caller: Caller, notes: str) -> None:
        """Replace the caller's own scratchpad (:meth:`Notes.update_my_notes`)."""
        return await self._notes.update_my_notes(caller, notes)

    async def record_observation(self, caller: Caller, content: str, *, attempts: int = 5) -> str:
        """Append a timestamped line to the caller's private notes and return it (optimistic concurrency on
        the notes subject, so concurrent appends all land). Nothing else is published: notes are private
        (requirements §5), so the text never becomes a memory other agents could search
        (:meth:`Notes.record_observation`)."""
        return await self._notes.record_observation(caller, content, attempts=attempts)

    async def set_notes(self, operator: Caller, agent: str, notes: str, *, reason: str = "") -> None:
        """An operator replaces an agent's notes (:meth:`Notes.set_notes`)."""
        return await self._notes.set_notes(operator, agent, notes, reason=reason)

    async def get_notes(self, caller: Caller, agent: str | None = None) -> str:
        """An agent's notes: readable by that agent and by operators only (:meth:`Notes.get_notes`)."""
        return await self._notes.get_notes(caller, agent)

    async def working_memory(self, workspace: str, mind: str) -> dict[str, Any]:
        """A mind's working memory with each item's content and its memory's current status (a memory
        retracted or archived since it entered stays held until it decays out, marked so), and when its
        content was erased, if it was (:meth:`Notes.working_memory`)."""
        return await self._notes.working_memory(workspace, mind)

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
        """A session-scoped hot-tier item (the same item remembered again is mentioned instead)
        (:meth:`Maintenance.remember`)."""
        return await self._maintenance.remember(
            caller, session, content, domain=domain, topic=topic, importance=importance
        )

    async def consolidate(
        self, caller: Caller, domain: str | None = None, *, stale_after: timedelta = timedelta(days=1)
    ) -> ConsolidateReport:
        """Promote hot-tier items worth keeping to facts, merge near-duplicate facts (the kept one records
        every merged one; they stay, superseded by it), archive stale hot-tier items
        (:meth:`Maintenance.consolidate`)."""
        return await self._maintenance.consolidate(caller, domain, stale_after=stale_after)

    async def harmonize(self, caller: Caller, domain: str | None = None) -> HarmonizeReport:
        """Reconcile beliefs that diverged between agents: the same statement held by several agents becomes
        one corroborated fact (confidence raised once per corroborating agent); contradicting statements of
        different agents are decided by the conflict rules and recorded as conflicts
        (:meth:`Maintenance.harmonize`)."""
        return await self._maintenance.harmonize(caller, domain)

    async def record_meeting_decisions(
        self, caller: Caller, meeting: str, decisions: Sequence[str], *, repo: str | None = None
    ) -> list[FactOutcome]:
        """Each decision becomes a fact in the ``decisions`` domain. ``"topic: text"`` names the decision's
        topic (a later decision on the same topic supersedes it); otherwise the topic is the meeting and the
        decision's position (:meth:`Maintenance.record_meeting_decisions`)."""
        return await self._maintenance.record_meeting_decisions(caller, meeting, decisions, repo=repo)
