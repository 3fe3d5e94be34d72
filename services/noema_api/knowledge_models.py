"""Request and response bodies of the knowledge endpoints: facts, policies, conflicts, grants,
domains, working memory and notes (msgspec Structs: the OpenAPI schemas' source)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec

from noema.application.views import Label, Limit, Name, Offset
from noema.instants import Instant
from noema_events.catalog import Subjects
from noema_events.vocabulary import MemoryType
from noema_sdk.models import FactOutcome

from .models import Content, DomainName, Reason, RepoDomainName, _In, _Out

__all__ = [
    "AccessMode",
    "AccessModeBody",
    "Conflict",
    "ConflictPage",
    "ConflictQuery",
    "Domain",
    "DomainPage",
    "Fact",
    "FactBody",
    "FactPage",
    "FactQuery",
    "FactResult",
    "Grant",
    "GrantBody",
    "GrantPage",
    "GrantResult",
    "Notes",
    "NotesQuery",
    "Policy",
    "PolicyBody",
    "PolicyPage",
    "PolicyQuery",
    "PolicyResult",
    "SupersedeFactBody",
    "SupersedePolicyBody",
    "WorkingMemory",
    "WorkingMemoryItem",
    "WorkingMemoryQuery",
    "WorkspaceQuery",
]

Veracity = Literal["stated", "inferred", "tool", "imported"]
Topic = Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=r"\S")]
"""A fact's topic: trimmed and lower-cased when stored, so it must hold more than whitespace."""
Slug = Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9][a-z0-9._-]{0,99}$")]


class WorkspaceQuery(_In, frozen=True, kw_only=True):
    """One workspace."""

    workspace: Name


class FactQuery(_In, frozen=True, kw_only=True):
    """Facts of a workspace; the repository's first when ``repo`` is given."""

    workspace: Name
    domain: RepoDomainName | None = None
    topic: Label | None = None
    repo: Slug | None = None
    include_inactive: bool = False
    limit: Limit = 100
    offset: Offset = 0


class PolicyQuery(_In, frozen=True, kw_only=True):
    """Policies of a workspace."""

    workspace: Name
    include_inactive: bool = False


class ConflictQuery(_In, frozen=True, kw_only=True):
    """Recorded conflicts, newest first."""

    workspace: Name
    domain: DomainName | None = None
    limit: Limit = 50
    offset: Offset = 0


class WorkingMemoryQuery(_In, frozen=True, kw_only=True):
    """One mind's working memory."""

    workspace: Name
    mind: Name


class NotesQuery(_In, frozen=True, kw_only=True):
    """One agent's notes (operators only)."""

    workspace: Name
    agent: Name


class FactBody(_In, frozen=True, kw_only=True):
    """A fact entered by an operator."""

    workspace: Name
    domain: RepoDomainName
    topic: Topic
    content: Content
    veracity: Veracity = "stated"
    memory_type: MemoryType = "fact"
    repo: Slug | None = None
    valid_until: Instant | None = None
    reason: Reason
    subjects: Subjects = msgspec.field(default_factory=list)
    """Who or what it is about (opaque keys such as ``person:4711``): ``noemactl erase --subject``
    finds it by them."""


class SupersedeFactBody(_In, frozen=True, kw_only=True):
    """The new content of a fact, and why."""

    content: Content
    veracity: Veracity = "stated"
    reason: Reason


class PolicyBody(_In, frozen=True, kw_only=True):
    """A policy entered by an operator."""

    workspace: Name
    domain: RepoDomainName
    rule: Content
    repo: Slug | None = None
    required_role: Name | None = None
    reason: Reason


class SupersedePolicyBody(_In, frozen=True, kw_only=True):
    """The new rule (none: deactivate), and why."""

    rule: Content | None = None
    reason: Reason


class GrantBody(_In, frozen=True, kw_only=True):
    """(role, domain) → access; role ``*`` is every role without a grant of its own."""

    workspace: Name
    role: Annotated[str, msgspec.Meta(pattern=r"^(\*|[A-Za-z0-9_-]{1,64})$")]
    domain: RepoDomainName
    access: Literal["none", "read", "write"]
    repo: Slug | None = None
    reason: Reason


class AccessModeBody(_In, frozen=True, kw_only=True):
    """A workspace's access mode."""

    workspace: Name
    mode: Literal["compatible", "strict"]
    reason: Reason


class Fact(_Out, frozen=True, kw_only=True):
    """A fact (a semantic memory of a domain and topic)."""

    id: str
    agent: str
    domain: str | None
    topic: str | None
    content: str
    epistemic_kind: str
    veracity: str | None
    confidence: float
    mention_count: int
    status: str
    superseded_by: str | None
    repo: str | None
    memory_type: str
    created_at: datetime
    updated_at: datetime


class FactPage(_Out, frozen=True, kw_only=True):
    """A page of facts."""

    items: list[Fact]
    next_offset: int | None = None
    """Pass as ``offset`` for the next page; null on the last page."""
    next: str | None = None
    """The next page's URL (also sent as a ``Link: <...>; rel="next"`` header); null on the last page."""


# The agents' result of the same write (noema_sdk.models.FactOutcome): its fields, one description.
class FactResult(FactOutcome, frozen=True, kw_only=True):
    """What a fact write did: ``proposed`` (new) or ``mentioned`` (an equivalent one exists)."""


class Policy(_Out, frozen=True, kw_only=True):
    """A policy."""

    id: str
    domain: str
    repo: str | None
    rule: str
    required_role: str | None
    active: bool
    superseded_by: str | None
    proposed_by: str
    created_at: datetime


class PolicyPage(_Out, frozen=True, kw_only=True):
    """Every policy of the workspace (by domain)."""

    items: list[Policy]
    total: int
    """How many there are: the list is complete, never paged."""


class PolicyResult(_Out, frozen=True, kw_only=True):
    """The new policy (None when one was deactivated)."""

    policy_id: str | None
    superseded: str | None = None


class Conflict(_Out, frozen=True, kw_only=True):
    """A recorded conflict with both sides and the rule that decided."""

    id: str
    domain: str | None
    topic: str | None
    rule: str
    detail: str
    decided_by: str
    created_at: datetime
    winner_id: str
    winner_content: str | None
    winner_agent: str | None
    loser_id: str
    loser_content: str | None
    loser_agent: str | None


class ConflictPage(_Out, frozen=True, kw_only=True):
    """A page of conflicts, newest first."""

    items: list[Conflict]
    next_offset: int | None = None
    """Pass as ``offset`` for the next page; null on the last page."""
    next: str | None = None
    """The next page's URL (also sent as a ``Link: <...>; rel="next"`` header); null on the last page."""


class Grant(_Out, frozen=True, kw_only=True):
    """An access grant."""

    role: str
    domain: str
    access: str
    seeded: bool
    changed_by: str
    updated_at: datetime


class GrantPage(_Out, frozen=True, kw_only=True):
    """A workspace's access mode and grants."""

    access_mode: str
    grants: list[Grant]


class GrantResult(_Out, frozen=True, kw_only=True):
    """The grant as set, and what it was."""

    role: str
    domain: str
    access: str
    previous: str | None


class Domain(_Out, frozen=True, kw_only=True):
    """A domain (``repo:<slug>/name`` when repository-scoped)."""

    domain: str
    name: str
    repo: str | None
    created_by: str
    created_at: datetime


class DomainPage(_Out, frozen=True, kw_only=True):
    """Every domain of the workspace."""

    items: list[Domain]
    total: int
    """How many there are: the list is complete, never paged."""


class WorkingMemoryItem(_Out, frozen=True, kw_only=True):
    """An item a mind holds."""

    memory_id: str
    weight: float
    entered_at: str
    gist: str = ""
    content: str
    status: str = "active"
    """The held memory's status now (``unknown`` when it is not projected yet)."""
    erased_at: datetime | None = None
    """When the held memory's content was erased (then ``content`` is empty); null if never."""


class WorkingMemory(_Out, frozen=True, kw_only=True):
    """A mind's working memory, heaviest first."""

    workspace: str
    mind: str
    capacity: int | None
    items: list[WorkingMemoryItem]
    updated_at: datetime | None


class AccessMode(_Out, frozen=True, kw_only=True):
    """A workspace's access mode as set."""

    workspace: str
    access_mode: str


class Notes(_Out, frozen=True, kw_only=True):
    """An agent's private notes."""

    workspace: str
    agent: str
    notes: str
