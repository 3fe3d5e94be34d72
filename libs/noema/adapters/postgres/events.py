"""Reads of the audit copy of the stream (the ``events`` table) by reference, by causation and
correlation, and by range: :class:`noema.ports.EventReads` over PostgreSQL, for ``why`` and
``audit diff``. Every lookup but the payload match is served by an index (``events_id``,
``events_causation``, ``events_correlation``, the primary key for ranges)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

from noema.adapters.postgres.keyring import opened_rows
from noema.ports import StreamPoint

__all__ = ["EVENT_FIELDS", "EventQueries", "quoted"]

EVENT_FIELDS = (
    "seq, id, type, workspace, mind, occurred_at, causation_id, correlation_id, actor, subject, "
    "payload::text AS payload"
)


def quoted(ref: str) -> str:
    """``ref`` as a JSON string: how a payload's text holds it as a value (ids are plain text, so
    a match of the quoted form is a whole value, never part of a longer one)."""
    import msgspec  # here: a read of memory alone (a keyword search) loads no msgspec (issue 32)

    return msgspec.json.encode(ref).decode()


class EventQueries:
    """The :class:`noema.ports.EventReads` half of :class:`~noema.adapters.postgres.queries.MemoryQueries`."""

    _pool: asyncpg.Pool

    async def events_naming(self, workspace: str | None, ref: str, limit: int) -> list[dict[str, Any]]:
        """Events whose id, causation or correlation id is ``ref`` or whose payload holds it, in stream
        order. The payload is matched as text (as ``citing_events`` does), so without a workspace
        this reads every event's payload; with one, that workspace's only."""
        found = await self._pool.fetch(
            f"SELECT {EVENT_FIELDS} FROM events WHERE ($1::text IS NULL OR workspace = $1) "
            "AND (id = $2 OR causation_id = $2 OR correlation_id = $2 OR strpos(payload::text, $3) > 0) "
            "ORDER BY seq LIMIT $4",
            workspace,
            ref,
            quoted(ref),
            limit,
        )
        return await opened_rows(self._pool, found)

    async def events_with_ids(self, workspace: str, ids: Sequence[str]) -> list[dict[str, Any]]:
        """The events of ``workspace`` with these ids, in stream order."""
        found = await self._pool.fetch(
            f"SELECT {EVENT_FIELDS} FROM events WHERE workspace = $1 AND id = ANY($2::text[]) ORDER BY seq",
            workspace,
            list(ids),
        )
        return await opened_rows(self._pool, found)

    async def correlation_starts(self, workspace: str, ids: Sequence[str]) -> list[dict[str, Any]]:
        """The first event of each of these correlations, in stream order."""
        found = await self._pool.fetch(
            f"SELECT * FROM (SELECT DISTINCT ON (correlation_id) {EVENT_FIELDS} FROM events "
            "WHERE workspace = $1 AND correlation_id = ANY($2::text[]) ORDER BY correlation_id, seq) s "
            "ORDER BY seq",
            workspace,
            list(ids),
        )
        return await opened_rows(self._pool, found)

    async def events_caused_by(self, workspace: str, ids: Sequence[str], limit: int) -> list[dict[str, Any]]:
        """The first ``limit`` events caused by one of ``ids``, in stream order."""
        found = await self._pool.fetch(
            f"SELECT {EVENT_FIELDS} FROM events WHERE workspace = $1 AND causation_id = ANY($2::text[]) "
            "ORDER BY seq LIMIT $3",
            workspace,
            list(ids),
            limit,
        )
        return await opened_rows(self._pool, found)

    async def reference_workspaces(self, ref: str) -> list[str]:
        """The workspaces (at most 2) where ``ref`` is an event's id, causation or correlation id, or
        a memory's or policy's id."""
        found = await self._pool.fetch(
            """SELECT DISTINCT workspace FROM (
                   SELECT workspace FROM events WHERE id = $1
                   UNION ALL SELECT workspace FROM events WHERE causation_id = $1
                   UNION ALL SELECT workspace FROM events WHERE correlation_id = $1
                   UNION ALL SELECT workspace FROM memories WHERE id = $1
                   UNION ALL SELECT workspace FROM policies WHERE id = $1
               ) w ORDER BY workspace LIMIT 2""",
            ref,
        )
        return [r["workspace"] for r in found]

    async def events_between(
        self,
        workspace: str | None,
        types: Sequence[str],
        after: StreamPoint,
        through: StreamPoint,
        limit: int,
    ) -> list[dict[str, Any]]:
        """The first ``limit`` events of ``types`` after ``after`` and at or before ``through``, in
        stream order (a time bound compares with each event's ``occurred_at``)."""
        found = await self._pool.fetch(
            f"SELECT {EVENT_FIELDS} FROM events "
            "WHERE ($1::text IS NULL OR workspace = $1) AND type = ANY($2::text[]) "
            "AND ($3::bigint IS NULL OR seq > $3) AND ($4::timestamptz IS NULL OR occurred_at > $4) "
            "AND ($5::bigint IS NULL OR seq <= $5) AND ($6::timestamptz IS NULL OR occurred_at <= $6) "
            "ORDER BY seq LIMIT $7",
            workspace,
            list(types),
            after.seq,
            after.at,
            through.seq,
            through.at,
            limit,
        )
        return await opened_rows(self._pool, found)
