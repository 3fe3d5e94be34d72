"""Request and response bodies of the operator API (msgspec Structs: the OpenAPI schemas' source).

Inputs forbid unknown fields; outputs list every field they may carry. The filters and records of
the operators' reads (listing, timeline, detail, audit, why, audit diff) are the application
layer's own (:mod:`noema.application.views`, :mod:`noema.application.audit_views`), shared with
``noemactl``; they are re-exported here.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from noema.application.audit_views import (
    AuditDiff,
    Change,
    ChangeGroup,
    DiffQuery,
    Responsible,
    Why,
    WhyQuery,
    WhyStep,
)
from noema.application.curation import KnowledgeEntry
from noema.application.views import (
    AuditPage,
    AuditQuery,
    Embedding,
    EventRecord,
    ListQuery,
    Memory,
    MemoryDetail,
    MemoryPage,
    MemorySummary,
    MindName,
    Name,
    Relationship,
    SourceObservation,
    TimelineQuery,
)
from noema.instants import Instant
from noema.runtime.backlog import WorkerLoad
from noema_events.vocabulary import EpistemicKind, MemoryKind, MemoryStatus

__all__ = [
    "AuditDiff",
    "AuditPage",
    "AuditQuery",
    "Change",
    "ChangeGroup",
    "CorrectBody",
    "DiffQuery",
    "Embedding",
    "EventRecord",
    "Health",
    "KnowledgeBody",
    "ListQuery",
    "Memory",
    "MemoryDetail",
    "MemoryPage",
    "MemorySummary",
    "OperatorResult",
    "ReasonBody",
    "Relationship",
    "ReplayStatus",
    "Responsible",
    "SearchHit",
    "SearchQuery",
    "SearchResults",
    "SourceObservation",
    "StatusCheck",
    "SystemStatus",
    "TimelineQuery",
    "Why",
    "WhyQuery",
    "WhyStep",
    "WorkerLoad",
]

SPACE = "\\t-\\r\\u001c-\\u0020\\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
"""The characters Python's ``str.strip()`` and ``\\s`` take for whitespace, as the inside of a regular
expression's character class: the OpenAPI document spells them out, since ``\\s`` is narrower in the
ECMA regular expressions of JSON Schema."""
_DOMAIN = "[a-zA-Z0-9][a-zA-Z0-9._ -]{0,99}"
"""A domain's name as :meth:`noema.domain.knowledge.DomainRef.parse` reads it: trimmed, lower-cased,
then 1-100 letters, digits, spaces, '.', '_' and '-' (the pattern spells the trimming and both cases
out). The domain patterns are the document's; the server's check is ``parse``'s, which names the rule
when it refuses."""
_SLUG = "[a-zA-Z0-9][a-zA-Z0-9._-]{0,99}"
_TRIM = f"[{SPACE}]*"
DomainName = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=200,
        description="A domain: a name (letters, digits, spaces, '.', '_' and '-'; stored lower-case) or "
        "a repository's domain written repo:<slug>/<name>.",
        extra_json_schema={"pattern": f"^{_TRIM}((?:[rR][eE][pP][oO]):{_SLUG}/)?{_DOMAIN}{_TRIM}$"},
    ),
]
"""A domain where no ``repo`` is given beside it."""
RepoDomainName = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=200,
        description="A domain's name (letters, digits, spaces, '.', '_' and '-'; stored lower-case); "
        "with `repo`, that repository's domain of this name. (The form repo:<slug>/<name> is accepted "
        "too when its slug is `repo`.)",
        extra_json_schema={"pattern": f"^{_TRIM}{_DOMAIN}{_TRIM}$"},
    ),
]
"""A domain beside a ``repo`` field: the document declares the plain name, which never contradicts it."""
RepoSlug = Annotated[str, msgspec.Meta(max_length=200, pattern=f"^{_TRIM}{_SLUG}{_TRIM}$")]
"""A repository's slug as :meth:`noema.domain.knowledge.DomainRef.parse` reads it (trimmed,
lower-cased): checked on every entry, with or without a domain beside it."""
Reason = Annotated[str, msgspec.Meta(min_length=1, max_length=2_000, pattern=r"\S")]
Content = Annotated[str, msgspec.Meta(min_length=1, max_length=32_000, pattern=r"\S")]


class _In(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of inputs: unknown fields are refused."""


class _Out(msgspec.Struct, frozen=True, kw_only=True):
    """Base of outputs."""


# --- queries ------------------------------------------------------------------------------------


class SearchQuery(_In, frozen=True, kw_only=True):
    """search_memory: the agents' own ranking, with every score component when ``explain``."""

    q: Annotated[str, msgspec.Meta(min_length=1, max_length=2_000, pattern=r"\S")]
    workspace: Name | None = None
    mode: Literal["keyword", "vector", "semantic", "hybrid"] = "hybrid"
    mind: MindName | None = None
    kind: MemoryKind | None = None
    epistemic_kind: EpistemicKind | None = None
    domain: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None
    status: MemoryStatus | None = None
    """Only memories of this status (default: active and unexpired)."""
    since: Instant | None = None
    until: Instant | None = None
    repo: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None
    """The current repository: its memories rank first, the others still follow."""
    limit: Annotated[int, msgspec.Meta(ge=1, le=100)] = 10
    explain: bool = True


# --- bodies -------------------------------------------------------------------------------------


class ReasonBody(_In, frozen=True, kw_only=True):
    """Why the operator acts (kept in the operator_action event and the audit log)."""

    reason: Reason


class CorrectBody(_In, frozen=True, kw_only=True):
    """The corrected content, and why."""

    reason: Reason
    content: Content


class KnowledgeBody(KnowledgeEntry, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A memory entered by an operator (channel ``operator``), and why."""

    domain: RepoDomainName | None = None
    repo: RepoSlug | None = None
    """The repository the memory belongs to (a slug; trimmed and lower-cased when stored)."""
    reason: Reason


# --- outputs ------------------------------------------------------------------------------------


class SearchHit(_Out, frozen=True, kw_only=True):
    """One recalled memory: its score and (with ``explain``) every component of the score."""

    id: str
    content: str
    score: float
    components: dict[str, float] | None
    memory: MemorySummary | None


class SearchResults(_Out, frozen=True, kw_only=True):
    """Results of search_memory, with how the query was read."""

    query: str
    mode: str
    intent: str | None
    weights: dict[str, float]
    results: list[SearchHit]
    unavailable: dict[str, str] = msgspec.field(default_factory=dict)
    """Voices that could not be heard, with why (``semantic``: the embedding server did not answer)."""


class OperatorResult(_Out, frozen=True, kw_only=True):
    """What an operator action published; ``memory_id`` is the memory it concerns (the new one for
    a correction or an entry)."""

    memory_id: str
    workspace: str
    action_event_id: str
    events: list[str]


class ReplayStatus(_Out, frozen=True, kw_only=True):
    """How far the read model is behind the event stream."""

    projection: str
    position: int
    stream_last_seq: int | None
    lag: int | None
    caught_up: bool | None


class StatusCheck(_Out, frozen=True, kw_only=True):
    """One check of ``noemactl status``: the part, whether it is fine, what was seen."""

    name: str
    ok: bool
    detail: str


class SystemStatus(_Out, frozen=True, kw_only=True):
    """``noemactl status --json`` of the system: every check and the per-worker figures."""

    healthy: bool
    checks: list[StatusCheck]
    workers: list[WorkerLoad]


class Health(_Out, frozen=True, kw_only=True):
    """Liveness or readiness, with what is wrong when not ready."""

    status: Literal["ok", "degraded", "unavailable"]
    problems: list[str] = msgspec.field(default_factory=list)
