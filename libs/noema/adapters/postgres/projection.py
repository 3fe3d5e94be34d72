"""The read-model projection: applies events from the stream to PostgreSQL tables.

Rows and the tracking position are written in one transaction and the position only advances, so a
redelivered batch is a no-op; the caller acks the JetStream messages after the commit. Events of
one type are applied together in bulk (COPY / set-based SQL), as far as that gives the same rows as
applying them one by one in stream order (:mod:`~noema.adapters.postgres.commuting`), so a later
event always sees the effects of earlier ones and batch boundaries never change the result.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import asyncpg
import msgspec

from noema.adapters.postgres import digests
from noema.adapters.postgres.commuting import segments
from noema.adapters.postgres.erasure_handlers import ERASURE_HANDLERS
from noema.adapters.postgres.handlers import HANDLERS
from noema.adapters.postgres.keyring import lookup_keys
from noema.adapters.postgres.knowledge_handlers import KNOWLEDGE_HANDLERS
from noema.adapters.postgres.registry import Footprint, Handler, Handlers, Projected
from noema.domain.sealed_events import is_sealed_event, key_ids_to_open, opened
from noema.domain.sealing import KeyBytes
from noema_events import ContentErased, Event

__all__ = [
    "EVENT_COLUMNS",
    "POISON",
    "PROJECTED_TABLES",
    "PROJECTION_HANDLERS",
    "STATE_TABLES",
    "Projected",
    "ProjectionWriter",
    "ReadModelProjection",
    "Refused",
    "checksum",
    "event_row",
]

STATE_TABLES: tuple[str, ...] = (
    "events",
    "memories",
    "relationships",
    "memory_embeddings",
    "domains",
    "grants",
    "workspace_settings",
    "policies",
    "conflicts",
    "working_memory",
    "agent_notes",
)
"""The state tables the projection owns (besides ``events``), each with its history."""

PROJECTED_TABLES: tuple[str, ...] = (
    *STATE_TABLES,
    *(f"{table}_history" for table in STATE_TABLES[1:]),
)
"""Tables the projection owns; replay rebuilds them and the checksum covers them: the live rows and
every version the history holds (migration 0016)."""

PROJECTION_HANDLERS = Handlers.joined(HANDLERS, KNOWLEDGE_HANDLERS, ERASURE_HANDLERS)
"""Event type → handler of every type the projection applies (a type two modules handle fails the
import); the other events are only kept in ``events``."""

EVENT_COLUMNS = (
    "seq",
    "id",
    "type",
    "workspace",
    "mind",
    "occurred_at",
    "causation_id",
    "correlation_id",
    "actor",
    "subject",
    "payload",
)
"""The columns of the ``events`` table, the audit copy of the stream."""
_json = msgspec.json.Encoder()


def event_row(p: Projected) -> tuple[object, ...]:
    """The ``events`` row of a projected event in :data:`EVENT_COLUMNS` order, the payload as JSON
    text (the in-memory adapter keeps the same rows); an event upcast on read is kept as recorded."""
    ev = p.event
    tag, payload = p.recorded or (ev.type, _json.encode(ev.payload).decode())  # type: ignore[attr-defined]
    return (
        p.seq,
        ev.id,
        tag,
        ev.workspace,
        ev.mind,
        ev.occurred_at,
        ev.causation_id,
        ev.correlation_id,
        ev.actor,
        p.subject,
        payload,
    )


POISON: tuple[type[BaseException], ...] = (
    asyncpg.DataError,
    asyncpg.IntegrityConstraintViolationError,
    asyncpg.exceptions.ProgramLimitExceededError,
)
"""Errors that mean "this event can never be stored" (its values break a type, a constraint or a size
limit) rather than "try again" or "the code is wrong"."""

Refused = Callable[[Projected, str], Awaitable[None]]
"""Called for each event the database refused, with the reason, before the skip is committed."""


class ReadModelProjection:
    """Builds the read model from events; one instance per schema (live or replay)."""

    name = "read_model"

    def __init__(self) -> None:
        self._handlers = Handlers.joined(PROJECTION_HANDLERS)
        self._keys: dict[str, KeyBytes] = {}
        """Data keys read from the keyring (None: destroyed); an erasure evicts its keys."""
        self.refused: list[tuple[Projected, str]] = []
        """Events of the last :meth:`apply` the database refused (skipped, with the reason)."""

    def register(
        self, event_type: type[Event], handler: Handler, touches: Callable[[Any], Footprint] | None = None
    ) -> None:
        """Add the handler of an event type, touching the rows ``touches`` names (not given:
        anything); later capabilities plug in here; ``ValueError`` if the type already has one."""
        self._handlers.add(event_type, handler, touches)

    async def position(self, conn: asyncpg.Connection) -> int:
        """The last stream sequence applied (0 when none)."""
        value = await conn.fetchval(
            "SELECT last_seq FROM projection_position WHERE projection = $1", self.name
        )
        return int(value or 0)

    async def apply(
        self,
        conn: asyncpg.Connection,
        batch: Sequence[Projected],
        through_seq: int | None = None,
        on_refused: Refused | None = None,
    ) -> int:
        """Apply the events after the tracked position, in one transaction; returns how many.

        ``through_seq`` advances the position past stream entries that were not projectable. An
        event the database refuses (:data:`POISON`) is skipped; ``on_refused`` is awaited for each
        inside the transaction, before the position moves past it, so its dead letter is stored
        before the skip is committed (a crash in between writes the same dead letter again, once).
        Any other exception rolls the whole batch back.
        """
        async with conn.transaction():
            await conn.execute(
                "INSERT INTO projection_position (projection, last_seq) VALUES ($1, 0) "
                "ON CONFLICT DO NOTHING",
                self.name,
            )
            last = await conn.fetchval(
                "SELECT last_seq FROM projection_position WHERE projection = $1 FOR UPDATE", self.name
            )
            fresh = [p for p in batch if p.seq > last]
            target = max([through_seq or 0, *(p.seq for p in fresh)])
            self.refused = []
            if target <= last:
                return 0
            if fresh:
                self.refused = await self._project_or_skip(conn, fresh)
            if on_refused is not None:
                for projected, reason in self.refused:
                    await on_refused(projected, reason)
            await conn.execute(
                "UPDATE projection_position SET last_seq = $2 WHERE projection = $1", self.name, target
            )
        return len(fresh) - len(self.refused)

    async def _project_or_skip(
        self, conn: asyncpg.Connection, fresh: Sequence[Projected]
    ) -> list[tuple[Projected, str]]:
        """Apply the batch; if the database refuses it (bad data, a constraint, a size limit), apply
        its events one by one and skip the ones it refuses — the same way on every replay, since
        the database then holds the same state — instead of stalling on them forever.

        Only :data:`POISON` errors mean "this event can never be stored". Anything else (a bug in a
        handler, a lost connection) propagates, so it is retried and never silently skipped.
        """
        try:
            async with conn.transaction():  # a savepoint inside apply's transaction
                await self._project(conn, fresh)
            return []
        except POISON:
            pass
        refused = []
        for p in fresh:
            try:
                async with conn.transaction():
                    await self._project(conn, [p])
            except POISON as exc:
                refused.append((p, f"refused by the database: {type(exc).__name__}: {exc}"))
        return refused

    async def _project(self, conn: asyncpg.Connection, fresh: Sequence[Projected]) -> None:
        """Write the audit copy of each event (sealed content as recorded), then apply the batch's
        runs in order with their content opened (one handler call per run;
        :func:`~noema.adapters.postgres.commuting.segments`). An erasure ends a part of the batch:
        what follows it is opened only once its keys are destroyed."""
        await conn.copy_records_to_table(
            "events", columns=EVENT_COLUMNS, records=[event_row(p) for p in fresh]
        )
        for part in _split_after_erasures(fresh):
            for segment in segments(await self._opened(conn, part), self._footprint):
                for run in segment:
                    handler = self._handlers.get(type(run[0].event))
                    if handler is not None:
                        await handler(conn, run)
            if isinstance(part[-1].event, ContentErased):
                for key_id in part[-1].event.payload.key_ids:
                    self._keys.pop(key_id, None)

    async def _opened(self, conn: asyncpg.Connection, part: Sequence[Projected]) -> list[Projected]:
        """The events with their sealed content opened by the keyring's keys (erased content
        empty); the audit copy of each was written as recorded, before."""
        needed = key_ids_to_open([p.event for p in part]) - self._keys.keys()
        if needed:
            if len(self._keys) > _KEY_CACHE:
                self._keys.clear()
            found = await lookup_keys(conn, needed)
            self._keys.update({k: found.get(k) for k in needed})
        out = []
        for p in part:
            if not is_sealed_event(p.event):
                out.append(p)
                continue
            out.append(Projected(p.seq, p.subject, opened(p.event, self._keys), p.recorded))
        return out

    def _footprint(self, event: Event) -> Footprint:
        """What ``event``'s handler touches, as registered; nothing when no handler applies it."""
        return self._handlers.touches(event)


class ProjectionWriter:
    """The read model as the projector's decision writes it
    (:class:`noema.application.projector.ReadModelWriter`): each batch applied by ``projection`` in one
    transaction on a connection of ``connection`` — the claim's own when several instances run, so
    only the session holding the claim can commit (the fence)."""

    def __init__(
        self,
        projection: ReadModelProjection,
        connection: Callable[[], AbstractAsyncContextManager[asyncpg.Connection]],
    ) -> None:
        self._projection = projection
        self._connection = connection

    async def project(self, batch: Sequence[Projected], through: int, refused: Refused | None = None) -> int:
        """:meth:`ReadModelProjection.apply` on one of the connections."""
        async with self._connection() as conn:
            return await self._projection.apply(conn, batch, through_seq=through, on_refused=refused)


def _split_after_erasures(batch: Sequence[Projected]) -> list[Sequence[Projected]]:
    """The batch in parts, each ending at a ``content.erased`` (or at the batch's end)."""
    parts: list[Sequence[Projected]] = []
    start = 0
    for i, p in enumerate(batch):
        if isinstance(p.event, ContentErased):
            parts.append(batch[start : i + 1])
            start = i + 1
    if start < len(batch):
        parts.append(batch[start:])
    return parts


_KEY_CACHE = 200_000
"""Keys kept in process at most (about 100 bytes each); past that the cache starts over."""


async def checksum(conn: asyncpg.Connection, tables: Sequence[str] = PROJECTED_TABLES) -> str:
    """A digest of every projected row (order-independent), equal for equal read models
    (:mod:`~noema.adapters.postgres.digests`)."""
    return await digests.checksum(conn, tables)
