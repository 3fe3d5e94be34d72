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
surfaces call. Composition rather than mixins: each concern names what it depends on (facts and
policies need the domains' ``domain.created``; maintenance proposes facts) instead of reaching into
one shared ``self``, and the context is the only state they share.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from noema.application.access import AccessControl, Caller, InsufficientMemoryPermission
from noema.application.knowledge.context import KnowledgeContext, utcnow
from noema.application.knowledge.domains import ACCESS_MODES, Domains
from noema.application.knowledge.events import conflict_events, mention_event, superseded_event
from noema.application.knowledge.facts import FactOutcome, Facts
from noema.application.knowledge.maintenance import ConsolidateReport, HarmonizeReport, Maintenance
from noema.application.knowledge.notes import Notes
from noema.application.knowledge.policies import Policies
from noema.ports import EventSink, ExpectingSink, KnowledgeReadModel

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
    production (:meth:`connected`), the in-memory adapter in the fast tests. ``appends`` (an
    :class:`~noema.ports.ExpectingSink`, usually the publisher itself) is needed only by
    ``record_observation`` (an optimistic append on the notes' subject).
    Each operation is the bound method of the concern that owns it, so its signature and docstring
    are that method's.
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
        domains = Domains(ctx)
        facts = Facts(ctx, domains)
        policies = Policies(ctx, domains)
        notes = Notes(ctx)
        maintenance = Maintenance(ctx, facts)

        self.access_mode = domains.access_mode
        self.readable_domains = domains.readable_domains
        self.domain_events = domains.domain_events
        self.set_grant = domains.set_grant
        self.set_access_mode = domains.set_access_mode
        self.list_grants = domains.list_grants
        self.list_domains = domains.list_domains

        self.propose_fact = facts.propose_fact
        self.resolve_fact_id = facts.resolve_fact_id
        self.supersede_fact = facts.supersede_fact
        self.list_facts = facts.list_facts
        self.list_conflicts = facts.list_conflicts

        self.propose_policy = policies.propose_policy
        self.resolve_policy_id = policies.resolve_policy_id
        self.supersede_policy = policies.supersede_policy
        self.list_policies = policies.list_policies

        self.update_my_notes = notes.update_my_notes
        self.record_observation = notes.record_observation
        self.set_notes = notes.set_notes
        self.get_notes = notes.get_notes
        self.working_memory = notes.working_memory

        self.remember = maintenance.remember
        self.consolidate = maintenance.consolidate
        self.harmonize = maintenance.harmonize
        self.record_meeting_decisions = maintenance.record_meeting_decisions
