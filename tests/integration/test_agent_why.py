"""``why`` for agents, on real NATS + PostgreSQL: through the NATS service (the SDK) and the MCP
server, as the agent the surface is for. A superseded fact shows its proposal, the conflict rule that
decided and the supersession; an id of another workspace is not found; in strict mode an agent does
not see the history of a domain its role may not read, nor another agent's notes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import msgspec
import pytest

from noema.adapters.postgres.roles import DbRole
from noema.application.access import Caller
from noema.application.knowledge import Knowledge
from noema.composition.instance import connected_knowledge
from noema_conflicts.service import build as build_conflicts
from noema_projector.service import build as build_projector
from noema_sdk import NotFound, Why
from noema_service.service import build as build_service
from tests.conftest import Harness
from tests.integration.test_knowledge import settled
from tests.integration.test_mcp import over_stdio
from tests.integration.test_service import client
from tests.mcp_results import error, ok

pytestmark = pytest.mark.integration

OPERATOR = Caller("acme", "root", operator=True)
GLOBEX = Caller("globex", "carol", "engineer")


@pytest.fixture
async def knowledge(harness: Harness, role_urls: dict[DbRole, str]) -> Knowledge:
    """The projector and conflicts workers running; the surfaces under test read as the reader role,
    under row-level security (as `up` runs them)."""
    harness.settings = replace(
        harness.settings,
        database_url_projector=role_urls["projector"],
        database_url_reader=role_urls["reader"],
    )
    await harness.start(build_projector)
    await harness.start(build_conflicts)
    return connected_knowledge(harness.pool, harness.nc, harness.topology)


async def superseded_fact(harness: Harness, k: Knowledge) -> tuple[str, str]:
    """Fridays (by alice), then Tuesdays (by bob) in the same topic: the conflicts worker supersedes
    Fridays by recency. Also a fact in globex, which acme's agents must not reach."""
    alice, bob = Caller("acme", "alice", "engineer"), Caller("acme", "bob", "engineer")
    old = await k.propose_fact(alice, "ops", "deploy-day", "Deploys happen on Fridays")
    await settled(harness)
    new = await k.propose_fact(bob, "ops", "deploy-day", "Deploys happen on Tuesdays")
    await settled(harness)
    return old.memory_id, new.memory_id


def of_type(why: dict[str, Any], event_type: str) -> list[dict[str, Any]]:
    return [s for s in why["steps"] if s["event"] and s["event"]["type"] == event_type]


def assert_supersession_explained(why: dict[str, Any], old: str, new: str) -> None:
    assert (why["id"], why["subject"], why["workspace"]) == (old, "fact", "acme")
    proposals = {s["event"]["payload"]["memory_id"]: s for s in of_type(why, "fact.proposed.v2")}
    assert set(proposals) == {old, new}
    [conflict] = of_type(why, "conflict.recorded.v1")
    assert conflict["event"]["payload"]["rule"] == "recency"
    assert conflict["event"]["payload"]["loser_id"] == old
    [superseded] = of_type(why, "memory.superseded.v1")
    assert superseded["event"]["payload"]["superseded_by"] == new
    winner = proposals[new]["id"]
    assert (conflict["parent"], superseded["parent"]) == (winner, winner)


async def test_an_agent_asks_why_through_the_nats_service(harness: Harness, knowledge: Knowledge) -> None:
    await harness.start(build_service)
    old, new = await superseded_fact(harness, knowledge)
    elsewhere = await knowledge.propose_fact(GLOBEX, "ops", "deploy-day", "Globex deploys on Mondays")
    await settled(harness)
    async with client(harness) as alice:
        answer = await alice.why(old)
        assert isinstance(answer, Why)
        assert_supersession_explained(msgspec.to_builtins(answer), old, new)
        assert (await alice.why(old[:8])).id == old, "a memory's unique prefix will do"
        assert len((await alice.why(old, limit=1)).steps) >= 1

        with pytest.raises(NotFound, match="in workspace acme"):
            await alice.why(elsewhere.memory_id)
        with pytest.raises(NotFound):
            await alice.why("no-such-id-anywhere")


async def test_strict_mode_hides_what_the_role_may_not_read_and_other_agents_notes(
    harness: Harness, knowledge: Knowledge
) -> None:
    await harness.start(build_service)
    k = knowledge
    secret = await k.propose_fact(OPERATOR, "security", "vault", "The vault root key is rotated monthly")
    public = await k.propose_fact(OPERATOR, "ops", "pager", "The pager rotates weekly")
    await k.update_my_notes(Caller("acme", "bob", "engineer"), "bob's private plan")
    await k.set_access_mode(OPERATOR, "strict", reason="confidential security domain")
    await settled(harness)
    await k.set_grant(OPERATOR, "engineer", "ops", "read")
    await settled(harness)
    bob_notes = await harness.pool.fetchval(
        "SELECT id FROM events WHERE type = 'notes.updated.v1' AND actor = 'bob'"
    )
    async with client(harness) as alice:
        assert (await alice.why(public.memory_id)).subject == "fact"
        with pytest.raises(NotFound):
            await alice.why(secret.memory_id)
        with pytest.raises(NotFound):
            await alice.why(bob_notes)
    async with client(harness, agent="bob") as bob:
        [step] = [s for s in (await bob.why(bob_notes)).steps if s.id == bob_notes]
        assert step.event is not None
        assert step.event.payload["notes"] == "bob's private plan", "an agent reads its own notes"


async def test_an_agent_asks_why_over_mcp(harness: Harness, knowledge: Knowledge, tmp_path: Path) -> None:
    old, new = await superseded_fact(harness, knowledge)
    elsewhere = await knowledge.propose_fact(GLOBEX, "ops", "deploy-day", "Globex deploys on Mondays")
    await settled(harness)
    async with over_stdio(harness, tmp_path / "server.log") as mcp:
        [tool] = [t for t in (await mcp.list_tools()).tools if t.name == "why"]
        assert tool.annotations
        assert tool.annotations.read_only_hint
        assert_supersession_explained(ok(await mcp.call_tool("why", {"id": old})), old, new)
        refused = error(await mcp.call_tool("why", {"id": elsewhere.memory_id}))
        assert refused.startswith("not_found: nothing is recorded about")
        assert "globex" not in refused
        assert error(await mcp.call_tool("why", {"id": "x"})).startswith("invalid: ")
