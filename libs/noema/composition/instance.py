"""One running Noema: the composition root every surface opens. It connects to the located servers,
builds the adapters (the JetStream publisher with its keyring sealer, the PostgreSQL reads, knowledge
and recall voices, the dead-letter stream) and hands them to the application facade
(:class:`noema.application.facade.Noema`) as its ports; and it holds the operations that drive the
servers themselves: erasure, replay and the reads as of a past point (over the read model's
history)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import asyncpg
import msgspec
import structlog

from noema.adapters.postgres.keyring import PostgresKeyring
from noema.adapters.postgres.knowledge import PostgresKnowledge
from noema.adapters.postgres.queries import MemoryQueries
from noema.adapters.postgres.tenancy import NO_WORKSPACE, workspace_scope
from noema.adapters.postgres.voices import RecallStore
from noema.application.facade import Noema
from noema.application.knowledge import Knowledge
from noema.composition.reader import QueryEmbedder
from noema.errors import Unavailable
from noema.ports import Embedder, ExpectingSink, ObservationSink
from noema.runtime.settings import Located
from noema.runtime.wiring import connect_nats, open_pool

if TYPE_CHECKING:
    # A read-only instance (``open(nats=False)``: noemactl's reads) loads no nats-py and none of
    # the modules below; one connected to NATS loads them as it is built or as it uses them.
    from nats.aio.client import Client as NATS

    from noema.adapters.deadletters import DeadLetters
    from noema.adapters.jetstream import EventPublisher
    from noema.adapters.metrics import Metrics  # prometheus_client: see Instance.metrics
    from noema.composition.asof import AsOf
    from noema.composition.erasure import ErasureReport, ErasureRequest
    from noema.observations import Stored
    from noema.stream_points import StreamPoint
    from noema.topology import Topology
    from noema_events import Event, ObservationRecorded

__all__ = ["Instance", "connected_knowledge"]

log = structlog.get_logger("noema.erasure")


def _utcnow() -> datetime:
    return datetime.now(UTC)


def connected_knowledge(
    pool: asyncpg.Pool, nc: NATS, topology: Topology, clock: Callable[[], datetime] = _utcnow
) -> Knowledge:
    """The knowledge operations over the PostgreSQL read model and the JetStream event stream."""
    from noema.adapters.jetstream import EventPublisher
    from noema.application.sealing import KeyringSealer

    publisher = EventPublisher(nc, topology, KeyringSealer(PostgresKeyring(pool)))
    return Knowledge(PostgresKnowledge(pool), publisher, clock, appends=publisher)


class _ReadOnly:
    """The event sinks of an instance opened without NATS (``Instance.open(nats=False)``): it
    publishes nothing, so a write through it is a bug of the surface that opened it so."""

    @staticmethod
    def _refuse() -> RuntimeError:
        return RuntimeError("this instance was opened for reads only (no NATS connection)")

    async def publish(self, events: Sequence[Event]) -> int:
        raise self._refuse()

    async def last_on_subject(self, like: Event) -> tuple[int, Event] | None:
        raise self._refuse()

    async def publish_expecting(self, event: Event, expected_last: int) -> int:
        raise self._refuse()

    async def send(self, obs: ObservationRecorded) -> Stored:
        raise self._refuse()


class Instance(Noema):
    """One running Noema, as seen by a surface: the application (:class:`Noema`) over one PostgreSQL
    pool (pgvector-aware, for recall) and one NATS connection (none when opened for reads only:
    ``open(nats=False)``)."""

    def __init__(
        self,
        settings: Located,
        pool: asyncpg.Pool,
        nc: NATS | None,
        store: RecallStore,
        clock: Callable[[], datetime] = _utcnow,
        *,
        point: AsOf | None = None,
        parent: Instance | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.settings = settings
        self.pool = pool
        self._nc = nc
        self.topology: Topology = settings.topology
        publisher: ExpectingSink
        observations: ObservationSink
        self._events: EventPublisher | None = None
        if nc is None:
            publisher = observations = _ReadOnly()
        else:
            from noema.adapters.jetstream import EventPublisher
            from noema.application.sealing import KeyringSealer
            from noema.client import JetStreamObservations

            publisher = self._events = EventPublisher(nc, self.topology, KeyringSealer(PostgresKeyring(pool)))
            observations = JetStreamObservations(nc, self.topology)
        self._parent = parent
        self._query_embedder = QueryEmbedder(settings)
        self.workspace = NO_WORKSPACE
        """What this instance's connections see by default under row-level security."""
        self._store = store
        self._past: asyncpg.Pool | None = None
        """The connections of the as-of reads (:meth:`as_of`), opened on first use."""
        self._past_lock = asyncio.Lock()
        self._past_scopes: dict[str, tuple[float, tuple[float, float]]] = {}
        """The scope sizes recall counted as of each point asked (they never change)."""
        self._resolved: dict[int, AsOf] = {}
        """The points asked by sequence, resolved on the stream (:func:`resolve`)."""
        super().__init__(
            publisher=publisher,
            memories=MemoryQueries(pool, clock),
            knowledge=Knowledge(PostgresKnowledge(pool), publisher, clock, appends=publisher),
            voices=store,
            observations=observations,
            embedder=self._loaded_embedder,
            connected=lambda: nc is not None and nc.is_connected,
            decay_interval_s=settings.decay_interval_s,
            clock=clock,
            point=point,
            as_of=self._view,
            metrics=metrics,
            subjects=PostgresKeyring(pool),
        )
        self._metrics: Metrics | None = metrics

    @property
    def nc(self) -> NATS:
        """The NATS connection (RuntimeError on an instance opened for reads only: a bug)."""
        if self._nc is None:
            raise _ReadOnly._refuse()
        return self._nc

    @functools.cached_property
    def dead_letters(self) -> DeadLetters:
        """The dead-letter stream: list, show, retry, drop (JetStream only, no read model)."""
        from noema.adapters.deadletters import DeadLetters

        nc = self.nc
        assert self._events is not None  # built with the connection
        return DeadLetters(nc, self.topology, self._events)

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
        nats: bool = True,
    ) -> AsyncIterator[Instance]:
        """Connect to the located servers as the read-only database role; closes everything on
        exit. ``workspace`` is what its connections see under row-level security unless a
        :func:`~noema.adapters.postgres.tenancy.workspace_scope` block says otherwise: a surface
        acting for one workspace scopes each request; ``"*"`` is every workspace. ``nats=False``:
        for reads of the read model only (noemactl's reads), without connecting to NATS or loading
        nats-py; publishing, the dead letters and the as-of views then raise RuntimeError (a bug)."""
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
            nc = await connect_nats(settings, stack, name) if nats else None
            app = cls(settings, pool, nc, await RecallStore.open(pool), metrics=metrics)
            app.workspace = workspace
            stack.push_async_callback(app.close_views)
            yield app

    async def as_of(self, point: StreamPoint) -> Instance:
        return await self._view(point)

    async def _view(self, point: StreamPoint) -> Instance:
        """A read-only view of the state as of ``point`` (:meth:`Noema.as_of` asks for it), on which
        every read of the facade answers what it answered then (:mod:`noema.composition.asof`): the
        same code over the versions of the read model's history valid at the point's sequence
        (:mod:`noema.adapters.postgres.history`), its clock pinned to the point's time, its vectors
        searched as the present's (:func:`~noema.adapters.postgres.history.point_store`). Nothing
        is built: any point answers at once, as the read-only role too.
        Its :attr:`point` says which sequence and time it reflects; a point the stream holds no
        state for is a :class:`~noema.composition.asof.PointNotInStream`, one before the history's
        start a :class:`~noema.composition.asof.PointBeforeHistory`."""
        if self._parent is not None:
            return await self._parent._view(point)
        from noema.adapters.postgres.history import PointPool, bounds, point_store
        from noema.composition.asof import PointBeforeHistory, resolve

        at = self._resolved.get(point) if isinstance(point, int) else None
        if at is None:
            at = await resolve(self.nc, self.topology, point, self.clock())
            if isinstance(point, int):
                # A sequence's time never changes: a point asked again skips the stream.
                if len(self._resolved) >= 1024:
                    del self._resolved[next(iter(self._resolved))]
                self._resolved[point] = at
        start, position = await bounds(self.pool)
        if at.seq < start:
            raise PointBeforeHistory(
                f"as of seq {at.seq}: this read model keeps its history from seq {start} (older "
                "versions are past NOEMA_HISTORY_DAYS, or it was upgraded from a release that kept "
                f"none then); ask a later point, or replay the earlier one (`noemactl replay --until "
                f"{at.seq} --keep`), or rebuild the read model with its whole history (`noemactl "
                "projection rebuild`, then `switch`)"
            )
        if position < at.seq and not await self._projected(at.seq, timeout_s=10.0):
            raise Unavailable(
                f"as of seq {at.seq}: the read model has not applied the stream that far yet; retry shortly"
            )
        pool = PointPool(await self._past_pool(), at.seq)
        # The reads take a pool: a point's pool lends connections pinned to the point.
        pinned: asyncpg.Pool = pool
        store = point_store(pool, self._store, self.settings.db_schema, self._past_scopes)
        return Instance(
            self.settings,
            pinned,
            self.nc,
            store,
            lambda: at.time,
            point=at,
            parent=self,
            metrics=self._metrics,
        )

    async def _past_pool(self) -> asyncpg.Pool:
        from noema.adapters.postgres.history import past_pool_options, search_path

        async with self._past_lock:
            if self._past is None:
                self._past = await RecallStore.create_pool(
                    self.settings.database_url_for("reader"),
                    self.settings.db_schema,
                    app="noema-asof",
                    workspace=self.workspace,
                    search_path=search_path(self.settings.db_schema),
                    min_size=0,
                    max_size=4,
                    **past_pool_options(),
                )
            return self._past

    async def close_views(self) -> None:
        """Close the connections of the as-of reads (:meth:`open` does it on exit)."""
        if self._past is not None:
            past, self._past = self._past, None
            await past.close()

    async def _loaded_embedder(self) -> Embedder | None:
        if self._parent is not None:
            return await self._parent.embedder()
        # The embedders (the HTTP client among them) load with the first search that needs one.
        return await self._query_embedder()

    async def erase(self, request: ErasureRequest) -> ErasureReport:
        """Operators: erase a subject's, a memory's or an observation's content for good, keeping
        the record that it happened (:mod:`noema.composition.erasure`, docs/privacy.md)."""
        from noema.adapters.postgres.erasure_handlers import blank_copies
        from noema.composition import erasure
        from noema.runtime.identities import shipped_allows

        publisher = self.writer()
        with workspace_scope(request.workspace):
            report = await erasure.erase(
                PostgresKeyring(self.pool),
                self.nc,
                self.topology,
                publisher,
                request,
                self.clock(),
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
        from noema.adapters.postgres.projection import ReadModelProjection

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
        from noema.composition.asof import resolve
        from noema.composition.replay import verify_replay

        if until is not None:
            await resolve(self.nc, self.topology, until, self.clock())
        return await verify_replay(self.settings, self.nc, until, keep, progress)
