"""Versioned projections on real servers: ``noemactl projection rebuild`` while observations are
ingested, ``switch`` (quiet, then under load and back), every read answering the same across a
switch, ``noemactl replay`` matching afterwards, the old version kept until dropped, and the
refusals (unknown version, one that has not caught up, the active one)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import asyncpg
import pytest

from noema.adapters.postgres import versions as pv
from noema.adapters.postgres.roles import DbRole, prepare_database
from noema.client import publish_observation
from noema.composition.replay import replay_into
from noema_attend.service import build as build_attend
from noema_conflicts.service import build as build_conflicts
from tests.conftest import Harness
from tests.contract.cli_backends import at_about_the_same_time
from tests.integration.api_harness import ApiHarness, api
from tests.integration.cli_process import ctl, ctl_json
from tests.integration.test_api_knowledge import settled

pytestmark = pytest.mark.integration

__all__ = ["api"]

FACT = {"workspace": "acme", "domain": "ops", "topic": "deploy-day", "reason": "from the runbook"}


@pytest.fixture
async def versioned(harness: Harness, role_urls: dict[DbRole, str]) -> AsyncIterator[Harness]:
    """Every process signed in as its role, as `up` runs them: the schema handed to the owner
    role, which runs the projection commands (as it runs replay); the projector writes as its role,
    readers read as theirs. The versions' schemas and the registry are dropped afterwards."""
    superuser = harness.settings.database_url
    conn = await asyncpg.connect(superuser)
    try:
        await prepare_database(conn, harness.settings.db_schema)
    finally:
        await conn.close()
    harness.settings = replace(
        harness.settings,
        database_url=role_urls["owner"],
        database_url_projector=role_urls["projector"],
        database_url_reader=role_urls["reader"],
    )
    yield harness
    live = harness.settings.db_schema
    conn = await asyncpg.connect(superuser)
    try:
        for row in await conn.fetch(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE $1 OR nspname LIKE 'replay_pv%'",
            f"{live}\\_%",
        ):
            await conn.execute(f"DROP SCHEMA {row['nspname']} CASCADE")
    finally:
        await conn.close()


async def ingest(harness: Harness, start: int, n: int) -> None:
    """Publish observations ``start`` .. ``start + n - 1``, a few at a time."""
    for i in range(start, start + n):
        await publish_observation(
            harness.js,
            f"observation {i}: host-{i % 17} reported status {i % 5} after the deploy",
            workspace="acme",
            mind=f"m{i % 3}",
            topology=harness.topology,
        )
        if i % 20 == 0:
            await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def ingesting(harness: Harness, start: int) -> AsyncIterator[list[int]]:
    """Observations published from ``start`` on, until the block ends; yields the list of
    stream sequences they were stored at so far."""
    stored: list[int] = []
    stop = asyncio.Event()

    async def publish() -> None:
        i = start
        while not stop.is_set():
            stored.append(
                await publish_observation(
                    harness.js,
                    f"observation {i}: host-{i % 17} reported status {i % 5} after the deploy",
                    workspace="acme",
                    mind=f"m{i % 3}",
                    topology=harness.topology,
                )
            )
            i += 1
            await asyncio.sleep(0.01)

    task = asyncio.create_task(publish())
    try:
        yield stored
    finally:
        stop.set()
        await task


async def reads(a: ApiHarness, fact_id: str) -> dict[str, Any]:
    """What the read surfaces answer: the API's listings, search, facts, conflicts, why and audit,
    and noemactl's (the API's answers, printed)."""
    answers: dict[str, Any] = {}
    for path, params in [
        ("/v1/memories", {"workspace": "acme", "limit": "200"}),
        ("/v1/timeline", {"workspace": "acme", "limit": "200"}),
        ("/v1/memories/search", {"q": "host reported status deploy", "workspace": "acme", "explain": "true"}),
        ("/v1/facts", {"workspace": "acme", "include_inactive": "true"}),
        ("/v1/conflicts", {"workspace": "acme"}),
        (f"/v1/why/{fact_id}", {}),
        ("/v1/audit", {"workspace": "acme", "limit": "200"}),
    ]:
        res = await a.admin.get(path, params=params)
        assert res.status_code == 200, (path, res.text)
        answers[path] = res.json()
    # The API's clock is pinned; noemactl reads activations at the real time, a little later each run.
    listed = await ctl_json(a, "memory", "list", "-w", "acme", "--limit", "200")
    answers["cli memory list"] = at_about_the_same_time(listed)
    answers["cli why"] = await ctl_json(a, "why", fact_id)
    return answers


async def assert_secured_like_live(h: Harness, role_urls: dict[DbRole, str], retired: str) -> None:
    """The version switched in has the row-level security, grants and function search paths of
    the one switched out (each function's path names its own schema)."""
    live = h.settings.db_schema

    async def security(schema: str) -> list[tuple[str, ...]]:
        rows = await h.pool.fetch(
            """SELECT tablename, policyname, qual FROM pg_policies WHERE schemaname = $1
               UNION ALL SELECT table_name, grantee, privilege_type
                         FROM information_schema.role_table_grants WHERE table_schema = $1
               ORDER BY 1, 2, 3""",
            schema,
        )
        # A policy's expression names a function of a schema off the search path with its schema.
        return [tuple(str(v).replace(f"{schema}.", "") for v in r) for r in rows]

    assert await security(live) == await security(retired)
    assert len(await security(live)) > 20
    paths = await h.pool.fetch(
        """SELECT n.nspname, array_to_string(p.proconfig, ',') AS config FROM pg_proc p
           JOIN pg_namespace n ON n.oid = p.pronamespace
           WHERE n.nspname = ANY($1::text[]) AND p.proconfig IS NOT NULL""",
        [live, retired],
    )
    assert len(paths) == 4
    assert all(r["config"] == f"search_path={r['nspname']}, public" for r in paths), paths
    reader = await asyncpg.connect(role_urls["reader"], server_settings={"search_path": live})
    try:  # a reader's connection that names no workspace sees none of it
        assert await reader.fetchval("SELECT count(*) FROM memories") == 0
        assert await h.pool.fetchval("SELECT count(*) FROM memories") > 0
    finally:
        await reader.close()


async def test_a_version_rebuilt_while_ingesting_switches_in_and_back_and_replay_matches(
    versioned: Harness, api: ApiHarness, role_urls: dict[DbRole, str]
) -> None:
    h = versioned
    await h.start(build_attend)
    await h.start(build_conflicts)
    old = (await api.admin.post("/v1/facts", json={**FACT, "content": "Deploys happen on Fridays"})).json()
    await api.admin.post("/v1/facts", json={**FACT, "content": "Deploys happen on Tuesdays"})
    await ingest(h, 0, 100)
    await settled(api)

    async with ingesting(h, 100) as stored:
        built = await ctl_json(api, "projection", "rebuild")
        during = len(stored)
    assert during > 0, "observations arrived during the rebuild"
    assert (built["version"], built["schema"], built["state"]) == (2, f"{h.settings.db_schema}_v2", "ready")
    assert built["position"] >= built["replayed_through"] > 0

    await settled(api)
    before = await reads(api, old["memory_id"])
    switched = await ctl_json(api, "projection", "switch", "2")
    assert (switched["version"], switched["schema"]) == (2, h.settings.db_schema)
    assert switched["previous"] == {"version": 1, "schema": f"{h.settings.db_schema}_v1"}
    assert await reads(api, old["memory_id"]) == before, "every read answers the same across the switch"

    await assert_secured_like_live(h, role_urls, f"{h.settings.db_schema}_v1")

    status = await ctl_json(api, "projection", "status")
    assert [(v["version"], v["state"], v["schema"]) for v in status["versions"]] == [
        (1, "retired", f"{h.settings.db_schema}_v1"),
        (2, "active", h.settings.db_schema),
    ]
    assert status["active"] == 2
    assert status["versions"][1]["lag"] == 0

    # Under load: the retired version is caught up and switched back in while attend and the
    # projector keep going; the projector carries on in the schema that now has the live name.
    async with ingesting(h, 10_000) as stored:
        await asyncio.sleep(0.3)
        back = await ctl_json(api, "projection", "switch", "1")
        at_switch = len(stored)
        await asyncio.sleep(0.5)
    assert 0 < at_switch < len(stored), "observations arrived before, during and after the switch"
    assert back["previous"] == {"version": 2, "schema": f"{h.settings.db_schema}_v2"}
    await settled(api)
    replayed = await ctl(api, "replay", "--json")
    assert replayed.code == 0, replayed.stdout + replayed.stderr
    assert json.loads(replayed.stdout)["match"] is True

    kept = await h.pool.fetchval(f"SELECT count(*) FROM {h.settings.db_schema}_v2.memories")
    assert kept > 0, "the version switched out is kept until dropped"
    dropped = await ctl_json(api, "projection", "drop", "2")
    assert dropped == {"version": 2, "schema": f"{h.settings.db_schema}_v2", "dropped": True}
    assert await h.pool.fetchval("SELECT to_regnamespace($1)", f"{h.settings.db_schema}_v2") is None
    status = await ctl_json(api, "projection", "status")
    assert [(v["version"], v["state"]) for v in status["versions"]] == [(1, "active")]


async def test_bad_versions_are_refused_with_their_exit_codes(versioned: Harness, api: ApiHarness) -> None:
    h = versioned
    await h.start(build_attend)
    await ingest(h, 0, 30)
    await api.caught_up()
    live = h.settings.db_schema

    unknown = await ctl(api, "projection", "switch", "7")
    assert unknown.code == 4, unknown.stderr
    assert "no projection version 7 (the versions are 1;" in unknown.stderr
    assert (await ctl(api, "projection", "switch", "two")).code == 2
    assert (await ctl(api, "projection", "drop", "0")).code == 2
    active = await ctl(api, "projection", "switch", "1")
    assert (active.code, "already the active one" in active.stderr) == (5, True)
    assert (await ctl(api, "projection", "drop", "1")).code == 5

    # A rebuild that stopped half-way (its process killed): the version is still building.
    conn = await asyncpg.connect(h.settings.database_url)  # the owner's
    try:
        await pv.ensure_registry(conn, live)
        await pv.add_version(conn, live, 2, "replay_pv2_halfway")
        await replay_into(h.nc, h.settings.database_url, h.topology, "replay_pv2_halfway", 5)
    finally:
        await conn.close()
    halfway = await ctl(api, "projection", "switch", "2", "--json")
    assert halfway.code == 5
    refusal = json.loads(halfway.stderr)
    assert refusal["exit_code"] == 5
    assert (
        "projection version 2 has not caught up: its rebuild has not finished (it is at seq 5"
        in (refusal["error"])
    )
    assert (await ctl(api, "projection", "drop", "2")).code == 0
    assert await h.pool.fetchval("SELECT to_regnamespace('replay_pv2_halfway')") is None

    # One rebuild, switch or drop at a time; status reads beside them.
    busy = await asyncpg.connect(h.settings.database_url)
    try:
        assert await pv.try_lock_versions(busy, live)
        second = await ctl(api, "projection", "rebuild")
        assert (second.code, "another `noemactl projection`" in second.stderr) == (5, True)
        listed = await ctl_json(api, "projection", "status")
        assert [(v["version"], v["state"], v["lag"]) for v in listed["versions"]] == [(1, "active", 0)]
    finally:
        await busy.close()
    # The number of a dropped version is never given to another one (an audit naming "version 2"
    # must keep meaning the one that was dropped).
    rebuilt = await ctl_json(api, "projection", "rebuild")
    assert rebuilt["version"] == 3
