"""What the application needs from the outside world, as ``typing.Protocol`` ports.

The application services (:mod:`noema.application.knowledge`, :mod:`noema.application.access`,
:mod:`noema.application.preamble`,
:mod:`noema.application.reads`, :mod:`noema.application.upkeep`, :mod:`noema.application.curation`) read
the read model and publish
events through these, never through a driver: the PostgreSQL adapter
(:mod:`noema.adapters.postgres.knowledge`, :mod:`noema.adapters.postgres.queries`) holds every SQL
statement they need, and the in-memory adapter (:mod:`noema.adapters.memory`) implements the same
ports by applying the same events, so the knowledge, access, preamble, notes and operator-read rules
are tested in milliseconds. A contract suite per port (``tests/contract``) runs against both.

Rows are plain mappings keyed by column name: the adapters agree on the keys each method documents.
Every "current" read takes ``at``, the application clock's now: a fact is current while it is
active and its ``valid_until`` is unset or later than ``at``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from noema.errors import WorkerFatal
from noema.records import dataclass

if TYPE_CHECKING:
    # Annotations only: a process imports the ports without the event loop, the event catalog or
    # the domain types it never meets (a keyword search's start-up, issue 32).
    import asyncio

    from noema.domain.knowledge import FactView
    from noema.domain.ranking import Candidate
    from noema.domain.sealed_events import KeyRequest
    from noema.domain.sealing import KeyBytes
    from noema.observations import Stored
    from noema_events import Event, ObservationRecorded, Recorded

__all__ = [
    "RESULT_FIELDS",
    "AccessReads",
    "Claim",
    "ClaimLost",
    "ClaimState",
    "ConcurrentWrite",
    "Embedder",
    "EventReads",
    "EventSink",
    "ExpectingSink",
    "FactReads",
    "Fading",
    "Keyring",
    "KnowledgeReadModel",
    "MemoryOrder",
    "MemoryReads",
    "MemoryRecords",
    "NoteReads",
    "ObservationSink",
    "PastPoint",
    "PolicyReads",
    "PreambleParts",
    "PreambleReads",
    "Projected",
    "RecallFilters",
    "RecallVoices",
    "Row",
    "Sealer",
    "SearchTimer",
    "StreamPoint",
    "VectorCache",
]

Row = dict[str, Any]
"""A read-model row keyed by column name."""


@dataclass(frozen=True, slots=True)
class Projected:
    """A stored event as the projector applies it: with its stream position and subject."""

    seq: int
    subject: str
    event: Event
    recorded: Recorded | None = None
    """The event as the stream holds it, when that is an earlier version than ``event`` (which was
    upcast on read): the audit copy keeps what was recorded, as the code of its time stored it."""


class EventSink(Protocol):
    """Where the application publishes events (:class:`noema.adapters.jetstream.EventPublisher`)."""

    async def publish(self, events: Sequence[Event]) -> int:
        """Store ``events`` all-or-nothing, in order; returns the highest stream sequence stored."""
        ...


class ConcurrentWrite(RuntimeError):
    """Someone else published on the subject since it was read (optimistic concurrency)."""


class ExpectingSink(EventSink, Protocol):
    """An event sink with optimistic concurrency on one subject (an event's workspace, mind and
    type): read the last event there, then publish only if nothing was published since
    (:class:`noema.adapters.jetstream.EventPublisher`; an agent's notes are appended so)."""

    async def last_on_subject(self, like: Event) -> tuple[int, Event] | None:
        """The stream sequence and the event last stored on the subject ``like`` is published on,
        None when there is none."""
        ...

    async def publish_expecting(self, event: Event, expected_last: int) -> int:
        """Store ``event`` only if the last sequence on its subject is still ``expected_last`` (0:
        nothing yet); returns its stream sequence. Raises :class:`ConcurrentWrite` when another
        writer got there first: the caller re-reads and retries. An event id stored already
        (``Nats-Msg-Id``) is not stored again: it answers with that event's sequence when the last
        sequence still holds (JetStream checks that first). Raises :class:`TimeoutError` when no
        answer came in time (stored or not: the next read tells)."""
        ...


E = TypeVar("E", bound="Event")


class Embedder(Protocol):
    """Turns text into vectors of one model; ``name`` keys the vectors so spaces never mix
    (:mod:`noema.adapters.embedders`)."""

    name: str
    dimensions: int

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for stored texts (normalised)."""
        ...

    def embed_query(self, text: str) -> list[float]:
        """Vector for a search query (normalised)."""
        ...


class VectorCache(Protocol):
    """Vectors computed lately, by the document they embed (never a source of truth: a failure is a
    miss; :class:`noema.adapters.vector_cache.JetStreamVectorCache`)."""

    async def get_many(self, documents: Sequence[str]) -> list[list[float] | None]:
        """The cached vector of each document (None: not there)."""
        ...

    async def put_many(self, documents: Sequence[str], vectors: Sequence[Sequence[float]]) -> None:
        """Leave ``vectors`` (of ``documents``, in order) in the cache."""
        ...

    async def producer_alive(self, now: float) -> bool:
        """Whether a process that puts vectors (retrieve) said lately that it is working."""
        ...


@dataclass(frozen=True)
class RecallFilters:
    """What a search may return. Only active, unexpired memories unless asked otherwise."""

    workspace: str | None
    """None searches every workspace (operators only; agents are always scoped)."""
    mind: str | None = None
    kinds: Sequence[str] = ()
    epistemic_kinds: Sequence[str] = ()
    domains: Sequence[str] = ()
    statuses: Sequence[str] = ("active",)
    since: datetime | None = None
    until: datetime | None = None
    include_expired: bool = False
    hidden_domains: Sequence[str] = field(default=())
    """Domains the caller may not read."""
    readable_domains: Sequence[str] | None = None
    """Strict access mode: only memories without a domain or in these domains (None: no limit)."""
    exclude_ids: Sequence[str] = ()
    """Memories that are not candidates at all (they neither appear nor shift the normalisation)."""
    now: datetime | None = None
    """The time a memory's ``valid_until`` is compared with (the application's clock; None: the
    database's ``now()``). A read as of a past point passes that point's time."""


class Keyring(Protocol):
    """Where the data keys content is sealed under live
    (:class:`noema.adapters.postgres.keyring.PostgresKeyring`): destroying a key erases what it
    sealed (docs/privacy.md)."""

    async def ensure(self, requests: Sequence[KeyRequest]) -> dict[str, KeyBytes]:
        """The key of each request (None when destroyed), created with its links when new."""
        ...

    async def lookup(self, key_ids: Collection[str]) -> dict[str, KeyBytes]:
        """The keys of ``key_ids`` that exist (None when destroyed)."""
        ...


class Sealer(Protocol):
    """Seals events' content before they are published and opens events read back
    (:class:`noema.application.sealing.KeyringSealer`; the rules: :mod:`noema.domain.sealed_events`)."""

    async def seal(self, events: Sequence[E]) -> list[E]: ...

    async def open(self, events: Sequence[E]) -> list[E]: ...


class AccessReads(Protocol):
    """The access mode, grants and domains of a workspace."""

    async def access_mode(self, workspace: str) -> str:
        """``compatible`` (no row) or ``strict``."""
        ...

    async def grants(self, workspace: str, strict: bool) -> dict[tuple[str, str], str]:
        """(role, domain) → access; without the seeded rows when ``strict``."""
        ...

    async def grant(self, workspace: str, role: str, domain: str) -> str | None:
        """The access of one grant row, None when there is no row."""
        ...

    async def list_grants(self, workspace: str) -> list[Row]:
        """Every grant row (role, domain, access, seeded, changed_by, updated_at) by domain, role."""
        ...

    async def domain_exists(self, workspace: str, domain: str) -> bool:
        """Whether ``domain.created`` was applied for this key."""
        ...

    async def domain_keys(self, workspace: str) -> list[str]:
        """Every domain key of the workspace."""
        ...

    async def list_domains(self, workspace: str, readable: Sequence[str] | None) -> list[Row]:
        """Domains (domain, name, repo, created_by, created_at) by key, only ``readable`` ones
        unless None."""
        ...


class FactReads(Protocol):
    """Facts (semantic memories of a domain and topic), the hot tier and recorded conflicts."""

    async def current_facts(
        self,
        workspace: str,
        *,
        at: datetime,
        domain: str | None = None,
        topic: str | None = None,
        long_only: bool = False,
    ) -> list[FactView]:
        """Current facts at ``at`` (of ``domain``/``topic`` when given; long-term only with
        ``long_only``) in stream order."""
        ...

    async def slot_rivals(
        self,
        workspace: str,
        domain: str,
        topic: str,
        *,
        before_seq: int,
        exclude: Sequence[str],
        at: datetime,
    ) -> list[FactView]:
        """The long-term facts of a slot current at ``at`` that were created before stream
        sequence ``before_seq``, except ``exclude``: what a new fact is decided against."""
        ...

    async def facts_with_status(self, ids: Sequence[str]) -> dict[str, tuple[FactView, str]]:
        """id → (fact, status) for the ids that exist."""
        ...

    async def fact(self, workspace: str, memory_id: str) -> Row | None:
        """A semantic memory's id, domain, topic, status, repo and memory_type."""
        ...

    async def fact_ids(self, workspace: str, given: str) -> list[str]:
        """Semantic memory ids equal to ``given`` or starting with its prefix, in id order, at most 2
        (exact match first)."""
        ...

    async def memory_kind(self, workspace: str, given: str) -> tuple[str, str] | None:
        """(id, kind) of a memory of any kind with the id ``given`` or its prefix."""
        ...

    async def list_facts(
        self,
        workspace: str,
        *,
        at: datetime,
        domain: str | None,
        topic: str | None,
        include_inactive: bool,
        readable: Sequence[str] | None,
        repo: str | None,
        limit: int,
        offset: int = 0,
    ) -> list[Row]:
        """Facts for a listing (``expired`` for an active fact past ``valid_until`` at ``at``), the
        ``repo``'s first, then by domain, topic and newest; ``limit`` of them after the first ``offset``."""
        ...

    async def list_conflicts(
        self, workspace: str, domain: str | None, readable: Sequence[str] | None, limit: int, offset: int = 0
    ) -> list[Row]:
        """Recorded conflicts newest first with both sides' content and agent (``limit`` of them
        after the first ``offset``)."""
        ...

    async def hot_items(self, workspace: str, mind: str, session: str) -> list[FactView]:
        """The active hot-tier items of one session."""
        ...

    async def hot_tier(self, workspace: str, domain: str | None, mind: str | None) -> list[Row]:
        """Active hot-tier items (id, mind, content, domain, topic, importance, mention_count,
        created_at, source_observation_ids, session) in stream order."""
        ...


class PolicyReads(Protocol):
    """Policies."""

    async def policy(self, workspace: str, policy_id: str) -> Row | None:
        """A policy's domain, repo, required_role and active flag."""
        ...

    async def policy_ids(self, workspace: str, given: str) -> list[str]:
        """Policy ids equal to ``given`` or starting with its prefix (exact first, at most 2)."""
        ...

    async def list_policies(
        self, workspace: str, include_inactive: bool, readable: Sequence[str] | None
    ) -> list[Row]:
        """Policies by domain and stream order."""
        ...


class NoteReads(Protocol):
    """Agents' notes and working memory."""

    async def notes(self, workspace: str, agent: str) -> str | None:
        """An agent's notes, None when it has none."""
        ...

    async def working_memory(self, workspace: str, mind: str) -> Row | None:
        """capacity, items (a list of dicts) and updated_at of a mind's working memory."""
        ...

    async def memory_statuses(self, ids: Sequence[str]) -> dict[str, tuple[str, str, datetime | None]]:
        """id → (content, status, erased_at) of the memories that exist."""
        ...


@dataclass(frozen=True)
class PreambleParts:
    """What the dispatch preamble is built from (see :meth:`PreambleReads.preamble_parts`)."""

    policies: list[tuple[str, str]]
    """(domain, rule) of the active policies, in the order they are shown."""
    notes: str | None
    facts: list[tuple[str | None, str]]
    """(domain, content) of the matching current facts, best first."""


class PreambleReads(Protocol):
    """The dispatch preamble's reads, in one go (the latency-critical path)."""

    async def preamble_parts(
        self,
        workspace: str,
        agent: str,
        task: str | None,
        *,
        repo: str | None,
        readable: Sequence[str] | None,
        at: datetime,
        max_facts: int,
    ) -> PreambleParts:
        """Active policies (domain, rule) of ``readable`` domains, the repo's first; the agent's
        notes; and, when ``task`` is given and specific, at most ``max_facts`` current facts
        (domain, content) matching its words, best first."""
        ...


class KnowledgeReadModel(AccessReads, FactReads, PolicyReads, NoteReads, PreambleReads, Protocol):
    """Everything :class:`noema.application.knowledge.Knowledge` and the preamble read."""


@dataclass(frozen=True)
class Fading:
    """What a decay tick reports for one workspace (:meth:`MemoryRecords.fading`)."""

    faded: list[str]
    """The first ids, by id, of the memories that faded below the threshold."""
    faded_total: int
    expired: list[str]
    """The first ids, by id, of the memories whose ``valid_until`` passed."""
    expired_total: int


class MemoryRecords(Protocol):
    """Single memories, their scope and edges: what memory operations check before publishing
    (:mod:`noema.application.curation`, :mod:`noema.application.upkeep`) and how a surface finds an id's
    workspace."""

    async def resolve(self, id_or_prefix: str, workspace: str | None = None) -> str | None:
        """The full id a memory id or unique prefix names (``LookupError`` when several)."""
        ...

    async def memory(self, memory_id: str) -> Row | None:
        """Every column of one memory."""
        ...

    async def scopes(self, ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """id → (workspace, mind) of the memories that exist."""
        ...

    async def relationship(self, from_id: str, to_id: str, relation: str) -> str | None:
        """The id of an existing edge."""
        ...

    async def memory_workspaces(self) -> list[str]:
        """Every workspace that has memories."""
        ...

    async def fading(
        self, workspace: str, since: datetime, until: datetime, threshold: float, limit: int
    ) -> Fading:
        """The active memories of ``workspace`` whose activation fell below ``threshold`` in
        (``since``, ``until``] (above it at ``since`` or at their later reinforcement, below at
        ``until``), and those whose ``valid_until`` fell in it; the first ``limit`` ids of each."""
        ...

    async def count_unembedded(self, model: str) -> int:
        """How many memories have no vector for ``model``."""
        ...

    async def unembedded(self, model: str, after: str, limit: int) -> list[Row]:
        """The next memories by id after ``after`` without a vector for ``model`` (id, workspace,
        mind, content, participants, happened_at, origin_event)."""
        ...

    async def workspace_of(self, table: Literal["memories", "policies"], memory_id: str) -> str | None:
        """The workspace of the row with this exact id."""
        ...

    async def workspaces_of(self, table: Literal["memories", "policies"], given: str) -> list[str]:
        """The workspaces (at most 2) holding an id equal to ``given`` or starting with its prefix."""
        ...


@dataclass(frozen=True)
class StreamPoint:
    """A point of the event stream: just after stream sequence ``seq``, or (``at``) after every event
    that occurred at or before that instant. Exactly one of the two is set."""

    seq: int | None = None
    at: datetime | None = None


class EventReads(Protocol):
    """The audit copy of the stream read by reference, by causation and correlation, and by range:
    what ``why`` and ``audit diff`` read (:mod:`noema.application.lineage`,
    :mod:`noema.application.changes`). Rows have the columns of
    :data:`~noema.adapters.postgres.queries.EVENT_FIELDS`, the payload as JSON text, in stream order.
    """

    async def resolve_reference(self, id_or_prefix: str, workspace: str | None = None) -> str | None:
        """The full id of the memory (or fact), policy or event that ``id_or_prefix`` is, or is the
        unique prefix of (at least 6 characters), in ``workspace`` when given; None when nothing
        matches; ``LookupError`` when a prefix matches several."""
        ...

    async def events_naming(self, workspace: str | None, ref: str, limit: int) -> list[Row]:
        """The first ``limit`` events of ``workspace`` (of every workspace when None) whose id,
        causation id or correlation id is ``ref``, or whose payload holds ``ref`` as a whole JSON
        string."""
        ...

    async def events_with_ids(self, workspace: str, ids: Sequence[str]) -> list[Row]:
        """The events of ``workspace`` whose id is one of ``ids``."""
        ...

    async def correlation_starts(self, workspace: str, ids: Sequence[str]) -> list[Row]:
        """The first event of each correlation of ``workspace`` whose id is one of ``ids``."""
        ...

    async def events_caused_by(self, workspace: str, ids: Sequence[str], limit: int) -> list[Row]:
        """The first ``limit`` events of ``workspace`` whose causation id is one of ``ids``."""
        ...

    async def reference_workspaces(self, ref: str) -> list[str]:
        """The workspaces (at most 2, sorted) where ``ref`` is an event's id, causation or
        correlation id, or a memory's or a policy's id: indexed lookups only, no payload is read."""
        ...

    async def events_between(
        self,
        workspace: str | None,
        types: Sequence[str],
        after: StreamPoint,
        through: StreamPoint,
        limit: int,
    ) -> list[Row]:
        """The first ``limit`` events of ``types`` (of ``workspace`` when given) after ``after`` and
        at or before ``through``."""
        ...


MemoryOrder = Literal["newest", "happened_asc", "happened_desc"]
"""How a page of memories is ordered: ``newest`` recorded first (``created_at``), or by when things
happened (``happened_at``, else ``created_at``); ties in stream order, the same way round."""


class MemoryReads(MemoryRecords, EventReads, Protocol):
    """The operators' reads: listings, one memory's detail, the audit log and its questions
    (:class:`noema.adapters.postgres.queries.MemoryQueries`, :class:`noema.adapters.memory.InMemoryReads`).

    Memory rows have the columns of :data:`noema.adapters.postgres.queries.MEMORY_FIELDS`; event
    rows those of :data:`~noema.adapters.postgres.queries.EVENT_FIELDS`, the payload as JSON text.
    """

    async def get(self, full_id: str) -> Row | None:
        """One memory with ``origin`` (its event row), ``relationships`` (id, relation, from_id,
        to_id, confidence, source, created_at, direction ``in``/``out``, other_content; by
        created_at, id) and ``embeddings`` (model, dimensions, created_at; by model)."""
        ...

    async def page(self, filters: RecallFilters, order: MemoryOrder, limit: int, offset: int) -> list[Row]:
        """One page of memory rows matching ``filters`` in ``order``."""
        ...

    async def workspace_exists(self, workspace: str) -> bool:
        """Whether any event names ``workspace``."""
        ...

    async def citing_events(self, memory_id: str, workspace: str, limit: int) -> list[Row]:
        """Events whose payload names the memory, newest first (payload as JSON text)."""
        ...

    async def audit(
        self,
        workspace: str | None,
        types: list[str] | None,
        actor: str | None,
        before: int | None,
        limit: int,
    ) -> list[Row]:
        """Events matching the filters, newest first (payload as JSON text)."""
        ...


RESULT_FIELDS = (
    "id",
    "workspace",
    "mind",
    "kind",
    "epistemic_kind",
    "content",
    "domain",
    "topic",
    "repo",
    "status",
    "memory_type",
    "confidence",
    "activation",
    "importance",
    "credibility",
    "recall_count",
    "participants",
    "happened_at",
    "created_at",
    "origin_event",
    "origin_seq",
    "erased_at",
)
"""What a search result shows of its memory (:meth:`RecallVoices.details`), in this order."""


class RecallVoices(Protocol):
    """The recall voices over the read model, each returning ranked (memory id, score) pairs inside
    the filters (:class:`noema.adapters.postgres.voices.RecallStore`); scoring and fusion are the
    domain's (:mod:`noema.domain.ranking`)."""

    has_vectors: bool
    """Whether the read model holds vectors to compare (pgvector is there)."""

    async def lexical(
        self,
        query: str,
        f: RecallFilters,
        limit: int,
        strict: bool = False,
        broad: bool = True,
        max_terms: int | None = None,
    ) -> list[tuple[str, float]]:
        """Full text: any selective word by default; web-search syntax when ``strict``."""
        ...

    async def semantic(
        self, vector: Sequence[float], model: str, f: RecallFilters, limit: int
    ) -> list[tuple[str, float]]:
        """Nearest neighbours by cosine under one model."""
        ...

    async def recent(self, f: RecallFilters, limit: int) -> list[tuple[str, float]]:
        """The newest memories."""
        ...

    async def graph(
        self, seeds: Mapping[str, float], f: RecallFilters, limit: int, model: str | None, now: datetime
    ) -> tuple[list[tuple[str, float]], dict[str, Candidate]]:
        """The memories two hops from the seeds over relationship edges, with their candidate rows."""
        ...

    async def candidates(self, ids: Sequence[str], model: str | None, now: datetime) -> dict[str, Candidate]:
        """What ranking needs of each memory."""
        ...

    async def details(self, ids: Sequence[str], now: datetime) -> dict[str, dict[str, Any]]:
        """What a hit shows of each memory (:data:`RESULT_FIELDS`, activation as of ``now``); a
        search asks only for the results whose candidate rows did not hold it (``Candidate.shown``)."""
        ...


class ObservationSink(Protocol):
    """Where observations are published (:class:`noema.client.JetStreamObservations`)."""

    async def send(self, obs: ObservationRecorded) -> Stored:
        """Publish ``obs`` once (its id deduplicates a retry); where it is stored."""
        ...


class PastPoint(Protocol):
    """The point a view as of the past reflects (:class:`noema.composition.asof.AsOf`)."""

    @property
    def seq(self) -> int:
        """The state after this stream sequence."""
        ...

    @property
    def time(self) -> datetime:
        """The view's "now"."""
        ...

    def describe(self) -> dict[str, Any]:
        """How every surface says it: ``{"seq": N, "time": "…"}``."""
        ...


class SearchTimer(Protocol):
    """Where searches are timed (:class:`noema.adapters.metrics.Metrics`)."""

    def timed_search(self, mode: str) -> AbstractContextManager[None]:
        """Time the block as one search in ``mode``."""
        ...


# --- claims (noema.runtime.claims: of a stateful worker's instances, one owns a partition) ---

ClaimState = Literal["standby", "owner", "lost"]
"""``standby`` until the claim is held, ``owner`` while it is, ``lost`` after (for good)."""


class ClaimLost(WorkerFatal):
    """This instance no longer holds its claim: it must not write; the process exits (and is
    restarted, as a standby)."""


class Claim(Protocol):
    """Exclusive ownership of one partition of one worker kind, among its instances."""

    @property
    def state(self) -> ClaimState:
        """Where this instance stands."""
        ...

    async def acquire(self, stopping: asyncio.Event) -> bool:
        """Stand by until the claim is held (True), or ``stopping`` is set first (False)."""
        ...

    async def check(self) -> None:
        """Raise :class:`ClaimLost` unless the claim is still held (asks the claim's store)."""
        ...

    async def release(self) -> None:
        """Give the claim up (at a clean stop), so a standby takes over at once."""
        ...
