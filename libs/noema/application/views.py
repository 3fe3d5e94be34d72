"""What operator reads take and return: the filters of a listing, the timeline and the audit log, and
the records they answer with (memories, events, provenance), as msgspec Structs.

Every operator surface shares them: the HTTP API decodes its query strings into the filters and
answers with the records (they are its OpenAPI schemas), and ``noemactl`` builds the same filters with
:func:`parse` and prints the same records as JSON. So a filter means one thing, is refused for one
reason, and the two surfaces' JSON agree field for field.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

import msgspec
import msgspec.inspect

from noema.errors import InvalidQuery
from noema.inputs import InvalidInput, convert
from noema.instants import Instant
from noema_events import KNOWN_TAGS
from noema_events.envelope import NAME_PATTERN
from noema_events.vocabulary import EpistemicKind, MemoryKind, MemoryStatus

__all__ = [
    "AuditPage",
    "AuditQuery",
    "Embedding",
    "EventRecord",
    "InvalidQuery",
    "ListQuery",
    "Memory",
    "MemoryDetail",
    "MemoryPage",
    "MemorySummary",
    "Relationship",
    "SourceObservation",
    "TimelineQuery",
    "parse",
]

Name = Annotated[str, msgspec.Meta(pattern=NAME_PATTERN)]
MindName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]{0,64}$")]
Label = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
Limit = Annotated[int, msgspec.Meta(ge=1, le=200)]
Offset = Annotated[int, msgspec.Meta(ge=0, le=1_000_000)]
_EVENT_NAMES = sorted({*KNOWN_TAGS, *(t.rsplit(".v", 1)[0] for t in KNOWN_TAGS)})
EventType = Annotated[
    str,
    msgspec.Meta(
        pattern=r"^[a-z_]+(\.[a-z_]+)*(\.v[0-9]+)?$",
        max_length=100,
        # The audit log refuses a type no event has (a typo would look like an empty log), so the
        # schema lists the known ones: a name means every version of it, a tag just that one.
        extra_json_schema={"enum": _EVENT_NAMES},
    ),
]

Q = TypeVar("Q", bound=msgspec.Struct)


class _In(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of inputs: unknown fields are refused."""


class _Out(msgspec.Struct, frozen=True, kw_only=True):
    """Base of outputs."""


def _fields(struct: type[msgspec.Struct]) -> tuple[msgspec.inspect.Field, ...]:
    info = msgspec.inspect.type_info(struct)
    assert isinstance(info, msgspec.inspect.StructType)
    return info.fields


@functools.cache
def _lax_null_fields(struct: type[msgspec.Struct]) -> frozenset[str]:
    """Optional fields whose non-null type is not text (lax conversion turns "null" into None there)."""
    names = []
    for f in _fields(struct):
        if (
            isinstance(f.type, msgspec.inspect.UnionType)
            and f.type.includes_none
            and not all(
                isinstance(t, msgspec.inspect.StrType | msgspec.inspect.NoneType) for t in f.type.types
            )
        ):
            names.append(f.name)
    return frozenset(names)


def parse(query: type[Q], values: Mapping[str, Any]) -> Q:
    """``values`` (text, as in a query string, or typed; ``None`` = not given) as ``query``, checked
    against its constraints: the one validation of filters, for every surface.

    Raises :class:`InvalidQuery` naming the field and what is wrong with it.
    """
    given = {k: v for k, v in values.items() if v is not None}
    for name in sorted(_lax_null_fields(query) & {k for k, v in given.items() if v == "null"}):
        # Lax conversion would read the text "null" as an absent value: refuse it instead.
        raise InvalidQuery(f"`{name}` cannot be 'null' (leave it out instead)")
    try:
        return convert(query, given, strict=False, whole="the query")
    except InvalidInput as exc:
        raise InvalidQuery(str(exc)) from None


# --- filters ------------------------------------------------------------------------------------


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
    type: EventType | None = None
    actor: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None
    before: Annotated[int, msgspec.Meta(ge=1, le=2**63 - 1)] | None = None
    limit: Limit = 50


# --- records ------------------------------------------------------------------------------------


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
    """At the time of the read (the facade's clock; as of a point, its time), computed from the
    stored value (docs/memory-model.md#activation)."""
    importance: float
    credibility: float
    recall_count: int
    participants: list[str]
    happened_at: datetime | None
    created_at: datetime
    origin_event: str
    origin_seq: int
    erased_at: datetime | None
    """When the memory's content was erased (``noemactl erase``, docs/privacy.md): its content and
    lists are then empty for good; null if it never was."""


class Memory(MemorySummary, frozen=True, kw_only=True):
    """A memory record with every field (requirements §3)."""

    salience: float
    veracity: str | None
    activation_at: datetime
    """When the stored activation was set: the memory's creation or last reinforcement."""
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
    """A page of memories; pass ``next_offset`` as ``offset`` for the next page (null at the end)."""

    items: list[Memory]
    limit: int
    offset: int
    next_offset: int | None = None
    next: str | None = None
    """The next page's URL (path and query string; the HTTP API fills it in, and sends it as a
    ``Link: <...>; rel="next"`` header too); null on the last page."""


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


class Embedding(_Out, frozen=True, kw_only=True):
    """A vector kept for the memory: the model that made it and its size."""

    model: str
    dimensions: int
    created_at: datetime


class MemoryDetail(_Out, frozen=True, kw_only=True):
    """A memory with its provenance, its edges, its vectors and every event that cites it."""

    memory: Memory
    origin: EventRecord | None
    source_observations: list[SourceObservation]
    relationships: list[Relationship]
    citing_events: list[EventRecord]
    embeddings: list[Embedding]


class AuditPage(_Out, frozen=True, kw_only=True):
    """Events, newest first; pass ``next_before`` as ``before`` for the next page (null at the end)."""

    items: list[EventRecord]
    next_before: int | None
    next: str | None = None
    """The next page's URL (path and query string; the HTTP API fills it in, and sends it as a
    ``Link: <...>; rel="next"`` header too); null on the last page."""
