"""The operator API over the in-memory composition (tests/unit/api_in_memory.py): every endpoint's
happy path and its refusals, moved from tests/integration/test_api.py with their assertions kept.
What needs the servers stays there: health and readiness, the read model's position (replay status).
Search against recall and an operator entry run over both compositions in
tests/contract/test_api_reads.py."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.integration.api_harness import NOW, memory, relationship, retraction
from tests.unit.api_in_memory import InMemoryApi as ApiHarness
from tests.unit.api_in_memory import api

__all__ = ["api"]  # the fixture, imported for pytest


async def test_openapi_document_is_served_without_a_token(api: ApiHarness) -> None:
    doc = (await api.anonymous.get("/openapi.json")).json()
    assert doc["openapi"] == "3.1.0"
    assert "/v1/memories/{memory_id}/retract" in doc["paths"]


async def test_search_without_explain_leaves_components_out(api: ApiHarness) -> None:
    await api.given(memory("the deploy key rotates on Fridays"))
    res = await api.admin.get(
        "/v1/memories/search", params={"q": "deploy", "mode": "keyword", "explain": "false"}
    )
    assert res.status_code == 200
    [hit] = res.json()["results"]
    assert hit["components"] is None
    assert hit["score"] > 0


async def test_list_filters_by_kind_status_domain_and_paginates(api: ApiHarness) -> None:
    a, b, c = await api.given(
        memory("a fact about billing", domain="billing"),
        memory("an episode", kind="episodic", epistemic_kind="observation"),
        memory("a fact about hr", domain="hr"),
    )
    await api.given(retraction(c))

    async def ids(**params: str) -> list[str]:
        res = await api.admin.get("/v1/memories", params={"workspace": "acme", **params})
        assert res.status_code == 200, res.text
        return [m["id"] for m in res.json()["items"]]

    assert set(await ids()) == {a, b, c}
    assert await ids(kind="episodic") == [b]
    assert await ids(epistemic_kind="observation") == [b]
    assert await ids(domain="billing") == [a]
    assert await ids(status="retracted") == [c]
    assert len(await ids(limit="2")) == 2
    assert len(await ids(limit="2", offset="2")) == 1
    assert await ids(since=NOW.replace(year=NOW.year + 1).isoformat()) == []
    assert await ids(workspace="null") == []  # a name, not "no filter"
    # A plain date as `until` includes that day; as `since` it starts it.
    today = NOW.date().isoformat()
    assert set(await ids(since=today, until=today)) == {a, b, c}


async def test_timeline_orders_by_when_things_happened(api: ApiHarness) -> None:
    late, early = await api.given(
        memory("second", happened_at=datetime(2024, 6, 1, tzinfo=UTC)),
        memory("first", happened_at=datetime(2024, 1, 1, tzinfo=UTC)),
    )
    res = await api.admin.get("/v1/timeline", params={"workspace": "acme", "order": "asc"})
    assert [m["id"] for m in res.json()["items"]] == [early, late]
    res = await api.admin.get("/v1/timeline", params={"workspace": "acme"})
    assert [m["id"] for m in res.json()["items"]] == [late, early]


async def test_detail_shows_provenance_relationships_and_citing_events(api: ApiHarness) -> None:
    origin = memory("Bob keeps the vault credentials", source_observation_ids=["obs-1"])
    a, b = await api.given(origin, memory("the vault is in room 4"))
    await api.given(relationship(a, b))
    res = await api.admin.get(f"/v1/memories/{a}")
    assert res.status_code == 200, res.text
    detail = res.json()
    assert detail["memory"]["content"] == "Bob keeps the vault credentials"
    assert detail["origin"]["id"] == origin.id
    assert detail["origin"]["type"] == "memory.created.v1"
    assert detail["source_observations"] == [{"id": "obs-1", "decision": None}]
    assert [(r["to_id"], r["direction"], r["other_content"]) for r in detail["relationships"]] == [
        (b, "out", "the vault is in room 4")
    ]
    assert {e["id"] for e in detail["citing_events"]} == {origin.id, "rel-event"}


async def test_audit_log_filters_by_type_and_actor_and_pages_back(api: ApiHarness) -> None:
    ids = await api.given(*(memory(f"memory {i}") for i in range(3)), memory("elsewhere", workspace="globex"))
    await api.given(retraction(ids[0]))
    res = await api.admin.get("/v1/audit", params={"workspace": "acme", "limit": "2"})
    page = res.json()
    assert res.status_code == 200
    assert [e["type"] for e in page["items"]] == ["operator.action.v1", "memory.created.v1"]
    older = (
        await api.admin.get("/v1/audit", params={"workspace": "acme", "before": page["next_before"]})
    ).json()
    assert len(older["items"]) == 2
    assert older["next_before"] is None
    assert all(e["seq"] < page["next_before"] for e in older["items"])
    by_type = (await api.admin.get("/v1/audit", params={"type": "operator.action"})).json()["items"]
    assert [e["payload"]["target_id"] for e in by_type] == [ids[0]]
    by_actor = (await api.admin.get("/v1/audit", params={"actor": "operator:test"})).json()["items"]
    assert [e["id"] for e in by_actor] == [e["id"] for e in by_type]


async def test_an_operator_entrys_domain_is_checked_and_created_on_first_use(api: ApiHarness) -> None:
    entry = {"workspace": "acme", "content": "billing runs nightly", "reason": "runbook"}
    bad = await api.admin.post("/v1/memories", json={**entry, "domain": "Bad Domain!"})
    assert bad.status_code == 422
    assert "domain name" in bad.json()["error"]
    res = await api.admin.post("/v1/memories", json={**entry, "domain": "Billing", "repo": "web"})
    assert res.status_code == 202, res.text
    await api.caught_up()
    stored = (await api.admin.get(f"/v1/memories/{res.json()['memory_id']}")).json()["memory"]
    assert (stored["domain"], stored["repo"]) == ("repo:web/billing", "web")
    domains = (await api.admin.get("/v1/domains", params={"workspace": "acme"})).json()["items"]
    assert "repo:web/billing" in {d["domain"] for d in domains}
    # A body's dates are read as the CLI reads them: a plain date is midnight UTC.
    dated = await api.admin.post("/v1/memories", json={**entry, "valid_until": "2099-01-01"})
    assert dated.status_code == 202, dated.text
    await api.caught_up()
    until = (await api.admin.get(f"/v1/memories/{dated.json()['memory_id']}")).json()["memory"]["valid_until"]
    assert until.startswith("2099-01-01T00:00:00")
    past_range = await api.admin.post(
        "/v1/memories", json={**entry, "valid_until": "0001-01-01T00:00:00+01:00"}
    )
    assert past_range.status_code == 422
    assert "out of the range" in past_range.json()["error"]


async def test_correct_supersedes_the_memory_with_the_corrected_content(api: ApiHarness) -> None:
    [old] = await api.given(memory("the deploy key rotates on Fridays"))
    res = await api.admin.post(
        f"/v1/memories/{old}/correct",
        json={"reason": "it is Mondays", "content": "the deploy key rotates on Mondays"},
    )
    assert res.status_code == 202, res.text
    new = res.json()["memory_id"]
    await api.caught_up()
    before = (await api.admin.get(f"/v1/memories/{old}")).json()["memory"]
    after = (await api.admin.get(f"/v1/memories/{new}")).json()["memory"]
    assert (before["status"], before["superseded_by"]) == ("superseded", new)
    assert (after["status"], after["content"], after["channel"]) == (
        "active",
        "the deploy key rotates on Mondays",
        "operator",
    )
    hits = (await api.admin.get("/v1/memories/search", params={"q": "deploy key rotates"})).json()["results"]
    assert [h["id"] for h in hits] == [new]


async def test_archive_then_restore_round_trips_the_status(api: ApiHarness) -> None:
    [mid] = await api.given(memory("keep this for later"))
    assert (await api.admin.post(f"/v1/memories/{mid}/archive", json={"reason": "stale"})).status_code == 202
    await api.caught_up()
    assert (await api.admin.get(f"/v1/memories/{mid}")).json()["memory"]["status"] == "archived"
    assert (await api.admin.post(f"/v1/memories/{mid}/restore", json={"reason": "needed"})).status_code == 202
    await api.caught_up()
    assert (await api.admin.get(f"/v1/memories/{mid}")).json()["memory"]["status"] == "active"
    actions = (await api.admin.get("/v1/audit", params={"type": "operator.action"})).json()["items"]
    assert [a["payload"]["action"] for a in actions] == ["restore", "archive"]


@pytest.mark.parametrize(
    ("path", "params", "fragment"),
    [
        ("/v1/memories", {"colour": "red"}, "unknown query parameters: colour"),
        ("/v1/memories", {"limit": "many"}, "limit"),
        ("/v1/memories", {"limit": "0"}, "limit"),
        ("/v1/memories", {"kind": "dream"}, "kind"),
        ("/v1/memories", {"since": "yesterday"}, "since"),
        ("/v1/memories/search", {}, "q"),
        ("/v1/memories/search", {"q": "x", "mode": "telepathy"}, "mode"),
        ("/v1/memories/search", {"q": "   "}, "q"),
        ("/v1/memories/search", {"q": "a\x00b"}, "NUL"),
        ("/v1/memories", {"kind": "null"}, "cannot be 'null'"),
        ("/v1/audit", {"before": str(2**70)}, "before"),
        ("/v1/timeline", {}, "workspace"),
        ("/v1/audit", {"type": "memory.imagined"}, "unknown event type"),
        ("/v1/healthz", {}, "Not Found"),
    ],
)
async def test_bad_queries_get_a_4xx_with_a_message(
    api: ApiHarness, path: str, params: dict[str, str], fragment: str
) -> None:
    res = await api.admin.get(path, params=params)
    assert 400 <= res.status_code < 500
    assert fragment in res.json()["error"]


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        (b"not json", 400, "JSON"),
        (b'{"reason": "x", "colour": "red"}', 422, "colour"),
        (b"{}", 422, "reason"),
        (b'{"reason": "   "}', 422, "reason"),
        (b'["reason"]', 422, "object"),
    ],
)
async def test_bad_bodies_get_a_4xx_with_a_message(
    api: ApiHarness, body: bytes, status: int, fragment: str
) -> None:
    [mid] = await api.given(memory("something"))
    res = await api.admin.post(f"/v1/memories/{mid}/retract", content=body)
    assert res.status_code == status
    assert fragment in res.json()["error"]


async def test_actions_on_missing_or_unsuitable_memories_are_refused(api: ApiHarness) -> None:
    [mid] = await api.given(memory("something"))
    missing = await api.admin.post("/v1/memories/no-such-id/retract", json={"reason": "x"})
    assert (missing.status_code, missing.json()["error"]) == (404, "no memory no-such-id")
    assert (await api.admin.get("/v1/memories/no-such-id")).status_code == 404
    restore = await api.admin.post(f"/v1/memories/{mid}/restore", json={"reason": "x"})
    assert restore.status_code == 409
    assert "it is active" in restore.json()["error"]
    same = await api.admin.post(f"/v1/memories/{mid}/correct", json={"reason": "x", "content": "something"})
    assert same.status_code == 422
    assert (await api.admin.delete(f"/v1/memories/{mid}")).status_code == 405
    empty = await api.admin.post(f"/v1/memories/{mid}/archive", content=b"")
    assert (empty.status_code, empty.json()["error"]) == (400, "the body is empty: it must be a JSON object")
    bad_entry = await api.admin.post(
        "/v1/memories", json={"workspace": "no spaces", "content": "x", "reason": "y"}
    )
    assert bad_entry.status_code == 422


async def _walk(api: ApiHarness, path: str, params: dict[str, str]) -> list[dict[str, Any]]:
    """Every page of a listing, from the first by following ``next`` to the end."""
    pages = []
    url: str | None = f"{path}?{urlencode(params)}"
    while url is not None:
        res = await api.admin.get(url)
        assert res.status_code == 200, res.text
        page = res.json()
        # The body's link and the RFC 8288 header name the same next page.
        assert res.headers.get("link") == (f'<{page["next"]}>; rel="next"' if page["next"] else None)
        pages.append(page)
        url = page["next"]
    return pages


async def test_every_paged_listing_is_walked_to_its_end_by_following_next(api: ApiHarness) -> None:
    made = await api.given(
        *(memory(f"deploy step {i}", domain="ops", topic=f"step-{i}") for i in range(5)),
        memory("elsewhere", workspace="globex"),
    )
    # Memories: pages of two keep the filters (workspace) and the order; the last page ends it.
    pages = await _walk(api, "/v1/memories", {"workspace": "acme", "limit": "2"})
    assert [len(p["items"]) for p in pages] == [2, 2, 1]
    assert [p["next_offset"] for p in pages] == [2, 4, None]
    assert sorted(m["id"] for p in pages for m in p["items"]) == sorted(made[:5])
    assert pages[1]["next"] == "/v1/memories?workspace=acme&limit=2&offset=4"
    # A page that is exactly full is not followed by an empty one.
    assert [
        len(p["items"]) for p in await _walk(api, "/v1/timeline", {"workspace": "acme", "limit": "5"})
    ] == [5]
    # Facts (offset) and the audit log (its keyset cursor, before) page the same way.
    facts = await _walk(api, "/v1/facts", {"workspace": "acme", "limit": "2"})
    assert [len(p["items"]) for p in facts] == [2, 2, 1]
    assert len({f["id"] for p in facts for f in p["items"]}) == 5
    audit = await _walk(api, "/v1/audit", {"workspace": "acme", "limit": "3"})
    assert [len(p["items"]) for p in audit] == [3, 2]
    assert audit[0]["next"] == f"/v1/audit?workspace=acme&limit=3&before={audit[0]['next_before']}"
    # Complete lists say how many they hold.
    domains = (await api.admin.get("/v1/domains", params={"workspace": "acme"})).json()
    assert domains["total"] == len(domains["items"])
