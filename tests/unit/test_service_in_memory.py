"""The agent service's operations over the in-memory composition (tests/unit/service_in_memory.py):
the SDK's client against the service's dispatcher in process, the pipeline's workers deciding what
the operations store. Moved from tests/integration/test_service.py with their assertions kept (the
servers' reads replaced by the in-memory stream's and read model's); the micro protocol, JetStream
publishing, timeouts and shutdown stay there, against real NATS, and so does the round trip, which
also checks there that notes are sealed in their event (the in-memory stream seals nothing): its copy
here has every other assertion."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import jsonschema
import msgspec
import pytest
import referencing
import referencing.jsonschema

from noema.application.access import Caller
from noema.application.tools import TOOLS
from noema.composition.instance import Instance
from noema_sdk import PermissionDenied, SearchResult, ServerError
from noema_sdk.protocol import ERROR_CODE_HEADER, ERROR_HEADER, agent_subject
from noema_service import operations
from noema_service.documents import SCHEMAS_DIR
from noema_service.handler import classify
from tests.unit.service_in_memory import PREFIX, InMemoryService, service

__all__ = ["service"]  # the fixture, imported for pytest

OPERATOR = Caller("acme", "root", operator=True)
ENDPOINTS = {*TOOLS, "observe"}


async def test_every_agent_operation_round_trips_through_the_sdk_with_its_events(
    service: InMemoryService,
) -> None:
    async with service.client() as alice, service.client(agent="bob") as bob:
        friday = await alice.propose_fact("ops", "deploy-day", "Deploys happen on Fridays")
        assert (friday.outcome, friday.domain, friday.topic) == ("proposed", "ops", "deploy-day")
        await service.settled()
        tuesday = await bob.propose_fact("ops", "deploy-day", "Deploys happen on Tuesdays", veracity="stated")
        await service.settled()
        proposed = service.events("fact.proposed.v2")
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
        await service.settled()
        assert wednesday.outcome == "proposed"
        last = service.events("fact.proposed.v2")[-1]
        assert (last["actor"], last["memory_id"], last["supersedes"]) == (
            "alice",
            wednesday.memory_id,
            tuesday.memory_id,
        )

        rollback = await alice.propose_policy("ops", "Never deploy without a rollback plan")
        dropped = await alice.propose_policy("ops", "Deploy only from the main branch")
        await service.settled()
        change = await alice.supersede_policy(dropped.policy_id, reason="trunk-based now")
        assert (change.policy_id, change.superseded, change.deactivated) == (None, dropped.policy_id, True)
        await service.settled()
        assert [(e["actor"], e["policy_id"]) for e in service.events("policy.proposed.v1")] == [
            ("alice", rollback.policy_id),
            ("alice", dropped.policy_id),
        ]
        [superseded] = service.events("policy.superseded.v1")
        assert (superseded["actor"], superseded["policy_id"]) == ("alice", dropped.policy_id)

        notes = await alice.update_my_notes("check the rollback plan first")
        assert (notes.agent, notes.characters) == ("alice", len("check the rollback plan first"))
        noted = await alice.record_observation("the pager went off at 3am")
        await service.settled()
        latest_notes = service.events("notes.updated.v1")[-1]
        assert latest_notes["actor"] == "alice"
        held = service.pipeline.knowledge.tables.notes[("acme", "alice")]
        assert held == f"check the rollback plan first\n{noted.line}"
        assert (noted.agent, noted.line.endswith(" the pager went off at 3am")) == ("alice", True)
        assert service.observations("alice") == [], "notes are private: nothing is observed"

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
        await service.settled()
        report = await alice.consolidate_memory(stale_after_hours=0)
        assert [p.hot_id for p in report.promoted] == [kept.memory_id]
        assert report.archived == [idle.memory_id]
        await service.settled()

        await alice.propose_fact("infra", "ci", "CI runs on the self-hosted runners", veracity="inferred")
        await bob.propose_fact("infra", "build", "ci runs on self-hosted runners", veracity="inferred")
        await service.settled()
        harmony = await bob.harmonize_memory(domain="infra")
        assert [sorted(c.agents) for c in harmony.corroborated] == [["alice", "bob"]]
        assert harmony.conflicts == []


async def test_a_refused_operation_raises_permission_denied_and_writes_nothing(
    service: InMemoryService,
) -> None:
    k = service.pipeline.noema().knowledge
    await k.set_grant(OPERATOR, "intern", "security", "read")
    await service.settled()
    before = service.stream_last_seq()
    async with service.client(agent="ivy", role="intern") as ivy:
        with pytest.raises(PermissionDenied, match=r"role 'intern' has read access.*needs write") as denied:
            await ivy.propose_policy("security", "Secrets never rotate")
        assert denied.value.code == 403
        assert denied.value.operation == "propose_policy"
        assert service.stream_last_seq() == before
        # The same request by hand: a JSON body and the NATS micro error headers.
        subject = agent_subject(PREFIX, "acme", "intern", "ivy", "propose_policy")
        reply = await service.nc.request(subject, b'{"domain": "security", "rule": "x"}', timeout=10)
        assert reply.headers is not None
        assert reply.headers[ERROR_CODE_HEADER] == "403"
        assert "needs write" in reply.headers[ERROR_HEADER]
        body = json.loads(reply.data)
        assert body["ok"] is False
        assert body["error"]["code"] == 403
        assert "needs write" in body["error"]["message"]
        assert service.stream_last_seq() == before


async def test_a_request_nested_too_deep_is_a_422_before_it_is_parsed(service: InMemoryService) -> None:
    deep = b'{"query": "x", "filters": ' + b"[" * 5_000 + b"]" * 5_000 + b"}"
    async with service.client() as alice:
        await alice.search_memory("warm-up")  # the service answers
    for operation in ("search_memory", "observe"):
        subject = agent_subject(PREFIX, "acme", "engineer", "alice", operation)
        reply = await service.nc.request(subject, deep, timeout=10)
        assert reply.headers is not None
        assert reply.headers[ERROR_CODE_HEADER] == "422", reply.data
        assert "more than 32 levels deep" in json.loads(reply.data)["error"]["message"]
    assert service.stream_last_seq() == 0


async def test_a_bug_is_a_500_that_names_its_log_entry_and_leaks_nothing(
    monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    async def broken(app: Instance, who: Caller, raw: bytes) -> Any:
        raise RuntimeError("secret internals")

    monkeypatch.setitem(
        operations.OPERATIONS,
        "update_my_notes",
        replace(operations.OPERATIONS["update_my_notes"], run=broken),
    )
    running: InMemoryService = request.getfixturevalue("service")  # built with the broken operation
    async with running.client() as alice:
        with pytest.raises(ServerError, match=r"internal error \(logged as [0-9a-f-]{36}\)") as bug:
            await alice.update_my_notes("x")
    assert bug.value.code == 500
    assert "secret" not in str(bug.value)


def test_errors_map_to_codes_and_only_bugs_are_500() -> None:
    from noema.application.access import InsufficientMemoryPermission
    from noema.application.tools import ToolInputError
    from noema.errors import OperationError

    assert classify(InsufficientMemoryPermission("no"))[0] == 403
    assert classify(ToolInputError("bad"))[0] == 422
    assert classify(OperationError("no fact x"))[0] == 422
    assert classify(TimeoutError())[0] == 503
    assert classify(ConnectionRefusedError())[0] == 503
    assert classify(KeyError("bug")) == (500, "internal error")
    assert classify(msgspec.ValidationError("bug"))[0] == 500


async def test_every_reply_of_the_service_is_valid_under_the_published_bus_contract(
    service: InMemoryService,
) -> None:
    document = json.loads((SCHEMAS_DIR / "asyncapi.json").read_text())
    registry: referencing.Registry[Any] = referencing.Registry().with_resource(
        "urn:noema:asyncapi", referencing.jsonschema.DRAFT7.create_resource(document)
    )

    called: set[str] = set()

    async def call(operation: str, args: dict[str, Any]) -> dict[str, Any]:
        called.add(operation)
        subject = agent_subject(PREFIX, "acme", "engineer", "alice", operation)
        request = f"#/components/messages/{operation}.request/payload"
        reply = f"#/components/messages/{operation}.reply/payload"
        request_schema = jsonschema.Draft7Validator(
            {"$ref": "urn:noema:asyncapi" + request}, registry=registry
        )
        assert request_schema.is_valid(args), operation
        msg = await service.nc.request(subject, json.dumps(args).encode(), timeout=30)
        body: dict[str, Any] = json.loads(msg.data)
        errors = jsonschema.Draft7Validator({"$ref": "urn:noema:asyncapi" + reply}, registry=registry)
        assert [e.message for e in errors.iter_errors(body)] == [], (operation, body)
        return body

    fact = (await call("propose_fact", {"domain": "ops", "topic": "deploy-day", "content": "Fridays"}))[
        "result"
    ]
    await call("remember", {"session": "s1", "content": "the deploy key rotates", "importance": 0.9})
    await call("observe", {"content": "the build is red", "observation_id": "contract-1"})
    policy = (await call("propose_policy", {"domain": "ops", "rule": "Roll back first"}))["result"]
    await call("update_my_notes", {"notes": "halfway"})
    await call("record_observation", {"content": "saw a flaky test"})
    await service.settled()
    await call("search_memory", {"query": "Fridays", "mode": "keyword", "explain": True})
    await call("get_preamble", {"task": "deploy on Friday"})
    await call("list_memory_conflicts", {})
    await call("why", {"id": fact["memory_id"]})
    await call("supersede_fact", {"fact_id": fact["memory_id"], "content": "Tuesdays", "reason": "moved"})
    await call("supersede_policy", {"policy_id": policy["policy_id"], "reason": "obsolete"})
    await service.settled()
    await call("consolidate_memory", {"stale_after_hours": 0})
    await call("harmonize_memory", {})
    refused = await call("why", {"id": "no-such-id-anywhere"})
    assert refused["ok"] is False
    published = {m.split(".")[0] for m in document["components"]["messages"] if m.endswith(".reply")}
    assert called == published == ENDPOINTS
