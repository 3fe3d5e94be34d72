"""Request and response bodies of the operator API (msgspec Structs: the OpenAPI schemas' source).

Inputs forbid unknown fields; outputs list every field they may carry.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from noema.operator import KnowledgeEntry
from noema_events.envelope import NAME_PATTERN
from noema_events.vocabulary import EpistemicKind, MemoryKind, MemoryStatus

__all__ = [
    "AuditPage",
    "AuditQuery",
    "CorrectBody",
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

Name = Annotated[str, msgspec.Meta(pattern=NAME_PATTERN)]
MindName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]{0,64}$")]
Label = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
Limit = Annotated[int, msgspec.Meta(ge=1, le=200)]
Offset = Annotated[int, msgspec.Meta(ge=0, le=1_000_000)]
Instant = Annotated[datetime, msgspec.Meta(tz=True)]
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
    limit: Annotated[int, msgspec.Meta(ge=1, le=100)] = 10
    explain: bool = True


class ListQuery(_In, frozen=True, kw_only=True):
    """Memories, newest first, with filters; every status unless ``status`` is given."""

    workspace: Name | None = None
    mind: MindName | None = None
    kind: MemoryKind | None = None
    epistemic_kind: EpistemicKind | None = None
    status: MemoryStatus | None = None
    domain: Label | None = None
    since: Instant | None = None
    until: Instant | None = None
    limit: Limit = 50
    offset: Offset = 0


class TimelineQuery(_In, frozen=True, kw_only=True):
    """A workspace's memories in the order things happened (``happened_at``, else ``created_at``)."""

    workspace: Name
    mind: MindName | None = None
    since: Instant | None = None
    until: Instant | None = None
    order: Literal["asc", "desc"] = "desc"
    limit: Limit = 50
    offset: Offset = 0


class AuditQuery(_In, frozen=True, kw_only=True):
    """The audit log: events newest first; ``before`` (a sequence) pages back."""

    workspace: Name | None = None
    type: (
        Annotated[str, msgspec.Meta(pattern=r"^[a-z_]+(\.[a-z_]+)*(\.v[0-9]+)?$", max_length=100)] | None
    ) = None
    actor: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None
    before: Annotated[int, msgspec.Meta(ge=1, le=2**63 - 1)] | None = None
    limit: Limit = 50


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


class MemorySummary(_Out, frozen=True, kw_only=True):
    """The display fields of a memory."""

    id: str
    workspace: str
    mind: str
    kind: str
    epistemic_kind: str
    content: str
    domain: str | None
    topic: str | None
    repo: str | None
    status: str
    memory_type: str
    confidence: float
    activation: float
    importance: float
    credibility: float
    recall_count: int
    participants: list[str]
    happened_at: datetime | None
    created_at: datetime
    origin_event: str
    origin_seq: int


class Memory(MemorySummary, frozen=True, kw_only=True):
    """A memory record with every field (SPEC §3)."""

    salience: float
    veracity: str | None
    activation_at: datetime
    superseded_by: str | None
    valid_until: datetime | None
    mention_count: int
    source_observation_ids: list[str]
    channel: str | None
    source: str | None
    steps: list[str]
    preconditions: list[str]
    outcomes: list[str]
    session: str | None
    updated_at: datetime


class MemoryPage(_Out, frozen=True, kw_only=True):
    """A page of memories."""

    items: list[Memory]
    limit: int
    offset: int


class EventRecord(_Out, frozen=True, kw_only=True):
    """An event as kept in the audit copy of the stream."""

    seq: int
    id: str
    type: str
    workspace: str
    mind: str
    occurred_at: datetime
    causation_id: str | None
    correlation_id: str
    actor: str
    subject: str
    payload: dict[str, Any]


class Relationship(_Out, frozen=True, kw_only=True):
    """An edge from or to the memory, with the other end's content."""

    id: str
    relation: str
    from_id: str
    to_id: str
    direction: Literal["in", "out"]
    confidence: float
    source: str
    created_at: datetime
    other_content: str


class SourceObservation(_Out, frozen=True, kw_only=True):
    """An observation the memory came from, with the attention decision that admitted it (if kept)."""

    id: str
    decision: dict[str, Any] | None


class MemoryDetail(_Out, frozen=True, kw_only=True):
    """A memory with its provenance, its edges and every event that cites it."""

    memory: Memory
    origin: EventRecord | None
    source_observations: list[SourceObservation]
    relationships: list[Relationship]
    citing_events: list[EventRecord]


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


class AuditPage(_Out, frozen=True, kw_only=True):
    """Events, newest first; pass ``next_before`` as ``before`` for the next page (null at the end)."""

    items: list[EventRecord]
    next_before: int | None


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
