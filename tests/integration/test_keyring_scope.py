"""The keyring under row-level security (migration 0014): the reader role, scoped to one workspace,
reads and adds that workspace's data keys and key links only — a reader query that forgets its
workspace condition cannot reach another workspace's keys; unscoped, it reads none."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from noema.adapters.postgres import connect
from noema.adapters.postgres.keyring import PostgresKeyring, lookup_keys
from noema.adapters.postgres.roles import DbRole
from noema.adapters.postgres.tenancy import ALL_WORKSPACES, NO_WORKSPACE
from noema.domain.sealed_events import KeyRequest
from tests.conftest import Harness

pytestmark = pytest.mark.integration


@pytest.fixture
async def two_workspaces(harness: Harness) -> tuple[str, str]:
    """One key and one link in each of two fresh workspaces (the keyring is the database's, shared
    by every test schema: the names are unique), written past row security (the superuser)."""
    tag = uuid.uuid4().hex[:8]
    mine, theirs = f"ks-a-{tag}", f"ks-b-{tag}"
    async with harness.pool.acquire() as conn:
        for ws in (mine, theirs):
            await conn.execute(
                "INSERT INTO noema_keyring.data_keys (key_id, workspace, key) VALUES ($1, $2, $3)",
                f"{ws}-key",
                ws,
                b"k" * 32,
            )
            await conn.execute(
                "INSERT INTO noema_keyring.key_links (workspace, kind, value, key_id) "
                "VALUES ($1, 'subject', 'person:1', $2)",
                ws,
                f"{ws}-key",
            )
    return mine, theirs


async def _visible(conn: asyncpg.Connection, mine: str, theirs: str) -> dict[str, set[str]]:
    ours = [mine, theirs]
    keys = await conn.fetch("SELECT workspace FROM noema_keyring.data_keys WHERE workspace = ANY($1)", ours)
    links = await conn.fetch("SELECT workspace FROM noema_keyring.key_links WHERE workspace = ANY($1)", ours)
    # A query that forgets the workspace (as an injected or buggy reader query would).
    everything = await conn.fetch("SELECT workspace FROM noema_keyring.data_keys")
    return {
        "keys": {r["workspace"] for r in keys},
        "links": {r["workspace"] for r in links},
        "any": {r["workspace"] for r in everything} & set(ours),
    }


async def test_a_scoped_reader_reads_its_workspaces_keys_only(
    harness: Harness, role_urls: dict[DbRole, str], two_workspaces: tuple[str, str]
) -> None:
    mine, theirs = two_workspaces
    schema, reader = harness.settings.db_schema, role_urls["reader"]
    conn = await connect(reader, schema, workspace=mine)
    try:
        assert await _visible(conn, mine, theirs) == {"keys": {mine}, "links": {mine}, "any": {mine}}
        assert set(await lookup_keys(conn, [f"{mine}-key", f"{theirs}-key"])) == {f"{mine}-key"}
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
            await conn.execute(
                "INSERT INTO noema_keyring.data_keys (key_id, workspace, key) VALUES ($1, $2, $3)",
                f"{theirs}-planted",
                theirs,
                b"x" * 32,
            )
    finally:
        await conn.close()
    unscoped = await connect(reader, schema, workspace=NO_WORKSPACE)
    try:
        assert await _visible(unscoped, mine, theirs) == {"keys": set(), "links": set(), "any": set()}
    finally:
        await unscoped.close()
    every = await connect(
        reader, schema, workspace=ALL_WORKSPACES
    )  # retrieve, decay, conflicts, attend, embed
    try:
        both = {mine, theirs}
        assert await _visible(every, mine, theirs) == {"keys": both, "links": both, "any": both}
    finally:
        await every.close()


async def test_sealing_in_a_scoped_request_still_creates_and_reads_its_keys(
    harness: Harness, role_urls: dict[DbRole, str], two_workspaces: tuple[str, str]
) -> None:
    """What the API and the agent service do per request: ensure a new key in the request's
    workspace and read it back. Another workspace's id is never handed over."""
    mine, theirs = two_workspaces
    pool = await asyncpg.create_pool(
        role_urls["reader"],
        min_size=1,
        max_size=1,
        server_settings={"search_path": harness.settings.db_schema, "noema.workspace": mine},
    )
    try:
        keyring = PostgresKeyring(pool)
        fresh = f"{mine}-fresh"
        keys = await keyring.ensure([KeyRequest(fresh, mine, subjects=("person:2",))])
        assert keys[fresh] is not None
        assert await keyring.lookup([fresh, f"{theirs}-key"]) == {fresh: keys[fresh]}
        assert await keyring.linked(theirs, "subject", ["person:1"]) == set()
        assert await keyring.linked(mine, "subject", ["person:1", "person:2"]) == {f"{mine}-key", fresh}
    finally:
        await pool.close()
