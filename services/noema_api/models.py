"""Request and response bodies of the operator API (msgspec Structs: the OpenAPI schemas' source).

Inputs forbid unknown fields; outputs list every field they may carry. The filters and records of
the operators' reads (listing, timeline, detail, audit) are the application layer's own
(:mod:`noema.views`), shared with ``noemactl``; they are re-exported here.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from noema.instants import Instant
from noema.operator import KnowledgeEntry
from noema.views import (
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
from noema_events.vocabulary import EpistemicKind, MemoryKind, MemoryStatus

__all__ = [
    "AuditPage",
    "AuditQuery",
    "CorrectBody",
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
    "SearchHit",
    "SearchQuery",
    "SearchResults",
    "SourceObservation",
    "TimelineQuery",
]

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


class Health(_Out, frozen=True, kw_only=True):
    """Liveness or readiness, with what is wrong when not ready."""

    status: Literal["ok", "unavailable"]
    problems: list[str] = msgspec.field(default_factory=list)
