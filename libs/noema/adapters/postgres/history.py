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
    "PointPool",
    "asof_schema",
    "history_start",
    "point_store",
    "prune",
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


class PointPool:
    """A pool of as-of connections pinned to one stream sequence: every connection it lends reads
    the versions valid at ``seq``. It offers the methods the read adapters use of a pool."""

    def __init__(self, pool: asyncpg.Pool, seq: int) -> None:
        self._pool = pool
        self.seq = seq

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[asyncpg.Connection]:
        """A connection reading as of :attr:`seq` (the pool resets the setting on release)."""
        async with self._pool.acquire() as conn:
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


def point_store(pool: PointPool, present: RecallStore, schema: str) -> RecallStore:
    """The recall store of the reads as of ``pool``'s point: vectors compared exactly (like the
    oracle), its text statistics cached under the point (the past does not change)."""
    pinned: asyncpg.Pool = pool  # it lends what the store uses of a pool
    return RecallStore(pinned, present.has_vectors, TermStats(schema=f"{schema}@{pool.seq}"), exact=True)
