"""The agent service end to end: the SDK against the NATS micro service on real NATS + PostgreSQL,
with the projector and conflicts workers running, checking results and the events produced (sealed
notes, rows read under row-level security), and the micro protocol: PING, INFO, STATS and its error
counts, the queue group, JetStream's deduplication, timeouts, shutdown and an absent service. The
operations' refusals, error mapping and replies under the bus contract run over the in-memory
composition in tests/unit/test_service_in_memory.py (the round trip as well, less the sealing)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest

from noema.adapters.jetstream import stream_last_seq
from noema.adapters.postgres.roles import DbRole
from noema.application.access import Caller
from noema.application.tools import TOOLS
from noema.composition.instance import Instance
from noema_conflicts.service import build as build_conflicts
from noema_events import ObservationRecorded, decode_event
from noema_projector.service import build as build_projector
from noema_sdk import (
    InvalidRequest,
    NoemaClient,
    RequestTimeout,
    SearchResult,
    ServiceUnavailable,
)
from noema_sdk.protocol import ERROR_CODE_HEADER, agent_subject
from noema_service import operations
from noema_service.service import AgentService
from noema_service.service import build as build_service
from tests.conftest import Harness
from tests.integration.test_knowledge import settled

pytestmark = pytest.mark.integration

OPERATOR = Caller("acme", "root", operator=True)
ENDPOINTS = {*TOOLS, "observe"}


def client(harness: Harness, agent: str = "alice", role: str = "engineer", **kw: Any) -> Any:
    assert harness.settings.nats_url
    return NoemaClient.connect(
        harness.settings.nats_url,
        workspace="acme",
        agent=agent,
        role=role,
        prefix=harness.topology.prefix,
        **kw,
    )


@pytest.fixture
async def pipeline(harness: Harness, role_urls: dict[DbRole, str]) -> AgentService:
    """The service plus the workers that turn its events into the read model (stopped by harness),
    each signed in as its database role, as `up` runs them: the service reads under row-level
    security, scoped per request to the caller's workspace."""
    harness.settings = replace(
        harness.settings,
        database_url_projector=role_urls["projector"],
        database_url_reader=role_urls["reader"],
    )
    await harness.start(build_projector)
    await harness.start(build_conflicts)
    service: AgentService = await harness.start(build_service)
    return service


async def events(harness: Harness, type_: str) -> list[dict[str, Any]]:
    rows = await harness.pool.fetch(
        "SELECT actor, mind, payload FROM events WHERE workspace = 'acme' AND type = $1 ORDER BY seq", type_
    )
    return [{"actor": r["actor"], "mind": r["mind"], **json.loads(r["payload"])} for r in rows]


async def observations(harness: Harness, agent: str) -> list[ObservationRecorded]:
    """Every observation stored for ``agent`` (read back from the stream, oldest first)."""
    subject = harness.topology.observation_subject("acme", agent)
    sub = await harness.js.subscribe(subject, ordered_consumer=True)
    info = await harness.js.stream_info(harness.topology.observation_stream, subjects_filter=subject)
    count = (info.state.subjects or {}).get(subject, 0)
    out = []
    for _ in range(count):
        event = decode_event((await sub.next_msg(timeout=5)).data)
        assert isinstance(event, ObservationRecorded)
        out.append(event)
    await sub.unsubscribe()
    return out


async def test_every_agent_operation_round_trips_through_the_sdk_with_its_events(
    harness: Harness, pipeline: AgentService
) -> None:
    async with client(harness) as alice, client(harness, agent="bob") as bob:
        friday = await alice.propose_fact("ops", "deploy-day", "Deploys happen on Fridays")
        assert (friday.outcome, friday.domain, friday.topic) == ("proposed", "ops", "deploy-day")
        await settled(harness)
        tuesday = await bob.propose_fact("ops", "deploy-day", "Deploys happen on Tuesdays", veracity="stated")
        await settled(harness)
        proposed = await events(harness, "fact.proposed.v2")
        assert [(e["actor"], e["memory_id"]) for e in proposed] == [
            ("alice", friday.memory_id),
            ("bob", tuesday.memory_id),
        ]

        [conflict] = await alice.list_memory_conflicts(domain="ops")
        assert (conflict.rule, conflict.winner_id, conflict.loser_id) == (
            "recency",
            tuesday.memory_id,
            friday.memory_id,
        )
        assert (conflict.winner_agent, conflict.loser_content) == ("bob", "Deploys happen on Fridays")

        wednesday = await alice.supersede_fact(
            tuesday.memory_id, "Deploys happen on Wednesdays", reason="moved"
        )
        await settled(harness)
        assert wednesday.outcome == "proposed"
        last = (await events(harness, "fact.proposed.v2"))[-1]
        assert (last["actor"], last["memory_id"], last["supersedes"]) == (
            "alice",
            wednesday.memory_id,
            tuesday.memory_id,
        )

        rollback = await alice.propose_policy("ops", "Never deploy without a rollback plan")
        dropped = await alice.propose_policy("ops", "Deploy only from the main branch")
        await settled(harness)
        change = await alice.supersede_policy(dropped.policy_id, reason="trunk-based now")
        assert (change.policy_id, change.superseded, change.deactivated) == (None, dropped.policy_id, True)
        await settled(harness)
        assert [(e["actor"], e["policy_id"]) for e in await events(harness, "policy.proposed.v1")] == [
            ("alice", rollback.policy_id),
            ("alice", dropped.policy_id),
        ]
        [superseded] = await events(harness, "policy.superseded.v1")
        assert (superseded["actor"], superseded["policy_id"]) == ("alice", dropped.policy_id)

        notes = await alice.update_my_notes("check the rollback plan first")
        assert (notes.agent, notes.characters) == ("alice", len("check the rollback plan first"))
        noted = await alice.record_observation("the pager went off at 3am")
        await settled(harness)
        latest_notes = (await events(harness, "notes.updated.v1"))[-1]
        assert latest_notes["actor"] == "alice"
        assert latest_notes["notes"].startswith("nsl1:")  # sealed in the event (docs/privacy.md)
        held = await harness.pool.fetchval("SELECT notes FROM agent_notes WHERE agent = 'alice'")
        assert held == f"check the rollback plan first\n{noted.line}"
        assert (noted.agent, noted.line.endswith(" the pager went off at 3am")) == ("alice", True)
        assert await observations(harness, "alice") == [], "notes are private: nothing is observed"

        preamble = await alice.get_preamble("deploy the release on wednesday")
        assert preamble.policies == ["- [ops] Never deploy without a rollback plan"]
        assert "check the rollback plan first" in (preamble.notes or "")
        assert "Deploys happen on Wednesdays" in preamble.text

        found = await bob.search_memory("deploys wednesdays", mode="keyword", explain=True)
        assert isinstance(found, SearchResult)
        assert found.results[0].id == wednesday.memory_id
        assert found.results[0].components, "explain=True carries the score components"
        assert found.weights is not None, "explain=True carries the fusion weights"
        plain = await bob.search_memory("deploys wednesdays", mode="keyword", limit=1)
        assert [(h.id, h.components) for h in plain.results] == [(wednesday.memory_id, None)]
        assert plain.weights is None

        kept = await alice.remember("s1", "The staging database is rebuilt every Sunday", importance=0.9)
        idle = await alice.remember("s1", "I looked at the dashboard")
        assert kept.outcome == "remembered"
        await settled(harness)
        report = await alice.consolidate_memory(stale_after_hours=0)
        assert [p.hot_id for p in report.promoted] == [kept.memory_id]
        assert report.archived == [idle.memory_id]
        await settled(harness)

        await alice.propose_fact("infra", "ci", "CI runs on the self-hosted runners", veracity="inferred")
        await bob.propose_fact("infra", "build", "ci runs on self-hosted runners", veracity="inferred")
        await settled(harness)
        harmony = await bob.harmonize_memory(domain="infra")
        assert [sorted(c.agents) for c in harmony.corroborated] == [["alice", "bob"]]
        assert harmony.conflicts == []


async def test_bad_input_is_rejected_with_422_and_a_message_naming_the_field(
    harness: Harness, pipeline: AgentService
) -> None:
    async with client(harness) as alice:
        with pytest.raises(
            InvalidRequest, match=r"^search_memory: limit must be at least 1 \(got 0\)$"
        ) as bad:
            await alice.search_memory("deploys", limit=0)
        assert bad.value.code == 422
        with pytest.raises(InvalidRequest, match=r"channel"):
            await alice.observe("the build is red", channel="carrier-pigeon")
    # Unknown fields are rejected, not ignored; an identity that is not a valid name too.
    subject = agent_subject(harness.topology.prefix, "acme", "engineer", "alice", "update_my_notes")
    reply = await harness.nc.request(subject, b'{"notes": "x", "agent": "bob"}', timeout=10)
    assert reply.headers is not None
    assert reply.headers[ERROR_CODE_HEADER] == "422"
    assert "unknown field" in json.loads(reply.data)["error"]["message"].lower()
    long_name = "a" * 65
    reply = await harness.nc.request(
        f"{harness.topology.prefix}.agent.acme.engineer.{long_name}.update_my_notes",
        b'{"notes": "x"}',
        timeout=10,
    )
    assert reply.headers is not None
    assert reply.headers[ERROR_CODE_HEADER] == "422"
    assert await stream_last_seq(harness.js, harness.topology.event_stream) == 0
    stats = json.loads((await harness.nc.request("$SRV.STATS.noema", b"", timeout=5)).data)
    by_name = {e["name"]: e for e in stats["endpoints"]}
    assert by_name["search_memory"]["data"]["errors_by_code"] == {"422": 1}
    assert by_name["update_my_notes"]["data"]["errors"] == 2
    assert by_name["update_my_notes"]["num_requests"] == 2
    # The micro protocol's own counters count error replies too (`nats micro stats` shows them).
    assert by_name["search_memory"]["num_errors"] == 1
    assert by_name["search_memory"]["last_error"] == "422:search_memory: limit must be at least 1 (got 0)"
    assert by_name["update_my_notes"]["num_errors"] == 2


async def test_an_observation_published_twice_with_one_id_is_stored_once(
    harness: Harness, pipeline: AgentService
) -> None:
    async with client(harness) as alice:
        first = await alice.publish_observation(
            "the build is red", observation_id="build-4711", channel="tool"
        )
        again = await alice.publish_observation(
            "the build is red", observation_id="build-4711", channel="tool"
        )
        assert (first.observation_id, first.seq) == (again.observation_id, again.seq)
        assert (first.duplicate, again.duplicate) == (False, True)
        assert first.observation_id == "build-4711"
        via_service = await alice.observe("the deploy is green", observation_id="deploy-42", importance=0.8)
        retried = await alice.observe("the deploy is green", observation_id="deploy-42", importance=0.8)
        assert (via_service.observation_id, via_service.seq) == (retried.observation_id, retried.seq)
        assert (via_service.duplicate, retried.duplicate) == (False, True)  # the service's reply says so
        assert via_service.seq > first.seq
        fresh = await alice.publish_observation("a thing without an id")
        assert fresh.observation_id
        assert fresh.seq > via_service.seq
    stored = await observations(harness, "alice")
    assert [o.id for o in stored] == ["build-4711", "deploy-42", fresh.observation_id]
    assert {(o.workspace, o.mind, o.actor) for o in stored} == {("acme", "alice", "alice")}
    assert (stored[0].payload.channel, stored[1].payload.importance) == ("tool", 0.8)


async def test_the_service_answers_micro_ping_info_and_stats(
    harness: Harness, pipeline: AgentService
) -> None:
    ping = json.loads((await harness.nc.request("$SRV.PING.noema", b"", timeout=5)).data)
    assert (ping["type"], ping["name"], ping["id"]) == (
        "io.nats.micro.v1.ping_response",
        "noema",
        pipeline.micro.id,
    )
    info = json.loads((await harness.nc.request(f"$SRV.INFO.noema.{pipeline.micro.id}", b"", timeout=5)).data)
    assert info["metadata"] == {"prefix": harness.topology.prefix}
    assert {e["name"] for e in info["endpoints"]} == ENDPOINTS
    prefix = harness.topology.prefix
    assert {e["subject"] for e in info["endpoints"]} == {f"{prefix}.agent.*.*.*.{name}" for name in ENDPOINTS}
    assert {e["queue_group"] for e in info["endpoints"]} == {"noema"}
    search = next(e for e in info["endpoints"] if e["name"] == "search_memory")
    assert "query" in json.loads(search["metadata"]["input_schema"])["properties"]
    async with client(harness) as alice:
        await alice.update_my_notes("hello")
    stats = json.loads((await harness.nc.request("$SRV.STATS.noema", b"", timeout=5)).data)
    counts = {e["name"]: (e["num_requests"], e["data"]["errors"]) for e in stats["endpoints"]}
    assert counts["update_my_notes"] == (1, 0)
    assert counts["search_memory"] == (0, 0)


async def test_instances_share_requests_through_the_queue_group(
    harness: Harness, pipeline: AgentService
) -> None:
    second: AgentService = await harness.start(build_service)
    # At most four at once: within alice's concurrency limit on either instance (NOEMA_CONCURRENCY_LIMIT).
    at_once = asyncio.Semaphore(4)

    async def note(i: int) -> Any:
        async with at_once:
            return await alice.update_my_notes(f"note {i}")

    async with client(harness) as alice:
        replies = await asyncio.gather(*(note(i) for i in range(24)))
    assert len(replies) == 24

    async def handled(service: AgentService) -> int:
        raw = await harness.nc.request(f"$SRV.STATS.noema.{service.micro.id}", b"", timeout=5)
        [notes] = [e for e in json.loads(raw.data)["endpoints"] if e["name"] == "update_my_notes"]
        return int(notes["num_requests"])

    one, two = await handled(pipeline), await handled(second)
    assert one + two == 24, "each request is handled by exactly one instance"
    assert one > 0, "both instances took a share"
    assert two > 0, "both instances took a share"


async def test_a_request_nobody_answers_raises_request_timeout(harness: Harness) -> None:
    silent = await harness.nc.subscribe(f"{harness.topology.prefix}.agent.acme.engineer.alice.>")
    async with client(harness) as alice:
        with pytest.raises(RequestTimeout, match=r"update_my_notes: no reply within 0.2s"):
            await alice.update_my_notes("hello", timeout=0.2)
    assert (await silent.next_msg(timeout=1)).data == b'{"notes":"hello"}'


async def test_a_slow_operation_times_out_and_a_stopping_service_still_answers_it(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(app: Instance, who: Caller, raw: bytes) -> Any:
        started.set()
        await release.wait()
        return {"text": f"for {who.agent}", "policies": [], "notes": None, "facts": []}

    op = operations.OPERATIONS["get_preamble"]
    monkeypatch.setitem(operations.OPERATIONS, "get_preamble", replace(op, run=slow))
    service: AgentService = await harness.start(build_service)
    async with client(harness) as alice:
        with pytest.raises(RequestTimeout):
            await alice.get_preamble("anything", timeout=0.05)
        release.set()
        started.clear()
        release.clear()
        pending = asyncio.create_task(alice.get_preamble("anything", timeout=30))
        await asyncio.wait_for(started.wait(), 10)
        service.shutdown()
        release.set()
        assert (await pending).text == "for alice", "a request in progress is answered during shutdown"
        await _stopped(service)
        with pytest.raises(ServiceUnavailable):
            await alice.get_preamble("anything", timeout=30)


async def _stopped(service: AgentService) -> None:
    [task] = [t for t in asyncio.all_tasks() if t.get_name() == service.name]
    await asyncio.wait_for(task, 10)


async def test_without_a_service_the_sdk_raises_service_unavailable_instead_of_hanging(
    harness: Harness,
) -> None:
    async with client(harness, timeout=120) as alice:
        calls: list[Callable[[], Awaitable[Any]]] = [
            lambda: alice.search_memory("anything"),
            lambda: alice.update_my_notes("x"),
        ]
        for call in calls:
            with pytest.raises(ServiceUnavailable, match=r"no Noema service answers on .*prefix") as down:
                await asyncio.wait_for(call(), 10)  # far below the client's 120 s timeout
            assert down.value.code == 503
    with pytest.raises(ServiceUnavailable, match=r"cannot connect to NATS at nats://127.0.0.1:1"):
        async with NoemaClient.connect("nats://127.0.0.1:1", workspace="acme", agent="a", connect_timeout=1):
            pass


async def test_publishing_an_observation_without_the_streams_is_a_clear_error(harness: Harness) -> None:
    assert harness.settings.nats_url
    async with NoemaClient.connect(
        harness.settings.nats_url, workspace="acme", agent="a", prefix="nowhere"
    ) as c:
        with pytest.raises(ServiceUnavailable, match=r"no stream stores nowhere.obs.acme.a"):
            await c.publish_observation("hello")
