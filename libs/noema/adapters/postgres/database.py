"""Connections scoped to one schema, and versioned SQL migrations applied idempotently."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from noema.adapters.postgres.roles import grant_roles
from noema.adapters.postgres.tenancy import NO_WORKSPACE, SETTING, apply_scope

__all__ = ["MigrationsPending", "connect", "create_pool", "drop_schema", "migrate", "migrations"]


def _log() -> Any:
    """This module's logger: structlog loads with the first record (opening a pool logs nothing
    unless pgvector is missing: a keyword search loads no structlog, issue 32)."""
    import structlog

    return structlog.get_logger("noema.postgres")


_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class MigrationsPending(RuntimeError):
    """The schema lacks migrations and this connection's role may not apply them."""


def _settings(schema: str, app: str, workspace: str) -> dict[str, str]:
    if not _SCHEMA.match(schema):
        raise ValueError(f"invalid schema name {schema!r}")
    # public stays on the path for the pgvector type and functions; the workspace setting is what
    # row-level security lets this connection see (noema.adapters.postgres.tenancy).
    return {"search_path": f"{schema}, public", "application_name": app, SETTING: workspace}


async def connect(
    url: str, schema: str, app: str = "noema", workspace: str = NO_WORKSPACE
) -> asyncpg.Connection:
    """One connection whose unqualified names resolve in ``schema``, seeing ``workspace``'s rows
    under row-level security (``"*"`` every workspace's, the default none)."""
    return await asyncpg.connect(url, server_settings=_settings(schema, app, workspace))


async def create_pool(
    url: str,
    schema: str,
    app: str = "noema",
    settings: dict[str, str] | None = None,
    workspace: str = NO_WORKSPACE,
    **kwargs: Any,
) -> asyncpg.Pool:
    """A pool whose connections resolve unqualified names in ``schema`` (plus extra ``settings``)
    and see ``workspace``'s rows by default; a :func:`~noema.adapters.postgres.tenancy.workspace_scope`
    block narrows the connections it acquires."""
    setup: Callable[[Any], Awaitable[None]] | None = kwargs.pop("setup", None)

    async def on_acquire(conn: Any) -> None:
        await apply_scope(conn, workspace)
        if setup is not None:
            await setup(conn)

    pool = await asyncpg.create_pool(
        url,
        server_settings={**_settings(schema, app, workspace), **(settings or {})},
        setup=on_acquire,
        **kwargs,
    )
    assert pool is not None
    return pool


def migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) of every migration file, in order."""
    from importlib import resources  # here: a process that migrates nothing does not load it

    found = []
    for entry in resources.files("noema.adapters.postgres").joinpath("migrations").iterdir():
        m = re.match(r"^(\d{4})_(\w+)\.sql$", entry.name)
        if m:
            found.append((int(m.group(1)), m.group(2), entry.read_text()))
    return sorted(found)


async def _pending(conn: asyncpg.Connection, schema: str) -> list[int] | None:
    """Migration versions ``schema`` lacks, read without DDL (None: no migration table yet)."""
    exists = await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f"{schema}.schema_migrations")
    if not exists:
        return None
    done = {r["version"] for r in await conn.fetch(f"SELECT version FROM {schema}.schema_migrations")}
    return [version for version, _, _ in migrations() if version not in done]


async def _may_migrate(conn: asyncpg.Connection, schema: str) -> bool:
    """Whether this role owns ``schema`` (or is a superuser, or may create it when it is missing)."""
    return bool(
        await conn.fetchval(
            """SELECT r.rolsuper OR coalesce(pg_has_role(n.nspowner, 'USAGE'),
                                             has_database_privilege(current_database(), 'CREATE'))
               FROM pg_roles r LEFT JOIN pg_namespace n ON n.nspname = $1
               WHERE r.rolname = current_user""",
            schema,
        )
    )


async def migrate(url: str, schema: str) -> list[int]:
    """Create ``schema`` if needed and apply the migrations it lacks; returns the versions applied.

    Safe to run concurrently (an advisory lock serialises starters) and repeatedly (applied versions
    are recorded). pgvector is enabled when the server has it; without it the rest still works.
    After the migrations the projector and reader roles, where they exist, get their grants. A role
    that does not own the schema (a worker given its application role's URL) finds it up to date
    and returns; if migrations are pending it raises :class:`MigrationsPending`.
    """
    if not _SCHEMA.match(schema):
        raise ValueError(f"invalid schema name {schema!r}")
    conn = await asyncpg.connect(url)
    applied: list[int] = []
    try:
        if not await _may_migrate(conn, schema):
            pending = await _pending(conn, schema)
            if pending == []:
                return []
            user = await conn.fetchval("SELECT current_user")
            raise MigrationsPending(
                f"schema {schema!r} needs migrations {pending or 'all'} and role {user!r} may not apply "
                "them: run `noemactl up`'s preparation or any Noema process with the owner's URL "
                "(NOEMA_DATABASE_URL) first"
            )
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('noema-migrate'))")
            await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            try:
                async with conn.transaction():
                    await conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
            except asyncpg.PostgresError as exc:
                _log().warning("pgvector unavailable; vector recall disabled", error=str(exc))
            await conn.execute(f"SET LOCAL search_path = {schema}, public")
            await conn.execute(
                """CREATE TABLE IF NOT EXISTS schema_migrations (
                       version integer PRIMARY KEY, name text NOT NULL, sha256 text NOT NULL,
                       applied_at timestamptz NOT NULL DEFAULT now())"""
            )
            done = {
                r["version"]: r["sha256"]
                for r in await conn.fetch("SELECT version, sha256 FROM schema_migrations")
            }
            for version, name, sql in migrations():
                digest = hashlib.sha256(sql.encode()).hexdigest()
                if version in done:
                    if done[version] != digest:
                        _log().warning("applied migration differs from its file", version=version, name=name)
                    continue
                await conn.execute(sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, sha256) VALUES ($1, $2, $3)",
                    version,
                    name,
                    digest,
                )
                applied.append(version)
            if not schema.startswith("replay_"):
                await grant_roles(conn, schema)
    finally:
        await conn.close()
    if applied:
        _log().info("migrations applied", schema=schema, versions=applied)
    return applied


async def drop_schema(url: str, schema: str) -> None:
    """Drop ``schema`` and everything in it, if it exists, with its as-of views (``<schema>_asof``,
    migration 0016); callers decide which schemas may go."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f"DROP SCHEMA IF EXISTS {schema}_asof, {schema} CASCADE")
    finally:
        await conn.close()
