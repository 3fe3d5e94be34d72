"""One running Noema: the composition root every surface opens. It connects to the located servers,
builds the adapters (the JetStream publisher with its keyring sealer, the PostgreSQL reads, knowledge
and recall voices, the dead-letter stream) and hands them to the application facade
(:class:`noema.application.facade.Noema`) as its ports; and it holds the operations that drive the
servers themselves: erasure, replay and the states as of a past point."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import asyncpg
import msgspec
import structlog
from nats.aio.client import Client as NATS

from noema.adapters.deadletters import DeadLetters
from noema.adapters.embedders import create_embedder
from noema.adapters.jetstream import EventPublisher
from noema.adapters.postgres import asof_schemas
from noema.adapters.postgres.erasure_handlers import blank_copies
from noema.adapters.postgres.keyring import PostgresKeyring
from noema.adapters.postgres.knowledge import PostgresKnowledge
from noema.adapters.postgres.projection import ReadModelProjection
from noema.adapters.postgres.queries import MemoryQueries
from noema.adapters.postgres.tenancy import NO_WORKSPACE, workspace_scope
from noema.adapters.postgres.voices import RecallStore
from noema.application.facade import Noema
from noema.application.knowledge import Knowledge
from noema.application.sealing import KeyringSealer
from noema.client import JetStreamObservations
from noema.composition import erasure
from noema.composition.asof import AsOf, AsOfNotBuilt, AsOfSchemas, resolve
from noema.composition.erasure import ErasureReport, ErasureRequest
from noema.composition.replay import verify_replay
from noema.errors import Unavailable
from noema.ports import Embedder
from noema.runtime.identities import shipped_allows
from noema.runtime.settings import Located
from noema.runtime.wiring import connect_nats, open_pool
from noema.stream_points import StreamPoint
from noema.topology import Topology

if TYPE_CHECKING:  # prometheus_client: loaded by a process that keeps metrics (see Instance.metrics)
    from noema.adapters.metrics import Metrics

__all__ = ["Instance", "connected_knowledge"]

log = structlog.get_logger("noema.erasure")


def _utcnow() -> datetime:
    return datetime.now(UTC)


def connected_knowledge(
    pool: asyncpg.Pool, nc: NATS, topology: Topology, clock: Callable[[], datetime] = _utcnow
) -> Knowledge:
    """The knowledge operations over the PostgreSQL read model and the JetStream event stream."""
    publisher = EventPublisher(nc, topology, KeyringSealer(PostgresKeyring(pool)))
    return Knowledge(PostgresKnowledge(pool), publisher, clock, appends=publisher)


class Instance(Noema):
    """One running Noema, as seen by a surface: the application (:class:`Noema`) over one PostgreSQL
    pool (pgvector-aware, for recall) and one NATS connection."""

    def __init__(
        self,
        settings: Located,
        pool: asyncpg.Pool,
        nc: NATS,
        store: RecallStore,
        clock: Callable[[], datetime] = _utcnow,
        *,
        point: AsOf | None = None,
        parent: Instance | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.settings = settings
        self.pool = pool
        self.nc = nc
        self.topology = settings.topology
        publisher = EventPublisher(nc, self.topology, KeyringSealer(PostgresKeyring(pool)))
        self.dead_letters = DeadLetters(nc, self.topology, publisher)
        """The dead-letter stream: list, show, retry, drop (JetStream only, no read model)."""
        self._parent = parent
        self._embedder: Embedder | None = None
        self._embedder_loaded = False
        self._embedder_lock = asyncio.Lock()
        self.workspace = NO_WORKSPACE
        """What this instance's connections see by default under row-level security."""
        self.asof_schemas = AsOfSchemas(settings, nc)
        self._views: dict[str, tuple[asyncpg.Pool, RecallStore]] = {}
        self._views_lock = asyncio.Lock()
        super().__init__(
            publisher=publisher,
            memories=MemoryQueries(pool, clock),
            knowledge=Knowledge(PostgresKnowledge(pool), publisher, clock, appends=publisher),
            voices=store,
            observations=JetStreamObservations(nc, self.topology),
            embedder=self._loaded_embedder,
            connected=lambda: nc.is_connected,
            decay_interval_s=settings.decay_interval_s,
            clock=clock,
            point=point,
            as_of=self._view,
            metrics=metrics,
            subjects=PostgresKeyring(pool),
        )
        self._metrics: Metrics | None = metrics

    @property
    def metrics(self) -> Metrics:
        """The process's metrics: searches are timed into them, and the surfaces count their
        requests. A served process gives its own (``open(metrics=...)``); otherwise they are made
        on first use, so a one-shot command (``noemactl memory search``) loads no prometheus_client."""
        if self._metrics is None:
            from noema.adapters.metrics import Metrics

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
    ) -> AsyncIterator[Instance]:
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

    async def as_of(self, point: StreamPoint) -> Instance:
        return await self._view(point)

    async def _view(self, point: StreamPoint) -> Instance:
        """A read-only view of the state as of ``point`` (:meth:`Noema.as_of` asks for it), on which
        every read of the facade answers what it answered then (:mod:`noema.composition.asof`): the
        same code over the as-of schema at the point's sequence (built on first use), its clock
        pinned to the point's time, its vectors compared exactly. Its :attr:`point` says which
        sequence and time it reflects; a point the stream holds no state for is a
        :class:`~noema.composition.asof.PointNotInStream`."""
        at = await resolve(self.nc, self.topology, point, self.clock())
        for _ in range(2):
            schema = self.asof_schemas.name(at.seq)
            if schema not in self._views:  # a kept pool's schema is checked by holds() below
                await self.asof_schemas.ensure(at.seq, self.clock())
            pool, store = await self._view_store(schema)
            if await asof_schemas.holds(pool, at.seq):
                return Instance(
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

    async def _loaded_embedder(self) -> Embedder | None:
        if self._parent is not None:
            return await self._parent.embedder()
        async with self._embedder_lock:
            if not self._embedder_loaded:
                self._embedder = await asyncio.to_thread(create_embedder, self.settings.embedder)
                self._embedder_loaded = True
        return self._embedder

    async def erase(self, request: ErasureRequest) -> ErasureReport:
        """Operators: erase a subject's, a memory's or an observation's content for good, keeping
        the record that it happened (:mod:`noema.composition.erasure`, docs/privacy.md)."""
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
                delete_observations=shipped_allows(
                    self.settings.nats_auth.user or urlsplit(self.settings.nats_url).username,
                    f"$JS.API.STREAM.MSG.DELETE.{self.topology.observation_stream}",
                    self.topology,
                ),
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

    async def replay(
        self,
        until: StreamPoint | None = None,
        keep: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Rebuild the read model from the event stream into fresh tables and compare it with the
        live one at one stream sequence, or build the state as of ``until`` (a sequence or a time)
        (see :func:`noema.composition.replay.verify_replay`). A point the stream holds no state
        for (before its first event, beyond its end, in the future) is refused as ``--as-of``
        refuses it (:class:`~noema.composition.asof.PointNotInStream`)."""
        if until is not None:
            await resolve(self.nc, self.topology, until, self.clock())
        return await verify_replay(self.settings, self.nc, until, keep, progress)
