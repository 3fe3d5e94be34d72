"""Projection versions in PostgreSQL: the registry, and switching one version in by renaming schemas.

The live read model is always the schema every process is configured with (``NOEMA_DB_SCHEMA``,
``noema``): its name never changes, so no reader, worker or pool has to learn of a switch. A version
that is not live rests in ``<schema>_v<N>``; switching renames the live schema to its resting name
and the new version's schema to the live name, in one transaction (PostgreSQL's DDL is
transactional: every other session sees the old names or the new ones, never a mix).

Why renaming is enough for the running processes: PostgreSQL resolves a table name when a statement
runs and re-plans a prepared statement after a schema changes (renaming a schema invalidates every
cached plan), so each session's next statement reads the new version. The one writer, the
projector, is held off during the switch by a lock on the live ``projection_position`` table (its
every transaction starts by locking its position row): it waits, then finds the table under that
name to be the new version's, whose position the switch has brought to exactly the live one. The
position row travels with its schema, so no event is skipped or applied twice.

Functions created with ``SET search_path FROM CURRENT`` (row security's ``noema_memory_visible``,
``noema_ensure_vector_index``) carry their schema's name as text; :func:`rename_schema` rewrites it.

The registry ``<schema>_projections.versions`` is the owner's alone: version number, the schema it
lives in now, its state (``building`` while its rebuild runs or after one was interrupted,
``ready``, ``active``, ``retired`` once switched out) and when each happened. The first time it is
read, the live read model becomes version 1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from noema.adapters.postgres.database import migrations
from noema.adapters.postgres.projection import ReadModelProjection
from noema.adapters.postgres.roles import grant_roles

__all__ = [
    "ProjectionVersion",
    "activate",
    "add_version",
    "drop_version",
    "ensure_registry",
    "lock_live_position",
    "make_durable",
    "pending_migrations",
    "position_of",
    "promote",
    "registry_schema",
    "rename_schema",
    "resting_schema",
    "set_state",
    "try_lock_versions",
    "versions",
]

_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
MAX_VERSION = 9_999


@dataclass(frozen=True)
class ProjectionVersion:
    """One version of the read model, as the registry records it."""

    version: int
    schema: str
    state: str
    created_at: datetime
    ready_at: datetime | None
    switched_in_at: datetime | None
    switched_out_at: datetime | None


def _checked(name: str) -> str:
    if not _SCHEMA.match(name):
        raise ValueError(f"invalid schema name {name!r}")
    return name


def registry_schema(live: str) -> str:
    """Where the registry of ``live``'s versions is kept."""
    return _checked(f"{live}_projections")


def resting_schema(live: str, version: int) -> str:
    """The schema version ``version`` lives in while it is not the live one."""
    return _checked(f"{live}_v{version}")


async def try_lock_versions(conn: asyncpg.Connection, live: str) -> bool:
    """Take the session lock that serialises rebuild, switch and drop of ``live``'s versions;
    False when another session holds it (released when ``conn`` closes)."""
    return bool(
        await conn.fetchval(
            "SELECT pg_try_advisory_lock(hashtext('noema-projection-versions'), hashtext($1))", live
        )
    )


async def ensure_registry(conn: asyncpg.Connection, live: str) -> None:
    """Create the registry if needed; with no version recorded, the live read model is version 1.
    Its sequence gives version numbers (:func:`next_version`)."""
    registry = registry_schema(live)
    await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {registry}")
    await conn.execute(f"CREATE SEQUENCE IF NOT EXISTS {registry}.version_numbers")
    await conn.execute(
        f"""CREATE TABLE IF NOT EXISTS {registry}.versions (
               version integer PRIMARY KEY, schema_name text NOT NULL UNIQUE,
               state text NOT NULL CHECK (state IN ('building', 'ready', 'active', 'retired')),
               created_at timestamptz NOT NULL DEFAULT now(), ready_at timestamptz,
               switched_in_at timestamptz, switched_out_at timestamptz)"""
    )
    await conn.execute(
        f"""INSERT INTO {registry}.versions (version, schema_name, state, ready_at, switched_in_at)
            SELECT 1, $1, 'active', now(), now()
            WHERE NOT EXISTS (SELECT 1 FROM {registry}.versions)""",
        live,
    )


async def next_version(conn: asyncpg.Connection, live: str) -> int:
    """A version number never given before, not even to a version dropped since: a sequence that
    every recorded version moves past (:func:`add_version`), started past the versions recorded
    before it existed."""
    registry = registry_schema(live)
    return int(
        await conn.fetchval(
            f"""SELECT greatest(nextval('{registry}.version_numbers'),
                                (SELECT coalesce(max(version), 0) + 1 FROM {registry}.versions))"""
        )
    )


async def versions(conn: asyncpg.Connection, live: str) -> list[ProjectionVersion]:
    """Every recorded version, oldest first."""
    rows = await conn.fetch(
        f"""SELECT version, schema_name AS schema, state, created_at, ready_at, switched_in_at,
                   switched_out_at
            FROM {registry_schema(live)}.versions ORDER BY version"""
    )
    return [ProjectionVersion(**dict(r)) for r in rows]


async def add_version(conn: asyncpg.Connection, live: str, version: int, schema: str) -> None:
    """Record a new version, ``building`` in ``schema`` (its number is never given again)."""
    registry = registry_schema(live)
    await conn.execute(
        f"""INSERT INTO {registry}.versions (version, schema_name, state)
            VALUES ($1, $2, 'building')""",
        version,
        schema,
    )
    await conn.execute(
        f"""SELECT setval('{registry}.version_numbers', $1::bigint)
            WHERE $1::bigint > (SELECT last_value FROM {registry}.version_numbers)""",
        version,
    )


async def set_state(conn: asyncpg.Connection, live: str, version: int, state: str) -> None:
    """Record that ``version`` is ``ready`` (or another state)."""
    await conn.execute(
        f"""UPDATE {registry_schema(live)}.versions
            SET state = $2, ready_at = CASE WHEN $2 = 'ready' THEN now() ELSE ready_at END
            WHERE version = $1""",
        version,
        state,
    )


async def position_of(conn: asyncpg.Connection, schema: str) -> int | None:
    """The stream sequence ``schema``'s read model has applied (None: no such schema or table)."""
    table = f"{_checked(schema)}.projection_position"
    if not await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", table):
        return None
    value = await conn.fetchval(
        f"SELECT last_seq FROM {table} WHERE projection = $1", ReadModelProjection.name
    )
    return int(value or 0)


async def pending_migrations(conn: asyncpg.Connection, schema: str) -> list[int]:
    """The migrations of this release ``schema`` lacks."""
    rows = await conn.fetch(f"SELECT version FROM {_checked(schema)}.schema_migrations")
    done = {r["version"] for r in rows}
    return [version for version, _, _ in migrations() if version not in done]


async def make_durable(conn: asyncpg.Connection, schema: str) -> None:
    """Make the unlogged tables of a bulk-loaded schema logged again (a table a logged one
    references first), so that it survives a crash like the live read model."""
    unlogged = {
        r["relname"]
        for r in await conn.fetch(
            """SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = $1 AND c.relkind = 'r' AND c.relpersistence = 'u'""",
            schema,
        )
    }
    references = [
        (r["referencing"], r["referenced"])
        for r in await conn.fetch(
            """SELECT a.relname AS referencing, b.relname AS referenced FROM pg_constraint k
               JOIN pg_class a ON a.oid = k.conrelid JOIN pg_class b ON b.oid = k.confrelid
               JOIN pg_namespace n ON n.oid = a.relnamespace
               WHERE n.nspname = $1 AND k.contype = 'f' AND k.conrelid <> k.confrelid""",
            schema,
        )
    ]
    while unlogged:
        ready = sorted(t for t in unlogged if not any(a == t and b in unlogged for a, b in references))
        if not ready:
            raise RuntimeError(f"the foreign keys of {schema} form a cycle: {sorted(references)}")
        for table in ready:
            await conn.execute(f'ALTER TABLE "{schema}"."{table}" SET LOGGED')
        unlogged -= set(ready)


async def rename_schema(conn: asyncpg.Connection, old: str, new: str) -> None:
    """Rename a read model's schema, its as-of views' schema (``<schema>_asof``, migration 0016,
    whose views follow their tables whatever their schema's name) and the search path its
    functions were created with."""
    await conn.execute(f"ALTER SCHEMA {_checked(old)} RENAME TO {_checked(new)}")
    if await conn.fetchval("SELECT to_regnamespace($1) IS NOT NULL", f"{old}_asof"):
        await conn.execute(f"ALTER SCHEMA {_checked(old + '_asof')} RENAME TO {_checked(new + '_asof')}")
    for row in await conn.fetch(
        """SELECT p.oid::regprocedure::text AS signature FROM pg_proc p
           WHERE p.pronamespace = $1::regnamespace
             AND EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%')""",
        new,
    ):
        await conn.execute(f"ALTER FUNCTION {row['signature']} SET search_path = {new}, public")


async def promote(conn: asyncpg.Connection, live: str, version: int, scratch: str) -> str:
    """Turn the bulk-loaded ``scratch`` schema into version ``version``'s resting schema, durable
    and with the live read model's grants; returns its name."""
    target = resting_schema(version=version, live=live)
    async with conn.transaction():
        await make_durable(conn, scratch)
        # A bulk load leaves no planner statistics: without them the first searches after the
        # switch would be planned blind until autovacuum came by.
        for table in await conn.fetch(
            "SELECT relname FROM pg_class WHERE relnamespace = $1::regnamespace AND relkind = 'r'", scratch
        ):
            await conn.execute(f'ANALYZE "{scratch}"."{table["relname"]}"')
        await rename_schema(conn, scratch, target)
        await grant_roles(conn, target)
        await conn.execute(
            f"UPDATE {registry_schema(live)}.versions SET schema_name = $2 WHERE version = $1",
            version,
            target,
        )
    return target


async def lock_live_position(conn: asyncpg.Connection, live: str, timeout_s: float) -> int:
    """Inside a transaction: hold off the projector (its transactions start by locking its
    position row; readers are not held) and return the live read model's position."""
    await conn.execute(f"SET LOCAL lock_timeout = '{int(timeout_s * 1000)}ms'")
    await conn.execute(f"LOCK TABLE {_checked(live)}.projection_position IN EXCLUSIVE MODE")
    position = await position_of(conn, live)
    return position or 0


async def activate(conn: asyncpg.Connection, live: str, current: int, new: int) -> None:
    """Inside the transaction of :func:`lock_live_position`: version ``current`` (the live read
    model) goes to its resting schema, version ``new`` takes the live name."""
    registry = registry_schema(live)
    new_schema = await conn.fetchval(f"SELECT schema_name FROM {registry}.versions WHERE version = $1", new)
    resting = resting_schema(live, current)
    await rename_schema(conn, live, resting)
    await rename_schema(conn, new_schema, live)
    await conn.execute(
        f"""UPDATE {registry}.versions SET state = 'retired', schema_name = $2, switched_out_at = now()
            WHERE version = $1""",
        current,
        resting,
    )
    await conn.execute(
        f"""UPDATE {registry}.versions SET state = 'active', schema_name = $2, switched_in_at = now(),
                   ready_at = coalesce(ready_at, now())
            WHERE version = $1""",
        new,
        live,
    )


async def drop_version(conn: asyncpg.Connection, live: str, version: int) -> str:
    """Drop a version that is not live: its schema and its registry row; returns the schema."""
    registry = registry_schema(live)
    async with conn.transaction():
        schema = await conn.fetchval(
            f"DELETE FROM {registry}.versions WHERE version = $1 AND state <> 'active' RETURNING schema_name",
            version,
        )
        if schema is None:
            raise LookupError(f"version {version} is active or unknown")
        if schema == live:
            raise RuntimeError(f"refusing to drop the live schema {live}")
        await conn.execute(f"DROP SCHEMA IF EXISTS {_checked(schema + '_asof')}, {_checked(schema)} CASCADE")
    return str(schema)
