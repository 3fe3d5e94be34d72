"""Who is calling and what they may do: callers, roles, access grants and the access mode (requirements §7).

Compatible mode (the default): no grant row means read; a new domain seeds write for every role
(``*``); reads are not gated. Strict mode (per workspace): no row means none, and every read path
(search, preamble, fact and policy lists) shows only domains the caller's role may read. Operators
have write everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from noema.domain.knowledge import ACCESS_ORDER, effective_access
from noema.errors import Kind, OperationError
from noema.ports import AccessReads
from noema.records import dataclass
from noema_events.vocabulary import NAME_PATTERN

__all__ = ["AccessControl", "Caller", "InsufficientMemoryPermission"]


class InsufficientMemoryPermission(OperationError):
    """The caller's role lacks the access this operation needs; nothing was written."""

    kind = Kind.FORBIDDEN


@dataclass(frozen=True)
class Caller:
    """Who is asking: an agent (with a role) in a workspace, or an operator (all access)."""

    workspace: str
    agent: str
    role: str = "agent"
    operator: bool = False

    def __post_init__(self) -> None:
        for name in ("workspace", "agent", "role"):
            if not re.match(NAME_PATTERN, getattr(self, name)):
                raise OperationError(
                    f"{name} must be 1-64 letters, digits, '_' or '-' (got {getattr(self, name)!r})"
                )

    @property
    def actor(self) -> str:
        """How events name the caller: the agent, or ``operator:<name>``."""
        return f"operator:{self.agent}" if self.operator else self.agent


class AccessControl:
    """Decides access from the grants and the access mode the read model holds."""

    def __init__(self, reads: AccessReads) -> None:
        self.reads = reads

    async def access_mode(self, workspace: str) -> str:
        """``compatible`` (default) or ``strict``."""
        return await self.reads.access_mode(workspace)

    async def grants(self, workspace: str, strict: bool | None = None) -> dict[tuple[str, str], str]:
        """(role, domain) → access; in strict mode without the seeds of compatible mode."""
        if strict is None:
            strict = await self.access_mode(workspace) == "strict"
        return await self.reads.grants(workspace, strict)

    async def access(self, caller: Caller, domain: str) -> str:
        """The caller's access to a domain key (operators: write)."""
        if caller.operator:
            return "write"
        strict = await self.access_mode(caller.workspace) == "strict"  # read once for both
        return effective_access(await self.grants(caller.workspace, strict), caller.role, domain, strict)

    async def readable_domains(self, caller: Caller) -> list[str] | None:
        """Domains the caller may read, or None when reads are not gated (compatible mode, operators)."""
        if caller.operator or await self.access_mode(caller.workspace) != "strict":
            return None
        grants = await self.grants(caller.workspace, strict=True)
        domains = {d for (_, d) in grants} | set(await self.reads.domain_keys(caller.workspace))
        return sorted(d for d in domains if ACCESS_ORDER[effective_access(grants, caller.role, d, True)] >= 1)

    async def writable(self, caller: Caller, domains: Iterable[str]) -> set[str]:
        """Which of ``domains`` the caller may write (all of them for operators and, for facts, in
        compatible mode — callers decide which rule applies)."""
        if caller.operator:
            return set(domains)
        strict = await self.access_mode(caller.workspace) == "strict"
        grants = await self.grants(caller.workspace, strict)
        return {d for d in domains if effective_access(grants, caller.role, d, strict) == "write"}

    async def require(self, caller: Caller, domain: str, needed: str, what: str) -> None:
        """Refuse ``what`` (InsufficientMemoryPermission) unless the caller has ``needed`` access."""
        have = await self.access(caller, domain)
        if ACCESS_ORDER[have] < ACCESS_ORDER[needed]:
            raise InsufficientMemoryPermission(
                f"role {caller.role!r} has {have} access to domain {domain!r} in workspace "
                f"{caller.workspace!r}; {what} needs {needed}"
            )
