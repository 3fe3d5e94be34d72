"""The acceptance scenario of issue 6: a retraction through the API, end to end on real servers."""

from __future__ import annotations

import pytest

from tests.integration.api_harness import ApiHarness, api, memory

pytestmark = pytest.mark.integration
__all__ = ["api"]


async def test_a_retracted_memory_stays_visible_is_audited_and_leaves_recall(api: ApiHarness) -> None:
    [wrong, right] = await api.given(
        memory("the staging database password is hunter2"), memory("the staging database lives on db-3")
    )
    found = (await api.admin.get("/v1/memories/search", params={"q": "staging database"})).json()["results"]
    assert wrong in [r["id"] for r in found]

    res = await api.admin.post(f"/v1/memories/{wrong}/retract", json={"reason": "the password was rotated"})
    assert res.status_code == 202, res.text
    action_id = res.json()["action_event_id"]
    await api.caught_up()

    # Still visible, with its status.
    detail = (await api.admin.get(f"/v1/memories/{wrong}")).json()
    assert detail["memory"]["status"] == "retracted"
    assert detail["memory"]["content"] == "the staging database password is hunter2"
    listed = (await api.admin.get("/v1/memories", params={"status": "retracted"})).json()["items"]
    assert [m["id"] for m in listed] == [wrong]

    # An operator_action event naming the actor and the reason, on the stream and in the audit log.
    [action] = [e for e in detail["citing_events"] if e["type"] == "operator.action.v1"]
    assert action["id"] == action_id
    assert action["actor"] == "operator:alice"
    assert action["payload"] == {
        "action": "retract",
        "target_id": wrong,
        "reason": "the password was rotated",
    }
    audit = (await api.admin.get("/v1/audit", params={"actor": "operator:alice"})).json()["items"]
    assert [(e["id"], e["type"]) for e in audit] == [(action_id, "operator.action.v1")]
    row = await api.h.pool.fetchrow(
        "SELECT actor, payload->>'reason' AS reason FROM events WHERE id = $1", action_id
    )
    assert (row["actor"], row["reason"]) == ("operator:alice", "the password was rotated")

    # Gone from normal recall, every mode; the other memory still found.
    for mode in ("keyword", "hybrid", "semantic"):
        found = (
            await api.admin.get("/v1/memories/search", params={"q": "staging database", "mode": mode})
        ).json()
        assert [r["id"] for r in found["results"]] == [right], mode
    # ... unless asked for: an operator can still find what was retracted.
    asked = await api.admin.get(
        "/v1/memories/search", params={"q": "staging database", "mode": "keyword", "status": "retracted"}
    )
    assert [r["id"] for r in asked.json()["results"]] == [wrong]

    # Retracting again is refused.
    again = await api.admin.post(f"/v1/memories/{wrong}/retract", json={"reason": "again"})
    assert again.status_code == 409
