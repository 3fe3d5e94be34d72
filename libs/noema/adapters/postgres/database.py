"""Connections scoped to one schema, and versioned SQL migrations applied idempotently."""

from __future__ import annotations

import hashlib
import re
from importlib import resources
from typing import Any

import asyncpg
import structlog

__all__ = ["connect", "create_pool", "migrate", "migrations"]

log = structlog.get_logger("noema.postgres")
_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def _settings(schema: str, app: str) -> dict[str, str]:
    if not _SCHEMA.match(schema):
        raise ValueError(f"invalid schema name {schema!r}")
    # public stays on the path for the pgvector type and functions.
    return {"search_path": f"{schema}, public", "application_name": app}


async def connect(url: str, schema: str, app: str = "noema") -> asyncpg.Connection:
    """One connection whose unqualified names resolve in ``schema``."""
    return await asyncpg.connect(url, server_settings=_settings(schema, app))


async def create_pool(
    url: str, schema: str, app: str = "noema", settings: dict[str, str] | None = None, **kwargs: Any
) -> asyncpg.Pool:
    """A pool whose connections resolve unqualified names in ``schema`` (plus extra ``settings``)."""
    pool = await asyncpg.create_pool(
        url, server_settings={**_settings(schema, app), **(settings or {})}, **kwargs
    )
    assert pool is not None
    return pool


def migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) of every migration file, in order."""
    found = []
    for entry in resources.files("noema.adapters.postgres").joinpath("migrations").iterdir():
        m = re.match(r"^(\d{4})_(\w+)\.sql$", entry.name)
        if m:
            found.append((int(m.group(1)), m.group(2), entry.read_text()))
    return sorted(found)


async def migrate(url: str, schema: str) -> list[int]:
    """Create ``schema`` if needed and apply the migrations it lacks; returns the versions applied.

    Safe to run concurrently (an advisory lock serialises starters) and repeatedly (applied versions
    are recorded). pgvector is enabled when the server has it; without it the rest still works.
    """
    if not _SCHEMA.match(schema):
        raise ValueError(f"invalid schema name {schema!r}")
    conn = await asyncpg.connect(url)
    applied: list[int] = []
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('noema-migrate'))")
            await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            try:
                async with conn.transaction():
                    await conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
            except asyncpg.PostgresError as exc:
                log.warning("pgvector unavailable; vector recall disabled", error=str(exc))
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
                        log.warning("applied migration differs from its file", version=version, name=name)
                    continue
                await conn.execute(sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, sha256) VALUES ($1, $2, $3)",
                    version,
                    name,
                    digest,
                )
                applied.append(version)
    finally:
        await conn.close()
    if applied:
        log.info("migrations applied", schema=schema, versions=applied)
    return applied
