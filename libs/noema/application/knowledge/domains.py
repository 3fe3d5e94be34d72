"""Domains, grants and the access mode (requirements §7): who may read and write which domain, and the
``domain.created`` (with its seeded grant in compatible mode) that a domain's first use publishes."""

from __future__ import annotations

import re
from typing import Any, cast

from noema.application.access import Caller
from noema.application.knowledge.context import KnowledgeContext, domain_ref, require_operator
from noema.domain.knowledge import ACCESS_ORDER, DomainRef
from noema.errors import OperationError
from noema.ids import derive_id
from noema_events import (
    DomainCreated,
    DomainCreatedPayload,
    Event,
    GrantChanged,
    GrantChangedPayload,
    WorkspaceConfigured,
    WorkspaceConfiguredPayload,
)
from noema_events.envelope import NAME_PATTERN
from noema_events.vocabulary import Access

__all__ = ["ACCESS_MODES", "Domains"]

ACCESS_MODES = ("compatible", "strict")


class Domains:
    """Domains of a workspace, the grants on them and the workspace's access mode."""

    def __init__(self, ctx: KnowledgeContext) -> None:
        self._ctx = ctx

    async def access_mode(self, workspace: str) -> str:
        """``compatible`` (default) or ``strict``."""
        return await self._ctx.access_mode(workspace)

    async def readable_domains(self, caller: Caller) -> list[str] | None:
        """Domains the caller may read, or None when reads are not gated."""
        return await self._ctx.readable_domains(caller)

    async def domain_events(self, caller: Caller, ref: DomainRef) -> list[Event]:
        """``domain.created`` on first use; in compatible mode it seeds write for every role."""
        if await self._ctx.reads.domain_exists(caller.workspace, ref.key):
            return []
        now = self._ctx.clock()
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
        require_operator(operator, "changing grants")
        if access not in ACCESS_ORDER:
            raise OperationError(f"access must be one of none, read, write (got {access!r})")
        if role != "*" and not re.match(NAME_PATTERN, role):
            raise OperationError(f"role must be 1-64 letters, digits, '_' or '-', or '*' (got {role!r})")
        ref = domain_ref(domain, repo)
        previous = await self._ctx.reads.grant(operator.workspace, role, ref.key)
        events = await self.domain_events(operator, ref)
        events.append(
            GrantChanged(
                **self._ctx.envelope(operator.workspace, operator.actor),
                payload=GrantChangedPayload(
                    role=role,
                    domain=ref.key,
                    repo=ref.repo,
                    access=cast(Access, access),
                    previous=cast(Access | None, previous),
                ),
            )
        )
        await self._ctx.publish(
            events,
            (operator, "grant_change", None, reason or f"grant {role} {access} on {ref.key}"),
            {"role": role, "domain": ref.key, "access": access, "previous": str(previous or "")},
        )
        return {"role": role, "domain": ref.key, "access": access, "previous": previous}

    async def set_access_mode(self, operator: Caller, mode: str, *, reason: str = "") -> None:
        """Switch the operator's workspace between ``compatible`` and ``strict`` access."""
        require_operator(operator, "changing the access mode")
        if mode not in ACCESS_MODES:
            raise OperationError(f"access mode must be compatible or strict (got {mode!r})")
        await self._ctx.publish(
            [
                WorkspaceConfigured(
                    **self._ctx.envelope(operator.workspace, operator.actor),
                    payload=WorkspaceConfiguredPayload(access_mode=cast(Any, mode)),
                )
            ],
            (operator, "grant_change", None, reason or f"access mode {mode}"),
            {"access_mode": mode},
        )

    async def list_grants(self, workspace: str) -> list[dict[str, Any]]:
        """Every grant row of a workspace."""
        return await self._ctx.reads.list_grants(workspace)

    async def list_domains(self, caller: Caller) -> list[dict[str, Any]]:
        """Domains of the workspace the caller may read."""
        readable = await self.readable_domains(caller)
        return await self._ctx.reads.list_domains(caller.workspace, readable)
