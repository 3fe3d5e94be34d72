"""The knowledge endpoints of the operator API over the in-memory composition
(tests/unit/api_in_memory.py): facts (with the conflicts worker's decision), policies, conflicts,
grants and the access mode, domains, working memory and notes; every write audited with the token's
name and the reason. Moved from tests/integration/test_api_knowledge.py with their assertions kept
(the events read from the in-memory stream); the first, the whole flow with the conflicts worker,
stays there too, on the real servers."""

from __future__ import annotations

import pytest

from noema.application.access import Caller
from noema_events import OperatorAction
from tests.unit.api_in_memory import InMemoryApi as ApiHarness
from tests.unit.api_in_memory import api

__all__ = ["api"]


async def settled(api: ApiHarness) -> None:
    """Let the pipeline's workers decide what is stored (conflicts: contradictions)."""
    await api.pipeline.run()


async def test_facts_conflicts_policies_grants_through_the_api_are_audited(api: ApiHarness) -> None:
    post = api.admin.post
    fact = {"workspace": "acme", "domain": "ops", "topic": "deploy-day", "reason": "from the runbook"}
    first = await post("/v1/facts", json={**fact, "content": "Deploys happen on Fridays"})
    assert first.status_code == 202, first.text
    second = await post("/v1/facts", json={**fact, "content": "Deploys happen on Tuesdays"})
    await settled(api)
    facts = (
        await api.admin.get("/v1/facts", params={"workspace": "acme", "include_inactive": "true"})
    ).json()
    status = {f["id"]: f["status"] for f in facts["items"]}
    assert status == {first.json()["memory_id"]: "superseded", second.json()["memory_id"]: "active"}
    [conflict] = (await api.admin.get("/v1/conflicts", params={"workspace": "acme"})).json()["items"]
    assert (conflict["winner_content"], conflict["loser_content"], conflict["rule"]) == (
        "Deploys happen on Tuesdays",
        "Deploys happen on Fridays",
        "recency",
    )
    fixed = await post(
        f"/v1/facts/{second.json()['memory_id'][:8]}/supersede",  # the short id listings print
        json={"content": "Deploys happen on Wednesdays", "reason": "changed in the retro"},
    )
    assert fixed.status_code == 202, fixed.text

    policy = await post(
        "/v1/policies",
        json={"workspace": "acme", "domain": "ops", "rule": "Roll back first", "reason": "incident"},
    )
    assert policy.status_code == 202, policy.text
    grant = await api.admin.put(
        "/v1/grants",
        json={
            "workspace": "acme",
            "role": "intern",
            "domain": "ops",
            "access": "read",
            "reason": "onboarding",
        },
    )
    assert grant.json() == {"role": "intern", "domain": "ops", "access": "read", "previous": None}
    mode = await api.admin.put(
        "/v1/access-mode", json={"workspace": "acme", "mode": "strict", "reason": "audit"}
    )
    assert mode.status_code == 202
    await settled(api)
    grants = (await api.admin.get("/v1/grants", params={"workspace": "acme"})).json()
    assert grants["access_mode"] == "strict"
    assert ("intern", "ops", "read") in {(g["role"], g["domain"], g["access"]) for g in grants["grants"]}
    policies = (await api.admin.get("/v1/policies", params={"workspace": "acme"})).json()["items"]
    assert [p["rule"] for p in policies] == ["Roll back first"]
    domains = (await api.admin.get("/v1/domains", params={"workspace": "acme"})).json()["items"]
    assert [d["domain"] for d in domains] == ["ops"]
    # A workspace token supersedes by short id too; the answer names the full ids.
    short = policies[0]["id"][:8]
    retired = await api.acme.post(f"/v1/policies/{short}/supersede", json={"reason": "obsolete"})
    assert retired.status_code == 202, retired.text
    assert retired.json()["superseded"] == policies[0]["id"]
    await settled(api)

    # Every operator write: an operator_action naming the token and the reason.
    actions = [
        {"actor": e.actor, "action": e.payload.action, "reason": e.payload.reason}
        for e in api.pipeline.stream.events
        if isinstance(e, OperatorAction)
    ]
    assert [(a["actor"], a["action"], a["reason"]) for a in actions] == [
        ("operator:alice", "create", "from the runbook"),
        ("operator:alice", "create", "from the runbook"),
        ("operator:alice", "correct", "changed in the retro"),
        ("operator:alice", "create", "incident"),
        ("operator:alice", "grant_change", "onboarding"),
        ("operator:alice", "grant_change", "audit"),
        ("operator:acme-ops", "correct", "obsolete"),
    ]


async def test_knowledge_reads_errors_and_token_scope(api: ApiHarness) -> None:
    k = api.instance.knowledge
    await k.update_my_notes(Caller("acme", "ops-agent"), "halfway through the auth refactor")
    await api.caught_up()
    notes = (await api.admin.get("/v1/notes", params={"workspace": "acme", "agent": "ops-agent"})).json()
    assert notes["notes"] == "halfway through the auth refactor"
    wm = (await api.admin.get("/v1/working-memory", params={"workspace": "acme", "mind": "ops"})).json()
    assert wm["items"] == []

    other = await api.acme.get("/v1/facts", params={"workspace": "globex"})
    assert other.status_code == 403
    bad = await api.admin.put(
        "/v1/grants",
        json={"workspace": "acme", "role": "intern", "domain": "ops", "access": "admin", "reason": "x"},
    )
    assert bad.status_code == 422
    unknown = await api.admin.post(
        "/v1/facts",
        json={
            "workspace": "acme",
            "domain": "ops",
            "topic": "t",
            "content": "c",
            "reason": "r",
            "agent": "mallory",
        },
    )
    assert unknown.status_code == 422
    assert "agent" in unknown.json()["error"]
    missing = await api.admin.post("/v1/policies/nope/supersede", json={"reason": "r"})
    assert missing.status_code == 404
    bad_domain = await api.admin.post(
        "/v1/facts", json={"workspace": "acme", "domain": "a/b", "topic": "t", "content": "c", "reason": "r"}
    )
    assert bad_domain.status_code == 422
    assert "domain name" in bad_domain.json()["error"]


async def test_nul_characters_are_refused_everywhere_and_never_stall_the_projector(api: ApiHarness) -> None:
    from noema.application.tools import TOOLS, ToolInputError, decode_input
    from noema_events import EventDecodeError, decode_event

    assert (await api.admin.get("/v1/memories/%00")).status_code == 400
    assert (await api.admin.post("/v1/memories/%00/retract", json={"reason": "r"})).status_code == 400
    with pytest.raises(ToolInputError, match="NUL"):
        decode_input(TOOLS["propose_fact"], {"domain": "ops", "topic": "t", "content": "a\x00b"})
    with pytest.raises(ToolInputError, match="NUL"):
        decode_input(TOOLS["propose_fact"], b'{"domain": "ops", "topic": "t", "content": "a\\u0000b"}')
    # An event that slipped through anyway is refused by the codec: the projector dead-letters it.
    with pytest.raises(EventDecodeError, match="NUL"):
        decode_event(b'{"type": "memory.created.v1", "payload": {"content": "a\\u0000b"}}')
