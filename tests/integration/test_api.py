"""The operator API over real NATS + PostgreSQL: what needs the servers (health and readiness, the read
model's position, search against recall over PostgreSQL under row-level security, an operator entry
through NATS and the projector). Every endpoint's other happy paths and refusals run over the in-memory
composition in tests/unit/test_api_in_memory.py."""

from __future__ import annotations

import pytest

from noema.ports import RecallFilters
from tests.integration.api_harness import NOW, ApiHarness, api, memory

pytestmark = pytest.mark.integration
__all__ = ["api"]  # the fixture, imported for pytest


async def test_health_and_readiness_answer_without_a_token(api: ApiHarness) -> None:
    assert (await api.anonymous.get("/healthz")).json() == {"status": "ok", "problems": []}
    ready = await api.anonymous.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["status"] == "ok"


async def test_search_returns_the_same_ranking_and_components_as_recall(api: ApiHarness) -> None:
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


async def test_replay_status_reports_position_and_lag(api: ApiHarness) -> None:
    await api.given(memory("one"), memory("two"))
    status = (await api.admin.get("/v1/replay/status")).json()
    assert status == {
        "projection": "read_model",
        "position": 2,
        "stream_last_seq": 2,
        "lag": 0,
        "caught_up": True,
    }


async def test_operator_entry_creates_a_memory_on_the_operator_channel(api: ApiHarness) -> None:
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
