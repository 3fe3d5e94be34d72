"""The knowledge endpoints of the operator API on real servers: facts (with the conflicts worker),
policies, conflicts, grants and the access mode, domains, working memory and notes; every write
audited with the token's name and the reason. The knowledge reads' refusals and token scope, and the
refusal of NUL characters, run over the in-memory composition in
tests/unit/test_api_knowledge_in_memory.py (with a copy of this flow)."""

from __future__ import annotations

import pytest

from noema_conflicts.service import build as build_conflicts
from tests.integration.api_harness import ApiHarness, api
from tests.support import assert_eventually, consumer_drained

pytestmark = pytest.mark.integration
__all__ = ["api"]


async def settled(api: ApiHarness) -> None:
    async def check() -> bool:
        t = api.h.topology
        return await consumer_drained(api.h.js, t.event_stream, t.durable("conflicts"))

    for _ in range(2):
        await assert_eventually(check)
        await api.caught_up()


async def test_facts_conflicts_policies_grants_through_the_api_are_audited(api: ApiHarness) -> None:
    await api.h.start(build_conflicts)
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
    actions = await api.h.pool.fetch(
        "SELECT actor, payload->>'action' AS action, payload->>'reason' AS reason FROM events "
        "WHERE type = 'operator.action.v1' ORDER BY seq"
    )
    assert [(a["actor"], a["action"], a["reason"]) for a in actions] == [
        ("operator:alice", "create", "from the runbook"),
        ("operator:alice", "create", "from the runbook"),
        ("operator:alice", "correct", "changed in the retro"),
        ("operator:alice", "create", "incident"),
        ("operator:alice", "grant_change", "onboarding"),
        ("operator:alice", "grant_change", "audit"),
        ("operator:acme-ops", "correct", "obsolete"),
    ]
