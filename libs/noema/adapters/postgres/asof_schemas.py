"""The as-of schemas in PostgreSQL: the read model as of one stream sequence, kept to be queried.

Each is a ``replay_*`` schema (built by replay, owned by ``noema_owner``) renamed into place under
its final name only once it is complete, so a schema of that name is always a finished build; its
``projection_position`` says the sequence it holds. Its tables are unlogged (a scratch copy: a
crash of PostgreSQL empties them, and the position with them, which :func:`holds` then notices).
The reader role may read it, under the row-level security policies its migrations created, as it
reads the live schema. Building one point is serialised across processes by an advisory lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg

from noema.adapters.postgres.database import migrations
from noema.adapters.postgres.position import projected_seq
from noema.adapters.postgres.roles import DB_ROLES
from noema.adapters.postgres.versions import rename_schema

__all__ = ["KeptSchema", "build_lock", "drop", "exists", "holds", "kept", "prefix", "publish", "schema_name"]

_BUILT = re.compile(r"^noema as-of seq (\d+) built (\S+)$")


@dataclass(frozen=True)
class KeptSchema:
    """One as-of schema: its name, the sequence it holds and when it was built."""

    schema: str
    seq: int
    built_at: datetime


def prefix(live_schema: str) -> str:
    """The name every as-of schema of ``live_schema`` starts with (a digest keeps any live schema's
    name within PostgreSQL's 63 characters)."""
    return f"replay_asof_{hashlib.sha1(live_schema.encode()).hexdigest()[:10]}_"


def schema_name(live_schema: str, seq: int) -> str:
    """The as-of schema of ``live_schema`` at ``seq``."""
    return f"{prefix(live_schema)}{seq}"


async def holds(pool: asyncpg.Pool, seq: int) -> bool:
    """Whether the schema ``pool`` reads still holds the state at ``seq`` as this release builds it
    (it may have been dropped meanwhile, emptied by a crash, or built by an earlier release whose
    read model lacked a migration of this one's: such a state is rebuilt, not read with today's
    code, which would fail on what it lacks)."""
    try:
        if await projected_seq(pool) != seq:
            return False
        applied = await pool.fetchval("SELECT max(version) FROM schema_migrations")
    except (asyncpg.UndefinedTableError, asyncpg.InvalidSchemaNameError):
        return False
    return bool(applied == migrations()[-1][0])


@contextlib.asynccontextmanager
async def build_lock(owner_url: str, schema: str) -> AsyncIterator[None]:
    """Hold the lock on building ``schema`` (a session advisory lock on its own connection): two
    requests for one point build it once, the second finding it built."""
    conn = await asyncpg.connect(owner_url)
    try:
        await conn.execute("SELECT pg_advisory_lock(hashtext($1))", f"noema-asof:{schema}")
        yield
    finally:
        await conn.close()  # releases the lock


async def exists(owner_url: str, schema: str) -> bool:
    """Whether ``schema`` exists."""
    conn = await asyncpg.connect(owner_url)
    try:
        return bool(await conn.fetchval("SELECT to_regnamespace($1) IS NOT NULL", schema))
    finally:
        await conn.close()


_MARK_ERASED = """
    UPDATE "{schema}".memories m
    SET erased_at = k.destroyed_at, erasure_id = k.erasure_id, status = 'erased'
    FROM noema_keyring.data_keys k
    WHERE k.key_id = m.id AND k.workspace = m.workspace AND k.key IS NULL AND m.erased_at IS NULL
"""
"""Mark the memories of destroyed keys (a memory's key is its id: noema.domain.sealed_events) erased."""


async def publish(owner_url: str, building: str, schema: str, seq: int, now: datetime) -> None:
    """Analyse the finished build ``building``, give the reader role read access to it (the
    projector none: the state of a past point is never written) and rename it ``schema``, in one
    transaction."""
    reader = DB_ROLES["reader"]
    conn = await asyncpg.connect(owner_url)
    try:
        # Statistics first: a bulk-loaded schema has none, and the planner would read a memory's
        # citing events by scanning them all (200 ms instead of a few at 10,000 events).
        for table in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = $1", building):
            await conn.execute(f'ANALYZE "{building}"."{table["tablename"]}"')
        async with conn.transaction():
            # A memory erased since this point replays empty (its key is gone): it reads as erased,
            # when it was (docs/privacy.md), not as a memory whose content is the empty text.
            await conn.execute(_MARK_ERASED.format(schema=building))
            if await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", reader):
                await conn.execute(f"GRANT USAGE ON SCHEMA {building} TO {reader}")
                await conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {building} TO {reader}")
            # With the search path its functions were created with: row security's visibility
            # function would otherwise look for the build's name, gone after the rename.
            await rename_schema(conn, building, schema)
            note = f"noema as-of seq {seq} built {now.astimezone(UTC).isoformat()}"
            await conn.execute(f"COMMENT ON SCHEMA {schema} IS '{note}'")
    finally:
        await conn.close()


async def kept(url: str, live_schema: str) -> list[KeptSchema]:
    """The finished as-of schemas of ``live_schema``, oldest build first."""
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            """SELECT nspname, obj_description(oid, 'pg_namespace') AS note FROM pg_namespace
               WHERE starts_with(nspname, $1)""",
            prefix(live_schema),
        )
    finally:
        await conn.close()
    found = []
    for row in rows:
        m = _BUILT.match(row["note"] or "")
        if m:  # a build in progress (or abandoned) has no note yet
            found.append(KeptSchema(row["nspname"], int(m.group(1)), datetime.fromisoformat(m.group(2))))
    return sorted(found, key=lambda k: (k.built_at, k.seq))


async def drop(owner_url: str, schema: str) -> None:
    """Drop one as-of schema (or an abandoned build of one)."""
    if not schema.startswith("replay_asof_"):
        raise ValueError(f"refusing to drop {schema!r}: not an as-of schema")
    conn = await asyncpg.connect(owner_url)
    try:
        await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    finally:
        await conn.close()
