"""Policies (requirements §7): rules of a domain an agent must follow. Proposing or superseding one needs
write on its domain; a superseded policy stays, pointing at its replacement."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from noema.application.access import Caller, InsufficientMemoryPermission
from noema.application.knowledge.context import KnowledgeContext, domain_ref
from noema.application.knowledge.domains import Domains
from noema.domain.knowledge import DomainRef
from noema.errors import Conflict, NotFound, OperationError
from noema.ids import derive_id, new_id
from noema_events import (
    Event,
    PolicyProposed,
    PolicyProposedPayload,
    PolicySuperseded,
    PolicySupersededPayload,
)

__all__ = ["Policies"]


class Policies:
    """Proposing, superseding (or deactivating) and listing policies."""

    def __init__(self, ctx: KnowledgeContext, domains: Domains) -> None:
        self._ctx = ctx
        self._domains = domains

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
        ref = domain_ref(domain, repo)
        events = await self._domains.domain_events(caller, ref)
        if not events:
            await self._ctx.require(caller, ref.key, "write", "proposing a policy")
        elif await self._ctx.access_mode(caller.workspace) == "strict" and not caller.operator:
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
        now = self._ctx.clock()
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
        await self._ctx.publish(
            events, (caller, action, supersedes or policy_id, reason or f"{default} by an operator")
        )
        return policy_id

    async def supersede_policy(
        self, caller: Caller, policy_id: str, rule: str | None = None, *, reason: str = ""
    ) -> str | None:
        """Replace an active policy (by id or unique prefix) with a new rule (or deactivate it when
        ``rule`` is None)."""
        # Callers that show the full id resolve it first; a full id resolves again on the primary key.
        policy_id = await self.resolve_policy_id(caller, policy_id)
        row = await self._ctx.reads.policy(caller.workspace, policy_id)
        if row is None:
            raise NotFound(f"no policy {policy_id} in workspace {caller.workspace}")
        if not row["active"]:
            raise Conflict(f"policy {policy_id} is no longer active")
        if rule is not None and not rule.strip():
            raise OperationError("the new rule must not be blank (give no rule to deactivate the policy)")
        await self._ctx.require(caller, row["domain"], "write", "superseding a policy")
        ref = domain_ref(row["domain"], None)
        if rule is not None and rule.strip():
            return await self._publish_policy(
                caller, ref, rule.strip(), row["required_role"], (), [], supersedes=policy_id, reason=reason
            )
        await self._ctx.publish(
            [
                PolicySuperseded(
                    **self._ctx.envelope(caller.workspace, caller.actor),
                    payload=PolicySupersededPayload(policy_id=policy_id, reason=reason or "deactivated"),
                )
            ],
            (caller, "correct", policy_id, reason or "policy deactivated by an operator"),
        )
        return None

    async def resolve_policy_id(self, caller: Caller, given: str) -> str:
        """A policy's full id from its id or a unique prefix (≥ 6 characters) in the caller's workspace."""
        return await self._ctx.full_id("policy", caller.workspace, given)

    async def list_policies(self, caller: Caller, *, include_inactive: bool = False) -> list[dict[str, Any]]:
        """Policies the caller may read, by domain."""
        readable = await self._ctx.readable_domains(caller)
        return await self._ctx.reads.list_policies(caller.workspace, include_inactive, readable)
