"""The application layer every surface calls: the CLI, the HTTP API, the MCP server and the NATS
service hold one :class:`Noema` and call its methods, so none re-implements logic.

It owns one PostgreSQL pool (pgvector-aware, for recall) and one NATS connection, and composes the
operations: recall (search), the dispatch preamble, observations, knowledge (facts, policies,
grants, notes, hot tier, maintenance), access control and the operators' reads (listing, timeline,
memory detail, audit log, why, audit diff). Agents' reads honour their grants in strict mode;
writes go through events.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

import asyncpg
import msgspec
import structlog
from nats.aio.client import Client as NATS

from noema.adapters.embedders import Embedder, create_embedder
from noema.adapters.jetstream import EventPublisher
from noema.adapters.postgres import asof_schemas
from noema.adapters.postgres.erasure_handlers import blank_copies
from noema.adapters.postgres.keyring import PostgresKeyring
from noema.adapters.postgres.knowledge import PostgresKnowledge
from noema.adapters.postgres.projection import ReadModelProjection
from noema.adapters.postgres.queries import MemoryQueries
from noema.adapters.postgres.tenancy import NO_WORKSPACE, workspace_scope
from noema.adapters.postgres.voices import RecallFilters, RecallStore
from noema.application import curation, erasure, upkeep
from noema.application.access import AccessControl, Caller, InsufficientMemoryPermission
from noema.application.asof import AsOf, AsOfNotBuilt, AsOfSchemas, resolve
from noema.application.audit_views import AuditDiff, DiffQuery, Why
from noema.application.changes import audit_diff
from noema.application.curation import KnowledgeEntry, OperatorReceipt, create_memory
from noema.application.deadletters import DeadLetters
from noema.application.erasure import ErasureReport, ErasureRequest
from noema.application.knowledge import Knowledge
from noema.application.lineage import why
from noema.application.preamble import Preamble, build_preamble
from noema.application.reads import (
    audit,
    list_memories,
    memory_detail,
    resolve_memory,
    timeline,
    workspace_exists,
)
from noema.application.replay import verify_replay
from noema.application.sealing import Sealer
from noema.application.search import MODES, Recall, SearchResponse
from noema.application.upkeep import InvalidQuery, OperationError
from noema.application.views import AuditPage, AuditQuery, ListQuery, MemoryDetail, MemoryPage, TimelineQuery
from noema.client import Stored, build_observation, send_observation
from noema.domain.knowledge import DomainRef
from noema.errors import Unavailable
from noema.ports import MemoryReads
from noema.runtime.settings import Located
from noema.runtime.wiring import connect_nats, open_pool

if TYPE_CHECKING:  # prometheus_client: loaded by a process that keeps metrics (see Noema.metrics)
    from noema.runtime.metrics import Metrics
from noema.stream_points import StreamPoint
from noema_events import Event, ObservationRecorded

__all__ = [
    "Caller",
    "InsufficientMemoryPermission",
    "InvalidQuery",
    "Noema",
    "OperationError",
    "SearchOptions",
    "StatusAction",
]

log = structlog.get_logger("noema.erasure")

StatusAction = Literal["retract", "archive", "restore"]
"""The status changes an operator makes to a memory."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class SearchOptions:
    """What a search may be narrowed to, besides the caller's workspace."""

    mode: str = "hybrid"
    profile: str = "hybrid"
    limit: int = 10
    mind: str | None = None
    kinds: Sequence[str] = ()
    epistemic_kinds: Sequence[str] = ()
    domains: Sequence[str] = ()
    statuses: Sequence[str] = ()
    """Only these statuses; by default active only, or every status with ``include_inactive``."""
    since: datetime | None = None
    until: datetime | None = None
    repo: str | None = None
    """The current repository: its memories rank first (the others still follow)."""
    strict: bool = False
    include_inactive: bool = False
    """Also inactive statuses (unless ``statuses`` is given) and expired memories."""


class Noema:
    """One running Noema, as seen by a surface."""

    def __init__(
        self,
        settings: Located,
        pool: asyncpg.Pool,
        nc: NATS,
        store: RecallStore,
        clock: Callable[[], datetime] = _utcnow,
        *,
        point: AsOf | None = None,
        parent: Noema | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.settings = settings
        self._metrics = metrics
        self.pool = pool
        self.nc = nc
        self.clock = clock
        """The time every operation of this instance takes as "now" (tests pin it)."""
        self.topology = settings.topology
        self.publisher = EventPublisher(nc, self.topology, Sealer(PostgresKeyring(pool)))
        self.dead_letters = DeadLetters(nc, self.topology, self.publisher)
        """The dead-letter stream: list, show, retry, drop (JetStream only, no read model)."""
        self.memories: MemoryReads = MemoryQueries(pool, clock)
        """The operators' reads of the read model (:class:`~noema.ports.MemoryReads`)."""
        self.knowledge = Knowledge(PostgresKnowledge(pool), self.publisher, clock, appends=self.publisher)
        self.access: AccessControl = self.knowledge.access_control
        self._store = store
        self._embedder: Embedder | None = None
        self._embedder_loaded = False
        self._embedder_lock = asyncio.Lock()
        self.point = point
        """For a view as of a past point (:meth:`as_of`): the point it reads; None: the present."""
        self._parent = parent
        self.workspace = NO_WORKSPACE
        """What this instance's connections see by default under row-level security."""
        self.asof_schemas = AsOfSchemas(settings, nc)
        self._views: dict[str, tuple[asyncpg.Pool, RecallStore]] = {}
        self._views_lock = asyncio.Lock()

    @property
    def metrics(self) -> Metrics:
        """The process's metrics: searches are timed into them, and the surfaces count their
        requests. A served process gives its own (``open(metrics=...)``); otherwise they are made
        on first use, so a one-shot command (``noemactl memory search``) loads no prometheus_client."""
        if self._metrics is None:
            from noema.runtime.metrics import Metrics

            self._metrics = Metrics()
        return self._metrics

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls,
        settings: Located,
        *,
        name: str = "noema",
        pool_size: int = 4,
        workspace: str = NO_WORKSPACE,
        metrics: Metrics | None = None,
    ) -> AsyncIterator[Noema]:
        """Connect to the located servers as the read-only database role; closes everything on
        exit. ``workspace`` is what its connections see under row-level security unless a
        :func:`~noema.adapters.postgres.tenancy.workspace_scope` block says otherwise: a surface
        acting for one workspace scopes each request; ``"*"`` is every workspace."""
        async with contextlib.AsyncExitStack() as stack:
            pool = await open_pool(
                settings,
                stack,
                "reader",
                app=name,
                max_size=pool_size,
                workspace=workspace,
                create=RecallStore.create_pool,
            )
            nc = await connect_nats(settings, stack, name)
            app = cls(settings, pool, nc, await RecallStore.open(pool), metrics=metrics)
            app.workspace = workspace
            stack.push_async_callback(app.close_views)
            yield app

    async def as_of(self, point: StreamPoint) -> Noema:
        """A read-only view of the state as of ``point``, on which every read of this class answers
        what it answered then (:mod:`noema.application.asof`): the same code over the as-of schema
        at the point's sequence (built on first use), its clock pinned to the point's time, its
        vectors compared exactly. Its :attr:`point` says which sequence and time it reflects; a
        point the stream holds no state for is a :class:`~noema.application.asof.PointNotInStream`."""
        at = await resolve(self.nc, self.topology, point, self.clock())
        for _ in range(2):
            schema = self.asof_schemas.name(at.seq)
            if schema not in self._views:  # a kept pool's schema is checked by holds() below
                await self.asof_schemas.ensure(at.seq, self.clock())
            pool, store = await self._view_store(schema)
            if await asof_schemas.holds(pool, at.seq):
                return Noema(
                    self.settings,
                    pool,
                    self.nc,
                    store,
                    lambda: at.time,
                    point=at,
                    parent=self,
                    metrics=self._metrics,
                )
            # Dropped meanwhile, emptied by a crash of PostgreSQL (its tables are unlogged), or
            # built by an earlier release (its read model lacks a migration of this one's).
            await self._close_view(schema)
            try:
                await asof_schemas.drop(self.settings.database_url, schema)
            except asyncpg.InsufficientPrivilegeError:
                raise AsOfNotBuilt(
                    f"the state as of seq {at.seq} was lost (a crash of PostgreSQL empties it) or was "
                    f"built by an earlier release, and this "
                    f"process may not rebuild it: run `noemactl asof drop {at.seq}` and "
                    f"`noemactl asof build {at.seq}`"
                ) from None
        raise Unavailable(f"the state as of seq {at.seq} could not be built; retry")

    async def _view_store(self, schema: str) -> tuple[asyncpg.Pool, RecallStore]:
        async with self._views_lock:
            if schema in self._views:
                self._views[schema] = self._views.pop(schema)  # most recently used last
                return self._views[schema]
            while len(self._views) >= self.settings.asof_keep:
                await self._close_view(next(iter(self._views)))
            pool = await RecallStore.create_pool(
                self.settings.database_url_for("reader"),
                schema,
                app="noema-asof",
                workspace=self.workspace,
                min_size=0,
                max_size=2,
            )
            self._views[schema] = (pool, await RecallStore.open(pool, exact=True))
            return self._views[schema]

    async def _close_view(self, schema: str) -> None:
        found = self._views.pop(schema, None)
        if found is not None:
            await found[0].close()

    async def close_views(self) -> None:
        """Close the connections of the as-of views (:meth:`open` does it on exit)."""
        for schema in list(self._views):
            await self._close_view(schema)

    async def embedder(self) -> Embedder | None:
        """The query embedder (loaded on first use; None when NOEMA_EMBEDDER=none)."""
        if self._parent is not None:
            return await self._parent.embedder()
        async with self._embedder_lock:
            if not self._embedder_loaded:
                self._embedder = await asyncio.to_thread(
                    create_embedder, self.settings.embedder, self.settings.remote_embedder
                )
                self._embedder_loaded = True
        return self._embedder

    async def search(
        self, caller: Caller | None, query: str, options: SearchOptions, workspace: str | None = None
    ) -> SearchResponse:
        """search_memory: an agent's search is scoped to its workspace and honours its grants; an
        operator searches the workspace of its (operator) ``caller``, or with ``caller`` None the
        given ``workspace`` or, None, all of them. Bad input is an :class:`InvalidQuery`."""
        readable = await self.access.readable_domains(caller) if caller else None
        filters = RecallFilters(
            workspace=caller.workspace if caller else workspace,
            mind=options.mind,
            kinds=tuple(options.kinds),
            epistemic_kinds=tuple(options.epistemic_kinds),
            domains=tuple(options.domains),
            statuses=tuple(options.statuses) or (() if options.include_inactive else ("active",)),
            since=options.since,
            until=options.until,
            include_expired=options.include_inactive,
            readable_domains=readable,
            now=self.clock(),
        )
        embedder = await self.embedder() if options.mode != "keyword" else None
        recall = Recall(self._store, embedder)
        # The mode is the caller's text until Recall checks it: label an unknown one as such.
        mode = options.mode if options.mode in MODES else "unknown"
        try:
            # Timed when the process keeps metrics (a served one); a one-shot command keeps none.
            timed = self._metrics.timed_search(mode) if self._metrics else contextlib.nullcontext()
            with timed:
                return await recall.search(
                    query,
                    filters,
                    mode=options.mode,
                    profile=options.profile,
                    limit=options.limit,
                    strict=options.strict,
                    repo=options.repo,
                    now=self.clock(),
                )
        except asyncpg.PostgresSyntaxError as exc:
            raise InvalidQuery(f"query not understood: {exc}") from None
        except ValueError as exc:
            raise InvalidQuery(str(exc)) from None

    async def preamble(self, caller: Caller, task: str, repo: str | None = None) -> Preamble:
        """The dispatch preamble for the calling agent (honouring its grants in strict mode)."""
        return await build_preamble(
            self.knowledge.reads,
            caller.workspace,
            caller.agent,
            task,
            repo,
            await self.access.readable_domains(caller),
            at=self.clock(),
        )

    async def observe(self, caller: Caller, content: str, **fields: Any) -> dict[str, Any]:
        """Publish an observation of the caller's mind (its actor the caller's); returns its id, stream
        sequence and whether the id was already stored (a retry: not stored again). ``fields`` are
        those of :func:`~noema.client.build_observation` (a bad value is an OperationError)."""
        try:
            obs = build_observation(
                content, workspace=caller.workspace, mind=caller.agent, actor=caller.actor, **fields
            )
        except ValueError as exc:
            raise OperationError(str(exc)) from None
        stored = await send_observation(self.nc.jetstream(), obs, topology=self.topology)
        return {"observation_id": obs.id, "seq": stored.seq, "duplicate": stored.duplicate}

    async def list_memories(self, query: ListQuery) -> MemoryPage:
        """Operators: memories with filters, newest first (``query.workspace`` None = every workspace;
        the surface limits it to what its caller may see)."""
        return await list_memories(self.memories, query)

    async def timeline(self, query: TimelineQuery) -> MemoryPage:
        """Operators: a workspace's memories in the order things happened."""
        return await timeline(self.memories, query)

    async def workspace_exists(self, workspace: str) -> bool:
        """Whether anything was ever recorded in ``workspace`` (to tell a typo from an empty answer)."""
        return await workspace_exists(self.memories, workspace)

    async def memory(self, id_or_prefix: str, workspace: str | None = None) -> MemoryDetail:
        """Operators: one memory (in ``workspace`` when given) with provenance, relationships,
        vectors and the events citing it (:class:`~noema.application.upkeep.NotFound` when there is none)."""
        return await memory_detail(self.memories, id_or_prefix, workspace)

    async def enter_knowledge(self, operator: str, entry: KnowledgeEntry, reason: str) -> OperatorReceipt:
        """Operators: enter a memory on the operator channel, its domain created on first use (as a
        fact's is) and stored in its canonical form (:class:`OperationError` for a bad name)."""
        caller = Caller(entry.workspace, operator, "operator", operator=True)
        domain_events: list[Event] = []
        if entry.domain is not None:
            try:
                ref = DomainRef.parse(entry.domain, entry.repo)
            except ValueError as exc:
                raise OperationError(str(exc)) from None
            domain_events = await self.knowledge.domain_events(caller, ref)
            entry = msgspec.structs.replace(entry, domain=ref.key, repo=ref.repo)
        return await create_memory(
            self.publisher,
            entry,
            actor=caller.actor,
            reason=reason,
            now=self.clock(),
            domain_events=domain_events,
        )

    async def resolve_memory(self, id_or_prefix: str, workspace: str | None = None) -> str:
        """The full id a memory id or unique prefix names (in ``workspace`` when given)."""
        return await resolve_memory(self.memories, id_or_prefix, workspace)

    async def audit(self, query: AuditQuery) -> AuditPage:
        """Operators: the audit log, newest first (an unknown event type is an InvalidQuery)."""
        return await audit(self.memories, query)

    async def why(self, ref: str, workspace: str | None = None, limit: int = 500) -> Why:
        """Operators: the chain of events behind an event, memory, fact, policy or observation id
        (in ``workspace`` when given, else the one that has it), through causation and correlation
        ids (:func:`noema.application.lineage.why`; NotFound when nothing names it)."""
        return await why(self.memories, ref, workspace, limit)

    async def audit_diff(self, query: DiffQuery) -> AuditDiff:
        """Operators: what changed between two points of the stream, with the events responsible
        (:func:`noema.application.changes.audit_diff`; a point it cannot read is an InvalidQuery)."""
        return await audit_diff(self.memories, query)

    def writer(self) -> EventPublisher:
        """The publisher every write goes through; while NATS is not connected a write is
        :class:`~noema.errors.Unavailable` (instead of hanging until the client gives up)."""
        if self.point is not None:
            raise OperationError(f"the state as of seq {self.point.seq} is read-only: write without as_of")
        if not self.nc.is_connected:
            raise Unavailable("not connected to NATS; writes are unavailable (retry later)")
        return self.publisher

    async def erase(self, request: ErasureRequest) -> ErasureReport:
        """Operators: erase a subject's, a memory's or an observation's content for good, keeping
        the record that it happened (:mod:`noema.application.erasure`, docs/privacy.md)."""
        publisher = self.writer()
        with workspace_scope(request.workspace):
            report = await erasure.erase(
                PostgresKeyring(self.pool),
                self.nc,
                self.topology,
                publisher,
                request,
                self.clock(),
                self.asof_schemas.drop,
                self._projected,
            )
        owner = self.settings.database_url
        if owner is None:
            return report
        try:
            copies = await blank_copies(
                owner,
                self.settings.db_schema,
                request.workspace,
                report.key_ids,
                self.clock(),
                report.erasure_id,
                request.target if request.scope == "notes" else None,
            )
        except (asyncpg.PostgresError, OSError) as exc:  # a process without the owner's rights
            log.warning("copies of the read model not blanked; run `noemactl erase` again", error=str(exc))
            return report
        return msgspec.structs.replace(report, copies_blanked=copies)

    async def _projected(self, seq: int, timeout_s: float = 60.0) -> bool:
        """Wait until the projector applied the stream through ``seq`` (False after ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while True:
            async with self.pool.acquire() as conn:
                if await ReadModelProjection().position(conn) >= seq:
                    return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.2)

    async def publish_observation(self, obs: ObservationRecorded) -> Stored:
        """Operators: publish a built observation as is (its actor and mind are the caller's own)."""
        self.writer()
        return await send_observation(self.nc.jetstream(), obs, topology=self.topology)

    async def change_status(
        self, action: StatusAction, memory_id: str, *, actor: str, reason: str
    ) -> OperatorReceipt:
        """Operators: retract (mark inaccurate), archive or restore a memory, with the reason."""
        change = {"retract": curation.retract, "archive": curation.archive, "restore": curation.restore}
        return await change[action](
            self.memories, self.writer(), memory_id, actor=actor, reason=reason, now=self.clock()
        )

    async def correct(self, memory_id: str, content: str, *, actor: str, reason: str) -> OperatorReceipt:
        """Operators: supersede a memory by a copy with corrected content."""
        return await curation.correct(
            self.memories,
            self.writer(),
            memory_id,
            actor=actor,
            reason=reason,
            content=content,
            now=self.clock(),
        )

    async def relate(
        self,
        from_id: str,
        to_id: str,
        relation: str,
        *,
        confidence: float = 1.0,
        source: str = "",
        actor: str = "operator",
    ) -> str:
        """Operators: an edge between two memories of one mind (ids or unique prefixes); returns the
        relationship id."""
        ids = [await self.resolve_memory(given) for given in (from_id, to_id)]
        return await upkeep.relate(
            self.memories,
            self.writer(),
            ids[0],
            ids[1],
            relation,
            now=self.clock(),
            confidence=confidence,
            source=source,
            actor=actor,
        )

    async def decay_tick(self, workspaces: Sequence[str] | None = None) -> list[str]:
        """Publish a decay tick now for ``workspaces`` (every one with memories): what faded or
        expired in the last ``NOEMA_DECAY_INTERVAL``."""
        now = self.clock()
        since = now - timedelta(seconds=self.settings.decay_interval_s)
        return await upkeep.decay_tick(self.memories, self.writer(), now, workspaces, since=since)

    async def embed_missing(
        self, *, batch: int = 64, progress: Callable[[int, int], None] | None = None
    ) -> tuple[int, str]:
        """Backfill: embed every memory without a vector for the configured model; returns how many
        and the model (an :class:`OperationError` when no embedder is configured)."""
        embedder = await self.embedder()
        if embedder is None:
            raise OperationError("no embedder configured (NOEMA_EMBEDDER=none)")
        done = await upkeep.embed_missing(
            self.memories, self.writer(), embedder, now=self.clock, batch=batch, progress=progress
        )
        return done, embedder.name

    async def replay(
        self,
        until: StreamPoint | None = None,
        keep: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Rebuild the read model from the event stream into fresh tables and compare it with the
        live one at one stream sequence, or build the state as of ``until`` (a sequence or a time)
        (see :func:`noema.application.replay.verify_replay`). A point the stream holds no state
        for (before its first event, beyond its end, in the future) is refused as ``--as-of``
        refuses it (:class:`~noema.application.asof.PointNotInStream`)."""
        if until is not None:
            await resolve(self.nc, self.topology, until, self.clock())
        return await verify_replay(self.settings, self.nc, until, keep, progress)
