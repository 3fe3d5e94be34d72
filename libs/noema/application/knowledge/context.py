"""What every knowledge concern shares: the read model and event sink ports (:mod:`noema.ports`), the
clock, and the checks made before anything is published (access, operator-only, domain references,
fact and policy ids)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypedDict, cast

from noema.application.access import AccessControl, Caller, InsufficientMemoryPermission
from noema.domain.knowledge import DomainRef
from noema.errors import InvalidQuery, NotFound, OperationError
from noema.ids import derive_id, new_id, short_prefix_hint
from noema.ports import EventSink, ExpectingSink, KnowledgeReadModel
from noema_events import Event, OperatorAction, OperatorActionPayload

__all__ = ["Audit", "Envelope", "KnowledgeContext", "domain_ref", "require_operator", "utcnow"]

Audit = tuple[Caller, str, str | None, str]
"""(caller, action, target id, reason): what an operator's change records in ``operator.action``."""


class Envelope(TypedDict):
    """The envelope of an event that starts its own correlation (the one event of a command)."""

    id: str
    workspace: str
    occurred_at: datetime
    correlation_id: str
    actor: str


def utcnow() -> datetime:
    """The default clock."""
    return datetime.now(UTC)


def domain_ref(domain: str, repo: str | None) -> DomainRef:
    """The domain key a name (and repository) refers to; a malformed one is an OperationError."""
    try:
        return DomainRef.parse(domain, repo)
    except ValueError as exc:
        raise OperationError(str(exc)) from None


def require_operator(caller: Caller, what: str) -> None:
    """Refuse ``what`` to anyone but an operator."""
    if not caller.operator:
        raise InsufficientMemoryPermission(f"{what} is for operators")


@dataclass(frozen=True)
class KnowledgeContext:
    """The resources the knowledge concerns share, and the publishing and checking they all do."""

    reads: KnowledgeReadModel
    publisher: EventSink
    access_control: AccessControl
    clock: Callable[[], datetime]
    appends: ExpectingSink | None = None
    """Where optimistic appends go (notes' ``record_observation``): usually the publisher itself."""

    async def publish(
        self,
        events: Sequence[Event],
        audit: Audit | None = None,
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
        return await self.publisher.publish(events)

    def envelope(self, workspace: str, actor: str) -> Envelope:
        """The envelope of a new event occurring now, whose fresh id is its correlation id too."""
        event_id = new_id()
        return Envelope(
            id=event_id, workspace=workspace, occurred_at=self.clock(), correlation_id=event_id, actor=actor
        )

    async def access_mode(self, workspace: str) -> str:
        """``compatible`` (default) or ``strict``."""
        return await self.access_control.access_mode(workspace)

    async def readable_domains(self, caller: Caller) -> list[str] | None:
        """Domains the caller may read, or None when reads are not gated."""
        return await self.access_control.readable_domains(caller)

    async def require(self, caller: Caller, domain: str, needed: str, what: str) -> None:
        """Refuse ``what`` unless the caller has ``needed`` access to ``domain``."""
        await self.access_control.require(caller, domain, needed, what)

    async def full_id(self, what: str, workspace: str, given: str) -> str:
        """The id of the fact or policy ``given`` names: its full id, or a unique prefix of at least
        six characters (listings show eight). Unknown: NotFound; ambiguous or too short: InvalidQuery."""
        # The prefix rule is resolve_memory's (one resolve_id); the messages name the fact or policy
        # and its workspace, and a fact's "not found" says when the id is another kind of memory.
        lookup = self.reads.policy_ids if what == "policy" else self.reads.fact_ids
        found = await lookup(workspace, given)
        if len(found) > 1:
            raise InvalidQuery(f"{given} matches several {what} ids; give more of the id")
        if found:
            return found[0]
        hint = short_prefix_hint(given)
        if hint:  # too short to be looked up: the request is wrong, not the id unknown
            raise InvalidQuery(f"no {what} {given} in workspace {workspace}{hint}")
        if what == "fact":
            other = await self.reads.memory_kind(workspace, given)
            if other is not None:
                article = "an" if other[1][0] in "aeiou" else "a"
                hint = f" ({other[0]} is {article} {other[1]} memory, not a fact)"
        raise NotFound(f"no {what} {given} in workspace {workspace}{hint}")
