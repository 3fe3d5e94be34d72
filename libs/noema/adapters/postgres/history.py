"""The read model's history (migration 0016), read as of a point of the stream.

Each state table keeps every version of its rows in ``<table>_history``, valid from the stream
sequence that wrote it (``valid_from_seq``) until the one that replaced it (``valid_to_seq``, NULL
while it holds). The schema ``<schema>_asof`` holds a view of each table the reads use, under the
table's own name, over the versions valid at the connection's ``noema.as_of_seq``; the other names
(functions, the migration table) resolve in the live schema behind it on the search path. So an
as-of read runs the present's read code, unchanged, on a connection of :func:`create_pool` that
:class:`PointPool` pins to its point: no replay, no build, no schema per point.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import asyncpg

from noema.adapters.postgres.textsearch import TermStats
from noema.adapters.postgres.voices import RecallStore

__all__ = [
    "HISTORY_TABLES",
    "SETTING",
    "PointConnection",
    "PointPool",
    "asof_schema",
    "bounds",
    "history_start",
    "past_pool_options",
    "point_store",
    "prune",
    "scope_sql",
    "search_path",
]

HISTORY_TABLES = (
    "memories_history",
    "relationships_history",
    "memory_embeddings_history",
    "domains_history",
    "grants_history",
    "workspace_settings_history",
    "policies_history",
    "conflicts_history",
    "working_memory_history",
    "agent_notes_history",
)
"""The history tables of migration 0016, one per state table."""

SETTING = "noema.as_of_seq"
"""The setting the as-of views read their point from (``noema_as_of()``, migration 0016)."""


def asof_schema(schema: str) -> str:
    """The schema of the as-of views of the read model in ``schema``."""
    return f"{schema}_asof"


def search_path(schema: str) -> str:
    """An as-of connection's search path: the views first, then the live schema and ``public``."""
    return f"{asof_schema(schema)}, {schema}, public"


async def history_start(conn: asyncpg.Connection | asyncpg.Pool) -> int:
    """The first sequence the history answers for (0: all of them; a read model migrated from an
    earlier release starts at its position then)."""
    value = await conn.fetchval("SELECT seq FROM history_start")
    return int(value or 0)


async def bounds(conn: asyncpg.Connection | asyncpg.Pool) -> tuple[int, int]:
    """(:func:`history_start`, the read model's position) in one round trip: the points an as-of
    read may ask are those from the first up to the second."""
    row = await conn.fetchrow(
        "SELECT (SELECT seq FROM history_start) AS start, "
        "(SELECT last_seq FROM projection_position WHERE projection = 'read_model') AS position"
    )
    assert row is not None
    return int(row["start"] or 0), int(row["position"] or 0)


async def prune(conn: asyncpg.Connection, before_seq: int) -> int:
    """Bound the history (``NOEMA_HISTORY_DAYS``): drop the versions no point from ``before_seq`` on
    can see (replaced at or before it) and start the history there; returns the versions dropped
    (0 when it already starts there or later). One transaction."""
    dropped = 0
    async with conn.transaction():
        if before_seq <= await history_start(conn):
            return 0
        for table in HISTORY_TABLES:
            status = await conn.execute(
                f"DELETE FROM {table} WHERE valid_to_seq IS NOT NULL AND valid_to_seq <= $1", before_seq
            )
            dropped += int(status.split()[-1])
        await conn.execute("UPDATE history_start SET seq = $1", before_seq)
    return dropped


class PointConnection(asyncpg.Connection):  # type: ignore[misc]
    """A connection of the as-of reads' pool (:func:`past_pool_options`): it remembers the point it
    reads as of, which its release keeps, so a read of the same point again needs no round trip to
    pin it."""

    as_of_seq: int | None = None

    async def pin(self, seq: int) -> None:
        """Read as of ``seq`` from now on (a round trip only when it read as of another point)."""
        if self.as_of_seq != seq:
            await self.execute(f"SELECT set_config('{SETTING}', '{int(seq)}', false)")
            self.as_of_seq = seq


async def _keep_point(conn: asyncpg.Connection) -> None:
    """The pool's reset of a released connection (asyncpg's: locks, cursors, listeners, settings),
    then its point set again, in the same round trip."""
    query = conn.get_reset_query()
    seq = getattr(conn, "as_of_seq", None)
    if seq is not None:
        query += f"; SELECT set_config('{SETTING}', '{int(seq)}', false)"
    await conn.execute(query)


def past_pool_options() -> dict[str, Any]:
    """The ``asyncpg.create_pool`` options of the pool a :class:`PointPool` lends from."""
    return {"connection_class": PointConnection, "reset": _keep_point}


class PointPool:
    """A pool of as-of connections pinned to one stream sequence: every connection it lends reads
    the versions valid at ``seq``. It offers the methods the read adapters use of a pool."""

    def __init__(self, pool: asyncpg.Pool, seq: int) -> None:
        self._pool = pool
        self.seq = seq

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[asyncpg.Connection]:
        """A connection reading as of :attr:`seq` (a pool of :func:`past_pool_options`, whose
        connections keep their point; of another pool, the point is set on each)."""
        async with self._pool.acquire() as conn:
            # issubclass, not isinstance: asyncpg's connections answer isinstance for any of them.
            if issubclass(type(getattr(conn, "_con", conn)), PointConnection):
                await conn.pin(self.seq)
            else:
                await conn.execute(f"SELECT set_config('{SETTING}', '{int(self.seq)}', false)")
            yield conn

    async def fetch(self, query: str, *args: Any, **kwargs: Any) -> list[asyncpg.Record]:
        async with self.acquire() as conn:
            return list(await conn.fetch(query, *args, **kwargs))

    async def fetchrow(self, query: str, *args: Any, **kwargs: Any) -> asyncpg.Record | None:
        async with self.acquire() as conn:
            return await conn.fetchrow(query, *args, **kwargs)

    async def fetchval(self, query: str, *args: Any, **kwargs: Any) -> Any:
        async with self.acquire() as conn:
            return await conn.fetchval(query, *args, **kwargs)

    async def execute(self, query: str, *args: Any, **kwargs: Any) -> str:
        async with self.acquire() as conn:
            return str(await conn.execute(query, *args, **kwargs))


def scope_sql(schema: str) -> str:
    """A scope's size as of the connection's point (:class:`TermStats`' statement, the present's
    :data:`~noema.adapters.postgres.textsearch.SCOPE_SQL` as of it), from the scopes' marks
    (migration 0018): per workspace its last mark by the point, plus the memories created after it
    up to the point (at most a block of sequences and a statement's), read by ``memories_since``.

    A memory's first version holds from its creation (``origin_seq``), no memory is deleted but by
    erasure (which removes or blanks every version of it, and corrects the marks) and its words
    change only by erasure, so the live memories created by then are the memories, and the words,
    the as-of view holds. The average is the present's ``avg()``: the same numeric division of the
    words' sum by the count."""
    s = schema
    return f"""WITH w AS (
            SELECT $1::text AS workspace WHERE $1::text IS NOT NULL
            UNION ALL
            SELECT DISTINCT workspace FROM {s}.memory_scope_marks WHERE $1::text IS NULL
        ), c AS (
            SELECT coalesce(k.memories, 0) + t.n AS n, coalesce(k.lexemes, 0) + t.l AS l
            FROM w
            LEFT JOIN LATERAL (SELECT k.seq, k.memories, k.lexemes FROM {s}.memory_scope_marks k
                               WHERE k.workspace = w.workspace AND k.seq <= {s}.noema_as_of()
                               ORDER BY k.seq DESC LIMIT 1) k ON true
            CROSS JOIN LATERAL (SELECT count(*) AS n, coalesce(sum(length(m.search)), 0) AS l
                                FROM {s}.memories m
                                WHERE m.workspace = w.workspace AND m.origin_seq > coalesce(k.seq, -1)
                                  AND m.origin_seq <= {s}.noema_as_of()) t
        )
        SELECT coalesce(sum(n), 0) AS n,
               CASE WHEN sum(n) > 0 THEN sum(l)::numeric / sum(n)::numeric ELSE 1 END AS avgdl
        FROM c"""


def point_store(
    pool: PointPool,
    present: RecallStore,
    schema: str,
    scopes: dict[str, tuple[float, tuple[float, float]]] | None = None,
) -> RecallStore:
    """The recall store of the reads as of ``pool``'s point: the semantic voice walks the live
    vector index filtered on the point (:meth:`RecallStore.past_semantic_sql`), or compares a
    small scope exactly, as the present's does; its scope sizes (:func:`scope_sql`: a few rows from
    the scopes' marks, not a count of the workspace) are cached under the point in ``scopes``
    (shared by the points of one process: the past does not change)."""
    pinned: asyncpg.Pool = pool  # it lends what the store uses of a pool
    stats = TermStats(schema=f"{schema}@{pool.seq}", cache=scopes, counted=scope_sql(schema))
    return RecallStore(pinned, present.has_vectors, stats, live=schema)
