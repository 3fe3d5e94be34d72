"""The tests' pool of migrated schemas (tests/conftest.py): a schema a test gives back reaches the
next one as migration made it — its rows emptied, the migrations' own rows kept — and a schema whose
definition a test changed is dropped, never handed out again."""

from __future__ import annotations

import asyncpg

from tests.conftest import SchemaPool, Servers


async def test_a_schema_given_back_holds_only_what_migration_wrote(
    servers: Servers, schema_pool: SchemaPool
) -> None:
    name = await schema_pool.take()
    conn = await asyncpg.connect(servers.database_url)
    try:
        migrations = await conn.fetch(
            f"SELECT version, sha256 FROM {name}.schema_migrations ORDER BY version"
        )
        assert migrations
        await conn.execute(
            f"INSERT INTO {name}.memory_terms (workspace, lexeme, memories) VALUES ('acme', 'x', 1)"
        )
        await conn.execute(f"ANALYZE {name}.memory_terms")
        await schema_pool.give_back(name)
        assert await schema_pool.take() == name  # the schema just given back is the next one out
        assert await conn.fetchval(f"SELECT count(*) FROM {name}.memory_terms") == 0
        kept = await conn.fetch(f"SELECT version, sha256 FROM {name}.schema_migrations ORDER BY version")
        assert kept == migrations
        stats = await conn.fetchval(
            "SELECT count(*) FROM pg_statistic WHERE starelid = $1::regclass", f"{name}.memory_terms"
        )
        assert stats == 0, "the planner sees no statistics of the last test's rows"
    finally:
        await conn.close()
    await schema_pool.give_back(name)


async def test_a_schema_whose_definition_a_test_changed_is_dropped(
    servers: Servers, schema_pool: SchemaPool
) -> None:
    name = await schema_pool.take()
    conn = await asyncpg.connect(servers.database_url)
    try:
        await conn.execute(f"CREATE TABLE {name}.left_behind (x integer)")
        await conn.execute(f"CREATE SCHEMA replay_{name}_a")  # one made next to it
        await schema_pool.give_back(name)
        assert not await conn.fetchval("SELECT to_regnamespace($1) IS NOT NULL", name)
        assert not await conn.fetchval("SELECT to_regnamespace($1) IS NOT NULL", f"replay_{name}_a")
        other = await schema_pool.take()
        assert other != name
        assert await conn.fetchval(f"SELECT to_regclass('{other}.left_behind')") is None
    finally:
        await conn.close()
    await schema_pool.give_back(other)
