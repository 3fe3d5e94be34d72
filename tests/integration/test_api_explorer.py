"""What the explorer reads besides the common reads, on the real servers: writes that name their
JetStream sequence and reads that wait for the read model to reach it (``after_seq``), and a memory's
neighbourhood in one answer (a recursive query). The refusals of ``after_seq`` and the vocabulary run
over the in-memory composition in tests/unit/test_api_explorer_in_memory.py."""

from __future__ import annotations

import httpx
import pytest

from noema.adapters.jetstream import stream_last_seq
from noema_api.consistency import AFTER_SEQ_WAIT
from tests.integration.api_harness import ApiHarness, api, memory, relationship

pytestmark = pytest.mark.integration
__all__ = ["api"]


def stored_seq(res: httpx.Response) -> int:
    """The stream sequence a write answered with."""
    assert res.status_code == 202, res.text
    return int(res.headers["noema-stream-seq"])


async def test_a_write_names_its_stream_sequence_and_a_read_after_it_sees_the_write(api: ApiHarness) -> None:
    entry = {"workspace": "acme", "content": "the pager rotates on mondays", "reason": "runbook"}
    res = await api.admin.post("/v1/memories", json=entry)
    seq = stored_seq(res)
    assert seq == await stream_last_seq(api.h.js, api.h.topology.event_stream)
    memory_id = res.json()["memory_id"]

    # No polling: one read, which the API holds until the projector has applied the write.
    read = await api.admin.get(f"/v1/memories/{memory_id}", params={"after_seq": seq})
    assert read.status_code == 200, read.text
    assert read.json()["memory"]["content"] == "the pager rotates on mondays"
    assert read.headers["noema-caught-up"] == "true"
    assert int(read.headers["noema-read-seq"]) >= seq

    retracted = await api.admin.post(f"/v1/memories/{memory_id}/retract", json={"reason": "wrong day"})
    after = stored_seq(retracted)
    assert after > seq
    listing = await api.admin.get(
        "/v1/memories", params={"workspace": "acme", "status": "retracted", "after_seq": after}
    )
    assert [m["id"] for m in listing.json()["items"]] == [memory_id]


async def test_knowledge_writes_name_their_sequence_and_show_in_a_read_after_it(api: ApiHarness) -> None:
    policy = await api.admin.post(
        "/v1/policies", json={"workspace": "acme", "domain": "ops", "rule": "page twice", "reason": "r"}
    )
    policies = await api.admin.get(
        "/v1/policies", params={"workspace": "acme", "after_seq": stored_seq(policy)}
    )
    assert [p["rule"] for p in policies.json()["items"]] == ["page twice"]

    grant = await api.admin.put(
        "/v1/grants",
        json={"workspace": "acme", "role": "intern", "domain": "ops", "access": "none", "reason": "r"},
    )
    grants = await api.admin.get("/v1/grants", params={"workspace": "acme", "after_seq": stored_seq(grant)})
    assert {"role": "intern", "domain": "ops", "access": "none"}.items() <= next(
        g for g in grants.json()["grants"] if g["role"] == "intern"
    ).items()

    fact = await api.admin.post(
        "/v1/facts",
        json={
            "workspace": "acme",
            "domain": "ops",
            "topic": "pager",
            "content": "pager is on",
            "reason": "r",
        },
    )
    facts = await api.admin.get("/v1/facts", params={"workspace": "acme", "after_seq": stored_seq(fact)})
    assert [f["content"] for f in facts.json()["items"]] == ["pager is on"]


async def test_a_read_after_a_sequence_not_yet_projected_answers_within_the_bound_and_says_so(
    api: ApiHarness,
) -> None:
    await api.given(memory("already projected"))
    last = await stream_last_seq(api.h.js, api.h.topology.event_stream)
    res = await api.admin.get("/v1/memories", params={"workspace": "acme", "after_seq": last + 1000})
    assert res.status_code == 200
    assert res.headers["noema-caught-up"] == "false"
    assert res.headers["noema-read-seq"] == str(last)
    assert [m["content"] for m in res.json()["items"]] == ["already projected"]
    assert AFTER_SEQ_WAIT <= 5


async def test_the_neighbourhood_is_two_hops_of_nodes_and_edges_in_one_answer(api: ApiHarness) -> None:
    a, b, c, d, lone = await api.given(memory("a"), memory("b"), memory("c"), memory("d"), memory("lone"))
    await api.given(relationship(a, b, "ab"), relationship(c, b, "cb"), relationship(c, d, "cd"))
    res = await api.acme.get(f"/v1/memories/{a[:8]}/neighbourhood")
    assert res.status_code == 200, res.text
    found = res.json()
    assert found["root"] == a
    assert {n["id"]: n["depth"] for n in found["nodes"]} == {a: 0, b: 1, c: 2}
    assert {(e["from_id"], e["to_id"]) for e in found["edges"]} == {(a, b), (c, b)}
    assert found["truncated"] is False
    assert {n["content"] for n in found["nodes"]} == {"a", "b", "c"}

    alone = (await api.acme.get(f"/v1/memories/{lone}/neighbourhood")).json()
    assert ([n["id"] for n in alone["nodes"]], alone["edges"]) == ([lone], [])


async def test_a_hubs_neighbourhood_is_cut_at_forty_memories_and_says_so(api: ApiHarness) -> None:
    hub, *spokes = await api.given(*(memory(f"m{i}") for i in range(46)))
    await api.given(*(relationship(hub, s, f"e{i}") for i, s in enumerate(spokes)))
    found = (await api.admin.get(f"/v1/memories/{hub}/neighbourhood")).json()
    assert len(found["nodes"]) == 40
    assert found["truncated"] is True
    ids = {n["id"] for n in found["nodes"]}
    assert all(e["from_id"] in ids and e["to_id"] in ids for e in found["edges"])


async def test_the_neighbourhood_of_another_workspaces_memory_is_refused(api: ApiHarness) -> None:
    [other] = await api.given(memory("theirs", workspace="globex"))
    assert (await api.acme.get(f"/v1/memories/{other}/neighbourhood")).status_code == 403
    assert (await api.acme.get("/v1/memories/zzzzzzzz/neighbourhood")).status_code == 404
