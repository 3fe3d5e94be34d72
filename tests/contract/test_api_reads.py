"""The operator API's reads and an operator's entry, over both compositions
(tests/contract/api_backends.py): search ranks as recall does, an operator entry lands on the operator
channel and is audited. Written once, from the copies that were in tests/integration/test_api.py and
tests/unit/test_api_in_memory.py (assertions kept): over the real servers, search reads recall over
PostgreSQL under row-level security and the entry goes through NATS and the projector."""

from __future__ import annotations

from noema.ports import RecallFilters
from tests.contract.api_backends import AnyApi, api, api_over_servers, either_api
from tests.integration.api_harness import NOW, memory

__all__ = ["api", "api_over_servers", "either_api"]


async def test_search_returns_the_same_ranking_and_components_as_recall(either_api: AnyApi) -> None:
    api = either_api
    await api.given(
        memory("the deploy key rotates on Fridays"),
        memory("deploys are frozen during the holidays"),
        memory("the cafeteria serves soup"),
        memory("deploy key for another tenant", workspace="globex"),
    )
    res = await api.admin.get("/v1/memories/search", params={"q": "deploy key", "workspace": "acme"})
    assert res.status_code == 200, res.text
    body = res.json()
    direct = await api.app_recall().search("deploy key", RecallFilters(workspace="acme"), now=NOW)
    assert [(r["id"], r["score"], r["components"]) for r in body["results"]] == [
        (r.id, r.score, r.components) for r in direct.results
    ]
    assert body["results"][0]["content"] == "the deploy key rotates on Fridays"
    assert all(r["memory"]["workspace"] == "acme" for r in body["results"])
    assert body["intent"] == direct.intent
    assert body["weights"] == direct.weights


async def test_operator_entry_creates_a_memory_on_the_operator_channel(either_api: AnyApi) -> None:
    api = either_api
    res = await api.admin.post(
        "/v1/memories",
        json={
            "workspace": "acme",
            "content": "the on-call phone is 555-0100",
            "reason": "runbook",
            "domain": "ops",
        },
    )
    assert res.status_code == 202, res.text
    created = res.json()
    await api.caught_up()
    memory_row = (await api.admin.get(f"/v1/memories/{created['memory_id']}")).json()["memory"]
    assert (memory_row["channel"], memory_row["credibility"], memory_row["domain"]) == (
        "operator",
        1.0,
        "ops",
    )
    [action] = (await api.admin.get("/v1/audit", params={"type": "operator.action"})).json()["items"]
    assert action["id"] == created["action_event_id"]
    assert (action["actor"], action["payload"]["action"], action["payload"]["reason"]) == (
        "operator:alice",
        "create",
        "runbook",
    )
