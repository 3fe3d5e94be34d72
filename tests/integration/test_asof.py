"""Reads as of a past point on every surface equal the oracle: ``replay --until-seq N --keep``, then
the same read, live-style, on that schema with the clock at the point's time — rows and scores.

One scenario (memories, a recall, a decay tick, a fact superseded by the conflicts worker, a policy,
notes, a retraction, the workspace made strict with a grant), its points recorded as it goes; at
each, search, show and the preamble through the HTTP API, ``noemactl``, MCP and the NATS service
(the SDK), and every other read of memory and knowledge through the API and ``noemactl``, answer
what the oracle answers. A point with no state (beyond the end, in the future) is not found and one
that is no point at all is invalid, on every surface; a workspace's token sees no other workspace
through as-of; a server reading as the read-only role answers from the points the operator built;
with a query embedder, semantic and hybrid search as of a point compare the vectors held then.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import math
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import msgspec
import pytest

from noema.adapters.jetstream import EventPublisher, stream_last_seq
from noema.adapters.postgres import ReadModelProjection, history
from noema.adapters.postgres.roles import DbRole
from noema.adapters.postgres.tenancy import ALL_WORKSPACES, workspace_scope
from noema.adapters.postgres.voices import RecallStore
from noema.application.access import Caller
from noema.application.facade import SearchOptions
from noema.application.tools import call_tool
from noema.composition import projections
from noema.composition.erasure import ErasureRequest
from noema.composition.instance import Instance
from noema.composition.replay import drop_schema, verify_replay
from noema.errors import NotFound as NotFoundError
from noema_api.app import create_app
from noema_api.auth import TokenEntry, Tokens
from noema_api.endpoint import Api
from noema_conflicts.service import build as build_conflicts
from noema_events import (
    ActivationDecayed,
    ActivationDecayedPayload,
    Event,
    MemoryCreated,
    MemoryEmbedded,
    MemoryEmbeddedPayload,
    MemoryRetrieved,
    MemoryRetrievedPayload,
)
from noema_mcp.server import preamble_uri
from noema_projector.service import build as build_projector
from noema_sdk import InvalidRequest, NotFound
from noema_service.service import build as build_service
from tests.conftest import Harness
from tests.integration.api_harness import ACME, ADMIN, memory
from tests.integration.cli_process import NOEMACTL, Ran
from tests.integration.test_mcp import over_stdio
from tests.integration.test_service import client
from tests.mcp_results import error, ok
from tests.support import assert_eventually, consumer_drained

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OPERATOR = Caller("acme", "root", "operator", operator=True)
INTERN = Caller("acme", "intern", "intern")
ALICE = Caller("acme", "alice", "engineer")  # whom the MCP server acts for (tests.integration.test_mcp)
QUERY = "deploy key rotates"
TASK = "plan the next deploy of the key rotation"


@dataclass
class World:
    """The servers, the live application (reader role, row security) and the API over it."""

    h: Harness
    app: Instance
    admin: httpx.AsyncClient
    acme: httpx.AsyncClient
    tokens: Tokens

    async def caught_up(self) -> int:
        """Wait until the projector and the conflicts worker are done; the stream's last sequence."""

        async def check() -> bool:
            last = await stream_last_seq(self.h.js, self.h.topology.event_stream)
            drained = await consumer_drained(
                self.h.js, self.h.topology.event_stream, self.h.topology.durable("conflicts")
            )
            async with self.h.pool.acquire() as conn:
                position = await ReadModelProjection().position(conn)
            return position == last and drained

        for _ in range(2):
            await assert_eventually(check)
        return await stream_last_seq(self.h.js, self.h.topology.event_stream)

    async def publish(self, *events: Event) -> int:
        await EventPublisher(self.h.nc, self.h.topology).publish(list(events))
        return await self.caught_up()


@pytest.fixture
async def world(harness: Harness, role_urls: dict[DbRole, str]) -> AsyncIterator[World]:
    harness.settings = replace(
        harness.settings,
        embedder="none",
        database_url_projector=role_urls["projector"],
        database_url_reader=role_urls["reader"],
    )
    await harness.start(build_projector)
    await harness.start(build_conflicts)
    await harness.start(build_service)
    pool = await RecallStore.create_pool(
        role_urls["reader"], harness.settings.db_schema, min_size=1, max_size=4
    )
    harness.stack.push_async_callback(pool.close)
    app = Instance(harness.settings, pool, harness.nc, await RecallStore.open(pool))
    harness.stack.push_async_callback(app.close_views)
    tokens = Tokens(
        [TokenEntry(name="alice", token=ADMIN), TokenEntry(name="acme-ops", workspace="acme", token=ACME)]
    )
    transport = httpx.ASGITransport(app=create_app(Api(app, tokens)))
    async with (
        httpx.AsyncClient(transport=transport, base_url="http://n", headers=_bearer(ADMIN)) as admin,
        httpx.AsyncClient(transport=transport, base_url="http://n", headers=_bearer(ACME)) as acme,
    ):
        yield World(harness, app, admin, acme, tokens)


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass
class Oracle:
    """``replay --until-seq N --keep``'s schema, read live-style at the point's time."""

    seq: int
    time: datetime
    schema: str
    app: Instance
    api: httpx.AsyncClient


@pytest.fixture
async def oracles(world: World) -> AsyncIterator[dict[int, Oracle]]:
    kept: dict[int, Oracle] = {}
    yield kept
    for oracle in kept.values():
        await oracle.api.aclose()
        await oracle.app.pool.close()
        await drop_schema(world.h.settings.database_url, oracle.schema)


async def _oracle(world: World, seq: int, kept: dict[int, Oracle]) -> Oracle:
    h = world.h
    report = await verify_replay(h.settings, h.nc, until=seq, keep=True)
    assert report["last_seq"] == seq
    time = (await h.js.get_msg(h.topology.event_stream, seq=seq)).time
    assert time is not None
    pool = await RecallStore.create_pool(
        h.settings.database_url, report["schema"], workspace="*", min_size=1, max_size=2
    )
    # Exact vector comparison on both sides: like with like (a kept replay has its HNSW index).
    app = Instance(h.settings, pool, h.nc, await RecallStore.open(pool, exact=True), clock=lambda: time)
    transport = httpx.ASGITransport(app=create_app(Api(app, world.tokens)))
    api = httpx.AsyncClient(transport=transport, base_url="http://n", headers=_bearer(ADMIN))
    kept[seq] = Oracle(seq, time, report["schema"], app, api)
    return kept[seq]


async def _ctl(world: World, *args: str) -> Ran:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA_")}
    env |= {**world.h.settings.to_env(), "NOEMA_EMBEDDER": "none", "USER": "carol"}
    proc = await asyncio.create_subprocess_exec(
        *NOEMACTL, *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return Ran(proc.returncode, out.decode(), err.decode())


async def _ctl_json(world: World, *args: str) -> Any:
    ran = await _ctl(world, *args, "--json")
    assert ran.code == 0, ran.stderr
    return json.loads(ran.stdout)


def _as_json(data: Any) -> Any:
    """``data`` as ``noemactl --json`` prints it."""
    return json.loads(
        json.dumps(data, default=lambda o: o.isoformat() if isinstance(o, datetime) else str(o))
    )


def _without_timings(found: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in found.items() if k != "timings_ms"}


async def _scenario(world: World) -> tuple[list[int], dict[str, str]]:
    """Run the scenario; the sequence after each step, and the memory ids by name."""
    now = datetime.now(UTC)
    key = memory("the deploy key rotates on Fridays", domain="ops")
    vault = memory("the vault root key rotates monthly", domain="security")
    nightly = memory("the deploy pipeline key rotates nightly", domain="ops")
    globex = memory("the globex deploy key rotates hourly", workspace="globex")
    ids = {n: m.payload.memory_id for n, m in (("key", key), ("vault", vault), ("nightly", nightly))}
    ids["globex"] = globex.payload.memory_id
    points = [await world.publish(key, vault, nightly, globex)]
    recall = MemoryRetrievedPayload(
        memory_id=ids["key"], query="who rotates the deploy key?", score=0.9, boost=0.4,
        half_life_days=14.0, activation_floor=1e-6,
    )  # fmt: skip
    points.append(await world.publish(MemoryRetrieved(**_envelope(now), payload=recall)))
    tick = ActivationDecayedPayload(tick_at=now + timedelta(seconds=1), half_life_days=0.001)
    points.append(await world.publish(ActivationDecayed(**_envelope(now), payload=tick)))
    knowledge = world.app.knowledge
    await knowledge.propose_fact(OPERATOR, "ops", "deploy-day", "Deploys happen on Fridays")
    await world.caught_up()
    await knowledge.propose_fact(OPERATOR, "ops", "deploy-day", "Deploys happen on Tuesdays")
    await knowledge.propose_fact(OPERATOR, "security", "vault", "The vault root key rotates monthly")
    await knowledge.propose_policy(OPERATOR, "ops", "Never deploy without a rollback plan")
    await knowledge.set_notes(OPERATOR, "intern", "halfway through the key rotation")
    points.append(await world.caught_up())
    await world.app.change_status("retract", ids["nightly"], actor="operator:root", reason="wrong")
    points.append(await world.caught_up())
    await knowledge.set_access_mode(OPERATOR, "strict")
    await knowledge.set_grant(OPERATOR, "intern", "ops", "read")
    points.append(await world.caught_up())
    return points, ids


def _envelope(now: datetime) -> dict[str, Any]:
    from noema.ids import new_id

    event_id = new_id()
    return {
        "id": event_id, "workspace": "acme", "mind": "ops", "occurred_at": now,
        "correlation_id": event_id, "actor": "test",
    }  # fmt: skip


def _api_reads(ids: dict[str, str]) -> list[tuple[str, dict[str, str]]]:
    acme = {"workspace": "acme"}
    return [
        ("/v1/memories/search", {"q": QUERY, "workspace": "acme", "explain": "true"}),
        (f"/v1/memories/{ids['key']}", {}),
        (f"/v1/memories/{ids['nightly']}", {}),
        ("/v1/memories", acme),
        ("/v1/timeline", acme),
        ("/v1/facts", {**acme, "include_inactive": "true"}),
        ("/v1/facts", acme),
        ("/v1/policies", {**acme, "include_inactive": "true"}),
        ("/v1/conflicts", acme),
        ("/v1/grants", acme),
        ("/v1/domains", acme),
        ("/v1/working-memory", {**acme, "mind": "ops"}),
        ("/v1/notes", {**acme, "agent": "intern"}),
    ]


# The suite's largest scenario: at each point a replay (the oracle) and every surface, noemactl through a
# process per read; 24-136 s on an idle 2-core machine beside the other lanes, 281 s at load 11 (CI
# run ci10): the default 300 s hang guard is too close.
@pytest.mark.timeout(900)
async def test_as_of_reads_on_every_surface_equal_the_replayed_oracle(
    world: World, oracles: dict[int, Oracle], tmp_path: Path
) -> None:
    with workspace_scope(ALL_WORKSPACES):  # the operator's writes read what they change
        points, ids = await _scenario(world)
    assert len(set(points)) == len(points), points
    live = (await world.admin.get("/v1/memories/search", params={"q": QUERY, "workspace": "acme"})).json()

    seen: dict[int, list[str]] = {}
    async with (
        client(world.h, agent="intern", role="intern") as sdk,
        over_stdio(world.h, tmp_path / "mcp.log") as mcp,
    ):
        for seq in points:
            oracle = await _oracle(world, seq, oracles)
            at = {"seq": seq, "time": oracle.time.isoformat()}

            # The HTTP API: every read of memory and knowledge.
            for path, params in _api_reads(ids):
                asked = await world.admin.get(path, params={**params, "as_of": str(seq)})
                expected = await oracle.api.get(path, params=params)
                assert asked.status_code == expected.status_code == 200, (path, asked.text, expected.text)
                assert asked.json() == expected.json(), (seq, path)
                assert asked.headers["Noema-As-Of-Seq"] == str(seq)
                assert datetime.fromisoformat(asked.headers["Noema-As-Of-Time"]) == oracle.time

            # noemactl: search, show, list, facts, preamble.
            options = SearchOptions(limit=10)
            found = dataclasses.asdict(await oracle.app.search(None, QUERY, options, "acme"))
            cli = await _ctl_json(world, "memory", "search", QUERY, "-w", "acme", "--as-of", str(seq))
            assert cli.pop("as_of") == at
            assert _without_timings(cli) == _as_json(_without_timings(found))
            seen[seq] = [r["id"] for r in cli["results"]]
            shown = await _ctl_json(world, "memory", "show", ids["key"], "--as-of", str(seq))
            assert shown.pop("as_of") == at
            assert shown == json.loads(json.dumps(msgspec.to_builtins(await oracle.app.memory(ids["key"]))))
            listed = await _ctl_json(world, "memory", "list", "-w", "acme", "--as-of", str(seq))
            assert listed.pop("as_of") == at
            assert listed == (await oracle.api.get("/v1/memories", params={"workspace": "acme"})).json()
            facts = await _ctl_json(world, "fact", "list", "-w", "acme", "--all", "--as-of", str(seq))
            expected_facts = await oracle.app.knowledge.list_facts(OPERATOR, include_inactive=True)
            assert facts == {"as_of": at, "items": _as_json(expected_facts)}
            preamble = await _ctl_json(
                world, "preamble", TASK, "-w", "acme", "-a", "intern", "-r", "intern", "--as-of", str(seq)
            )
            assert preamble.pop("as_of") == at
            assert preamble == dataclasses.asdict(await oracle.app.preamble(INTERN, TASK))

            # The agent tools, over NATS (the SDK) as the intern and over MCP as alice.
            search = {"query": QUERY, "explain": True}
            expected = await call_tool(oracle.app, INTERN, "search_memory", search)
            got = await sdk.search_memory(QUERY, explain=True, as_of=seq)
            assert got.as_of is not None
            assert (got.as_of.seq, got.as_of.time) == (seq, oracle.time)
            assert [(h.id, h.score, h.components) for h in got.results] == [
                (r["id"], r["score"], r["components"]) for r in expected["results"]
            ], seq
            expected = await call_tool(oracle.app, INTERN, "get_preamble", {"task": TASK})
            given = await sdk.get_preamble(TASK, as_of=seq)
            assert (given.text, given.policies, given.notes, given.facts) == (
                expected["text"], expected["policies"], expected["notes"], expected["facts"],
            )  # fmt: skip
            why = {"id": ids["key"]}
            for tool, args in (("search_memory", search), ("get_preamble", {"task": TASK})):
                over_mcp = ok(await mcp.call_tool(tool, {**args, "as_of": seq}))
                assert over_mcp.pop("as_of") == at
                assert over_mcp == json.loads(json.dumps(await call_tool(oracle.app, ALICE, tool, args))), seq
            # why, as of the point: what the replay answers, or the same refusal (strict mode hides
            # the ops domain from alice's role at the last points).
            over_mcp_why = await mcp.call_tool("why", {**why, "as_of": seq})
            try:
                expected = json.loads(json.dumps(await call_tool(oracle.app, ALICE, "why", why)))
            except NotFoundError:
                assert error(over_mcp_why).startswith("not_found:"), seq
            else:
                answered = ok(over_mcp_why)
                assert answered.pop("as_of") == at
                assert answered == expected, seq
            # The preamble resource, as of the point (it refused as_of before).
            [contents] = (await mcp.read_resource(f"{preamble_uri(TASK)}?as_of={seq}")).contents
            expected = await call_tool(oracle.app, ALICE, "get_preamble", {"task": TASK})
            assert getattr(contents, "text", None) == expected["text"], seq
            explained = await sdk.why(ids["key"], as_of=seq)
            assert explained.as_of is not None
            assert explained.as_of.seq == seq
            expected = await call_tool(oracle.app, INTERN, "why", why)
            assert [s.id for s in explained.steps] == [s["id"] for s in expected["steps"]], seq

    # The points differ where the scenario changed something (so the answers are not the present's).
    first, retracted = points[0], points[4]
    assert ids["nightly"] in seen[first]
    assert ids["nightly"] not in seen[retracted]
    assert [r["id"] for r in live["results"]] == seen[points[-1]]


def _unerased(data: Any) -> Any:
    """``data`` without the erasure's mark (status, when, by which erasure): as of a point before an
    erasure the history shows the memory as erased (every version blanked and marked), where a
    replay to that point has only the blank content (its key is gone) and no erasure yet."""
    if isinstance(data, dict):
        return {k: _unerased(v) for k, v in data.items() if k not in ("erased_at", "erasure_id", "status")}
    if isinstance(data, list):
        return [_unerased(v) for v in data]
    return data


@pytest.mark.timeout(900)  # a replay per sequence: 141 s idle, 187 s at load 11 (as above)
async def test_every_sequence_reads_as_the_replayed_oracle_through_an_erasure_and_a_projection_switch(
    world: World, oracles: dict[int, Oracle]
) -> None:
    """Observe, recall, a decay tick, fact supersession, policies, notes, a retraction, strict mode
    with a grant, an erasure and a projection switch: at every sequence of the stream, every read
    of memory, knowledge and audit answers what the replay to that sequence answers."""
    with workspace_scope(ALL_WORKSPACES):
        _, ids = await _scenario(world)
        secret = await world.app.knowledge.propose_fact(
            OPERATOR, "security", "pager", "The pager passphrase is zqxmarker4711"
        )
        await world.caught_up()
        request = ErasureRequest("acme", "memory", secret.memory_id, "asked to forget", "operator:root")
        erasure = (await world.app.erase(request)).seq
        await world.caught_up()
        built = await projections.rebuild(world.h.settings, world.h.nc)
        await projections.switch(world.h.settings, world.h.nc, built["version"])
        await world.app.knowledge.set_notes(OPERATOR, "intern", "after the switch")
        await world.app.knowledge.propose_fact(OPERATOR, "ops", "deploy-day", "Deploys happen on Mondays")
        last = await world.caught_up()

    reads = [
        *_api_reads(ids),
        (f"/v1/memories/{secret.memory_id}", {}),
        ("/v1/audit", {"workspace": "acme"}),
        (f"/v1/why/{ids['key']}", {"workspace": "acme"}),
    ]
    # Reads that select by status (active only) or rank what they select: before the erasure the
    # history leaves the erased memory out of them (it reads erased), the replay does not.
    by_status = {"/v1/memories/search", "/v1/memories", "/v1/timeline"}
    for seq in range(1, last + 1):
        oracle = await _oracle(world, seq, oracles)
        for path, params in reads:
            if seq < erasure and (
                path in by_status or (path == "/v1/facts" and "include_inactive" not in params)
            ):
                continue
            asked = await world.admin.get(path, params={**params, "as_of": str(seq)})
            expected = await oracle.api.get(path, params=params)
            assert asked.status_code == expected.status_code, (seq, path, asked.text, expected.text)
            if seq < erasure:
                assert _unerased(asked.json()) == _unerased(expected.json()), (seq, path)
            else:
                assert asked.json() == expected.json(), (seq, path)
        if seq == erasure - 1:  # before the erasure: shown as erased, never with its content
            shown = (
                await world.admin.get(f"/v1/memories/{secret.memory_id}", params={"as_of": str(seq)})
            ).json()
            assert shown["memory"]["erased_at"] is not None
            assert shown["memory"]["status"] == "erased"
            assert "zqxmarker4711" not in json.dumps(shown)
        await oracle.api.aclose()
        await oracle.app.pool.close()
        await drop_schema(world.h.settings.database_url, oracles.pop(seq).schema)


async def test_a_point_with_no_state_is_not_found_and_one_that_is_no_point_invalid_everywhere(
    world: World, tmp_path: Path
) -> None:
    last = await world.publish(memory("the deploy key rotates on Fridays"))
    beyond, zoneless, future = str(last + 5), "2026-03-02T10:32:00", "2999-01-01T00:00:00Z"

    # No state at the point (beyond the end, in the future): 404 / exit 4, as an id naming nothing.
    for point, says in ((beyond, f"ends at seq {last}"), (future, "in the future")):
        answer = await world.admin.get("/v1/memories", params={"workspace": "acme", "as_of": point})
        assert answer.status_code == 404, answer.text
        assert says in answer.json()["error"]
        ran = await _ctl(world, "memory", "list", "-w", "acme", "--as-of", point)
        assert (ran.code, says in ran.stderr, "Traceback" in ran.stderr) == (4, True, False), ran
        ran = await _ctl(world, "replay", "--until", point, "--keep")  # builds nothing either
        assert (ran.code, says in ran.stderr, "Traceback" in ran.stderr) == (4, True, False), ran
    # Not a point at all: 422 / exit 2, saying what to write.
    for point, says in ((zoneless, "has no time zone"), ("yesterday", "is not a stream sequence")):
        answer = await world.admin.get("/v1/memories", params={"workspace": "acme", "as_of": point})
        assert answer.status_code == 422, answer.text
        assert says in answer.json()["error"]
        ran = await _ctl(world, "memory", "search", "deploy", "--as-of", point)
        assert (ran.code, says in ran.stderr, "Traceback" in ran.stderr) == (2, True, False), ran

    async with client(world.h) as sdk:
        with pytest.raises(NotFound, match=f"ends at seq {last}"):
            await sdk.search_memory("deploy", as_of=last + 5)
        with pytest.raises(InvalidRequest, match="has no time zone"):
            await sdk.get_preamble("x", as_of=zoneless)  # as a raw caller may
    async with over_stdio(world.h, tmp_path / "mcp.log") as mcp:
        refused = error(await mcp.call_tool("get_preamble", {"task": "x", "as_of": zoneless}))
        assert refused.startswith("invalid:")
        assert "has no time zone" in refused
        refused = error(await mcp.call_tool("search_memory", {"query": "x", "as_of": last + 5}))
        assert refused.startswith("not_found:")


async def test_a_workspace_token_sees_no_other_workspace_as_of(
    world: World,
) -> None:
    acme, globex = memory("the acme deploy key"), memory("the globex deploy key", workspace="globex")
    seq = await world.publish(acme, globex)

    answers = await asyncio.gather(
        *(world.acme.get("/v1/memories", params={"as_of": str(seq)}) for _ in range(3))
    )
    for answer in answers:
        assert answer.status_code == 200, answer.text
        assert [m["id"] for m in answer.json()["items"]] == [acme.payload.memory_id]
    found = await world.acme.get("/v1/memories/search", params={"q": "deploy key", "as_of": str(seq)})
    assert [r["id"] for r in found.json()["results"]] == [acme.payload.memory_id]
    other = await world.acme.get(f"/v1/memories/{globex.payload.memory_id}", params={"as_of": str(seq)})
    assert other.status_code == 403
    assert (
        await world.acme.get("/v1/facts", params={"workspace": "globex", "as_of": str(seq)})
    ).status_code == 403


async def test_a_point_before_the_history_begins_is_refused_saying_how_to_ask(world: World) -> None:
    first = await world.publish(memory("the deploy key rotates on Fridays"))
    last = await world.publish(memory("the deploy key rotates on Tuesdays"))
    # As a read model upgraded from a release that kept no history: it begins at the upgrade.
    owner = await asyncpg.connect(world.h.settings.database_url)
    try:
        await owner.execute(f"UPDATE {world.h.settings.db_schema}.history_start SET seq = $1", last)
    finally:
        await owner.close()
    refused = await world.admin.get("/v1/memories", params={"workspace": "acme", "as_of": str(first)})
    assert refused.status_code == 409, refused.text
    assert f"replay --until {first} --keep" in refused.json()["error"]
    assert "projection rebuild" in refused.json()["error"]
    answer = await world.admin.get("/v1/memories", params={"workspace": "acme", "as_of": str(last)})
    assert answer.status_code == 200, answer.text
    assert len(answer.json()["items"]) == 2


async def test_a_bounded_history_answers_from_its_start_and_still_matches_its_replay(
    world: World, oracles: dict[int, Oracle]
) -> None:
    first = await world.publish(memory("the deploy key rotates on Fridays"))
    created = memory("the vault key rotates monthly")
    second = await world.publish(created)
    with workspace_scope(ALL_WORKSPACES):
        await world.app.change_status("retract", created.payload.memory_id, actor="operator:root", reason="x")
        await world.caught_up()
        await world.app.change_status("restore", created.payload.memory_id, actor="operator:root", reason="y")
    last = await world.caught_up()
    # As NOEMA_HISTORY_DAYS bounds it: the versions no point from `second` on can see are dropped.
    owner = await asyncpg.connect(world.h.settings.database_url)
    try:
        await owner.execute(f"SET search_path = {world.h.settings.db_schema}, public")
        assert await history.prune(owner, second + 1) > 0  # the retracted version, replaced since
    finally:
        await owner.close()
    refused = await world.admin.get("/v1/memories", params={"workspace": "acme", "as_of": str(first)})
    assert refused.status_code == 409, refused.text
    assert "NOEMA_HISTORY_DAYS" in refused.json()["error"]
    for seq in range(second + 1, last + 1):
        oracle = await _oracle(world, seq, oracles)
        for path in ("/v1/memories", "/v1/timeline"):
            asked = await world.admin.get(path, params={"workspace": "acme", "as_of": str(seq)})
            expected = await oracle.api.get(path, params={"workspace": "acme"})
            assert asked.status_code == 200, asked.text
            assert asked.json() == expected.json(), (seq, path)
    report = await verify_replay(world.h.settings, world.h.nc)
    assert report["match"] is True, report["differences"]


async def test_a_server_reading_as_the_reader_role_answers_any_point_with_nothing_built_first(
    world: World, role_urls: dict[DbRole, str]
) -> None:
    first = await world.publish(memory("the deploy key rotates on Fridays"))
    second = await world.publish(memory("the vault key rotates monthly"))
    # As `up` runs the API: its only database URL is the read-only role's.
    reader = replace(world.h.settings, database_url=role_urls["reader"])
    pool = await RecallStore.create_pool(role_urls["reader"], reader.db_schema, min_size=1, max_size=2)
    world.h.stack.push_async_callback(pool.close)
    app = Instance(reader, pool, world.h.nc, await RecallStore.open(pool))
    world.h.stack.push_async_callback(app.close_views)
    transport = httpx.ASGITransport(app=create_app(Api(app, world.tokens)))
    async with httpx.AsyncClient(transport=transport, base_url="http://n", headers=_bearer(ADMIN)) as api:
        for seq, n in ((first, 1), (second, 2)):
            answer = await api.get("/v1/memories", params={"workspace": "acme", "as_of": str(seq)})
            assert answer.status_code == 200, answer.text
            assert answer.headers["Noema-As-Of-Seq"] == str(seq)
            assert len(answer.json()["items"]) == n
    gone = await _ctl(world, "asof", "list")
    assert gone.code == 2, gone  # the build machinery is gone: there is nothing to build or keep


class WordsEmbedder:
    """A deterministic 8-dimension embedder (hashed words, normalised) for the semantic voice."""

    name = "words8"
    dimensions = 8

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.embed_query(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        for word in text.lower().split():
            vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % self.dimensions] += 1.0
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        return [x / norm for x in vector]


def _with_embedder(app: Instance, embedder: WordsEmbedder) -> None:
    loaded = app._query_embedder
    loaded._embedder, loaded._loaded = embedder, True  # as loaded from NOEMA_EMBEDDER


async def test_as_of_search_compares_the_vectors_held_then_exactly(
    world: World, oracles: dict[int, Oracle]
) -> None:
    embedder = WordsEmbedder()
    _with_embedder(world.app, embedder)
    texts = [
        "the deploy key rotates on fridays",
        "rotate the signing key before a release",
        "the pager rotates on mondays",
        "billing runs its deploy on tuesdays",
    ]
    created = [memory(text) for text in texts]
    points = [await world.publish(*created)]

    def embedded(event: MemoryCreated) -> MemoryEmbedded:
        payload = MemoryEmbeddedPayload(
            memory_id=event.payload.memory_id,
            model=embedder.name,
            dimensions=embedder.dimensions,
            vector=embedder.embed_passages([event.payload.content])[0],
        )
        return MemoryEmbedded(**_envelope(datetime.now(UTC)), payload=payload)

    points.append(await world.publish(*(embedded(e) for e in created[:2])))  # half have vectors
    points.append(await world.publish(*(embedded(e) for e in created[2:])))  # all of them

    for seq in points:
        oracle = await _oracle(world, seq, oracles)
        _with_embedder(oracle.app, embedder)
        for mode in ("semantic", "hybrid"):
            params = {"q": "rotate the deploy key", "workspace": "acme", "mode": mode, "explain": "true"}
            asked = await world.admin.get("/v1/memories/search", params={**params, "as_of": str(seq)})
            expected = await oracle.api.get("/v1/memories/search", params=params)
            assert asked.status_code == expected.status_code == 200, asked.text
            assert asked.json() == expected.json(), (seq, mode)
            assert asked.json()["results"], (seq, mode)
    # The vectors held then: none at first, all at the end.
    first = await world.admin.get(
        "/v1/memories/search",
        params={"q": "rotate the deploy key", "workspace": "acme", "mode": "semantic", "explain": "true",
                "as_of": str(points[0])},
    )  # fmt: skip
    last = await world.admin.get(
        "/v1/memories/search",
        params={"q": "rotate the deploy key", "workspace": "acme", "mode": "semantic", "explain": "true",
                "as_of": str(points[-1])},
    )  # fmt: skip
    assert {r["components"].get("semantic_available") for r in first.json()["results"]} <= {None, 0.0}
    assert {r["components"].get("semantic_available") for r in last.json()["results"]} == {1.0}
    # A workspace's token reads the vectors through row security's visibility function, which must
    # look in the as-of schema under its final name (it was created in the build's).
    scoped = await world.acme.get(
        "/v1/memories/search",
        params={"q": "rotate the deploy key", "mode": "hybrid", "as_of": str(points[-1])},
    )
    assert scoped.status_code == 200, scoped.text
    assert {r["id"] for r in scoped.json()["results"]} == {e.payload.memory_id for e in created}
    shown = await world.acme.get(
        f"/v1/memories/{created[0].payload.memory_id}", params={"as_of": str(points[-1])}
    )
    assert shown.status_code == 200, shown.text
