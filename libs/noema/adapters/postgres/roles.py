"""Least privilege in PostgreSQL: who owns the read model and what each process kind may do.

Three login roles (cluster-wide; grants are per schema):

- ``noema_owner`` owns the schema and its tables: it runs the migrations and replay (which creates
  and drops ``replay_*`` schemas). Not a superuser; it may create schemas in the database.
- ``noema_projector`` reads and writes the projected tables (the projector only); it creates a
  model's vector index through an owner's-rights function, nothing else. It writes every
  workspace's rows, and bulk-loads them with COPY, which PostgreSQL refuses under row security:
  it is the one role that bypasses row security (BYPASSRLS — not a superuser right).
- ``noema_reader`` reads only, but for adding data keys and key links to the keyring: the API, the
  agent service, the MCP server, the CLI's reads, the workers that read the model (retrieve, decay,
  conflicts) and those that only seal and open content with the keyring (attend, embed).

Row-level security (migration 0006; 0014 for the keyring) applies to the reader role (not to the
owner or the projector).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import asyncpg

__all__ = [
    "DB_ROLES",
    "LEAKPROOF_SQL",
    "RELOAD_CONFIG_SQL",
    "DbRole",
    "grant_roles",
    "prepare_database",
    "prepare_database_at",
    "role_name",
    "roles_sql",
    "superuser_password_sql",
]

RELOAD_CONFIG_SQL = "SELECT pg_reload_conf();"
"""Makes the server re-read pg_hba.conf (after the embedded server's rules are written)."""


def superuser_password_sql(superuser: str, password: str) -> str:
    """The statement that sets the superuser's password (sent over stdin, never a command line)."""
    return f"ALTER ROLE {superuser} PASSWORD '{password}';\n"


DbRole = Literal["owner", "projector", "reader"]
"""The kinds of database access a Noema process needs."""

DB_ROLES: dict[DbRole, str] = {
    "owner": "noema_owner",
    "projector": "noema_projector",
    "reader": "noema_reader",
}
"""Role kind → PostgreSQL role name."""


def role_name(role: DbRole) -> str:
    """The PostgreSQL role of a kind."""
    return DB_ROLES[role]


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def roles_sql(passwords: Mapping[DbRole, str]) -> str:
    """SQL (for a superuser) creating each role with its password, or resetting the password of one
    that exists; none is a superuser, none may create roles or databases, only the projector
    bypasses row security."""
    statements = []
    for kind, name in DB_ROLES.items():
        rls = "BYPASSRLS" if kind == "projector" else "NOBYPASSRLS"
        attrs = f"LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE {rls} NOREPLICATION INHERIT"
        pw = _literal(passwords[kind])
        statements.append(
            "DO $$ BEGIN\n"
            f"  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{name}') THEN\n"
            f"    ALTER ROLE {name} {attrs} PASSWORD {pw};\n"
            "  ELSE\n"
            f"    CREATE ROLE {name} {attrs} PASSWORD {pw};\n"
            "  END IF;\n"
            "END $$;"
        )
    return "\n".join(statements) + "\n"


LEAKPROOF_SQL = "ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) LEAKPROOF"
"""Under row-level security PostgreSQL uses an index for a condition only if its function is
LEAKPROOF (it cannot reveal a row the policy hides, e.g. through an error). Full-text matching
(``tsvector @@ tsquery``) is not marked so, which would turn every text search of a reader into a
scan of the workspace instead of a GIN index lookup. It reveals nothing but its result, so the
superuser marks it (again after a major-version upgrade, which resets the built-ins)."""


async def prepare_database(conn: asyncpg.Connection, schema: str) -> None:
    """As a superuser: enable pgvector, mark full-text matching leakproof (:data:`LEAKPROOF_SQL`),
    let the owner create schemas, and give it ``schema`` — also one a superuser created and
    migrated before the roles existed (its tables and functions)."""
    owner = DB_ROLES["owner"]
    try:
        async with conn.transaction():
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
    except asyncpg.PostgresError:
        pass  # migrate() logs that vector recall is off
    await conn.execute(LEAKPROOF_SQL)
    database = await conn.fetchval("SELECT current_database()")
    await conn.execute(f'GRANT CREATE, CONNECT ON DATABASE "{database}" TO {owner}')
    for given in (schema, f"{schema}_asof", KEYRING_SCHEMA):  # _asof: the as-of views (migration 0016)
        await _give(conn, given, owner)


async def prepare_database_at(superuser_url: str, schema: str) -> None:
    """:func:`prepare_database` over a connection of its own to ``superuser_url``."""
    conn = await asyncpg.connect(superuser_url)
    try:
        await prepare_database(conn, schema)
    finally:
        await conn.close()


KEYRING_SCHEMA = "noema_keyring"
"""The data keys of every read-model schema of the database (migration 0013)."""


async def _give(conn: asyncpg.Connection, schema: str, owner: str) -> None:
    """Make ``owner`` own ``schema``, creating it or handing over what a superuser made in it."""
    found = await conn.fetchval(
        "SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = $1", schema
    )
    if found is None:
        await conn.execute(f"CREATE SCHEMA {schema} AUTHORIZATION {owner}")
        return
    if found == owner:
        return
    async with conn.transaction():
        await conn.execute(f"ALTER SCHEMA {schema} OWNER TO {owner}")
        for table in await conn.fetch(
            "SELECT relname, relkind FROM pg_class WHERE relnamespace = $1::regnamespace "
            "AND relkind IN ('r', 'p', 'v')",
            schema,
        ):
            kind = "VIEW" if table["relkind"] == "v" else "TABLE"
            await conn.execute(f'ALTER {kind} {schema}."{table["relname"]}" OWNER TO {owner}')
        for func in await conn.fetch(
            "SELECT oid::regprocedure::text AS sig FROM pg_proc WHERE pronamespace = $1::regnamespace",
            schema,
        ):
            await conn.execute(f"ALTER FUNCTION {func['sig']} OWNER TO {owner}")


async def grant_roles(conn: asyncpg.Connection, schema: str) -> list[str]:
    """Grant the projector and reader roles (those that exist) their rights on ``schema``; run by
    its owner (or a superuser) after the migrations. Idempotent; returns the roles granted."""
    existing = {
        r["rolname"]
        for r in await conn.fetch(
            "SELECT rolname FROM pg_roles WHERE rolname = ANY($1::text[])",
            [DB_ROLES["projector"], DB_ROLES["reader"]],
        )
    }
    reader, projector = DB_ROLES["reader"], DB_ROLES["projector"]
    # The as-of views (migration 0016) read with their reader's rights (security_invoker).
    asof = f"{schema}_asof"
    has_asof = await conn.fetchval(
        "SELECT coalesce(pg_has_role(current_user, nspowner, 'USAGE'), false) FROM pg_namespace "
        "WHERE nspname = $1",
        asof,
    )
    if reader in existing:
        await conn.execute(f"GRANT USAGE ON SCHEMA {schema} TO {reader}")
        await conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {reader}")
        if has_asof:
            await conn.execute(f"GRANT USAGE ON SCHEMA {asof} TO {reader}")
            await conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {asof} TO {reader}")
    if projector in existing:
        await conn.execute(f"GRANT USAGE ON SCHEMA {schema} TO {projector}")
        await conn.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {projector}"
        )
        # The migration history is the owner's alone.
        await conn.execute(f"REVOKE INSERT, UPDATE, DELETE ON {schema}.schema_migrations FROM {projector}")
        index_function = f"{schema}.noema_ensure_vector_index(text, text, integer)"
        await conn.execute(f"GRANT EXECUTE ON FUNCTION {index_function} TO {projector}")
    await _grant_keyring(conn, existing)
    return sorted(existing)


async def _grant_keyring(conn: asyncpg.Connection, existing: set[str]) -> None:
    """The keyring (migration 0013): every writer of events seals content, so readers may add keys
    and read them; only the projector (applying ``content.erased``) and the owner destroy them. Its
    owner (or a superuser) grants; another role migrating its own schema leaves it as it is."""
    owns = await conn.fetchval(
        "SELECT pg_has_role(current_user, nspowner, 'USAGE') FROM pg_namespace WHERE nspname = $1",
        KEYRING_SCHEMA,
    )
    if not owns:
        return
    owner = DB_ROLES["owner"]
    if await conn.fetchval("SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", owner):
        await conn.execute(f"GRANT USAGE ON SCHEMA noema_keyring TO {owner}")
        await conn.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA noema_keyring TO {owner}")
    for role in existing:
        await conn.execute(f"GRANT USAGE ON SCHEMA noema_keyring TO {role}")
        rights = "SELECT, INSERT, UPDATE" if role == DB_ROLES["projector"] else "SELECT, INSERT"
        await conn.execute(f"GRANT {rights} ON ALL TABLES IN SCHEMA noema_keyring TO {role}")
