"""The audit questions over the in-memory composition, through the operator API and ``noemactl``
alike (tests/unit/cli_in_memory.py): ``why`` on a fact the conflicts worker superseded shows its
proposal, the rule that decided and the supersession; ``audit diff`` between two points lists exactly
the changes made between them; unknown ids, bad points and other workspaces are refused as every other
read refuses them. Moved from tests/integration/test_audit_questions.py with their assertions kept;
``why`` on a memory attend made from an observation, and its later recall, stays there."""

from __future__ import annotations

from typing import Any

from tests.integration.api_harness import memory
from tests.unit.api_in_memory import InMemoryApi as ApiHarness
from tests.unit.cli_in_memory import api, ctl, ctl_json

__all__ = ["api"]

FACT = {"workspace": "acme", "domain": "ops", "topic": "deploy-day", "reason": "from the runbook"}


async def _ok(response: Any) -> Any:
    assert response.status_code in (200, 202), response.text
    return response.json()


def _of_type(why: dict[str, Any], event_type: str) -> list[dict[str, Any]]:
    return [s for s in why["steps"] if s["event"] and s["event"]["type"] == event_type]


async def _last_seq(api: ApiHarness) -> int:
    return len(api.pipeline.stream.events)


async def settled(api: ApiHarness) -> None:
    """Let the pipeline's workers decide what is stored (conflicts: contradictions)."""
    await api.pipeline.run()


async def test_why_a_superseded_fact_shows_the_proposal_the_rule_and_the_supersession(
    api: ApiHarness,
) -> None:
    old = await _ok(await api.admin.post("/v1/facts", json={**FACT, "content": "Deploys happen on Fridays"}))
    await settled(api)
    new = await _ok(await api.admin.post("/v1/facts", json={**FACT, "content": "Deploys happen on Tuesdays"}))
    await settled(api)

    why = await _ok(await api.admin.get(f"/v1/why/{old['memory_id']}"))

    assert (why["id"], why["subject"], why["workspace"]) == (old["memory_id"], "fact", "acme")
    proposals = {s["event"]["payload"]["memory_id"]: s for s in _of_type(why, "fact.proposed.v2")}
    assert set(proposals) == {old["memory_id"], new["memory_id"]}
    [conflict] = _of_type(why, "conflict.recorded.v1")
    assert conflict["event"]["payload"]["rule"] == "recency"
    assert (conflict["event"]["payload"]["loser_id"], conflict["event"]["actor"]) == (
        old["memory_id"],
        "conflicts",
    )
    [superseded] = _of_type(why, "memory.superseded.v1")
    assert superseded["event"]["payload"]["superseded_by"] == new["memory_id"]
    winner = proposals[new["memory_id"]]["id"]
    assert (conflict["parent"], superseded["parent"], superseded["link"]) == (winner, winner, "correlation")
    seqs = [s["event"]["seq"] for s in why["steps"] if s["event"]]
    assert seqs == sorted(seqs)

    # noemactl: the same answer, and the tree (by a short id, as listings print them).
    assert await ctl_json(api, "why", old["memory_id"]) == why
    shown = await ctl(api, "why", old["memory_id"][:8])
    assert shown.code == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith(f"fact {old['memory_id']} in workspace acme:")
    below = [line for line in lines if line.startswith(("├── ", "└── ")) and "#" in line]
    assert any("memory.superseded.v1 (by correlation) · conflicts" in line for line in below)
    assert any("conflict.recorded.v1 · conflicts" in line for line in below)
    assert "rule=recency" in shown.stdout


async def test_why_refuses_unknown_ids_and_other_workspaces(api: ApiHarness) -> None:
    [elsewhere] = await api.given(memory("a globex secret", workspace="globex"))
    unknown = await api.admin.get("/v1/why/no-such-id-anywhere")
    assert unknown.status_code == 404
    assert "nothing is recorded about no-such-id-anywhere" in unknown.json()["error"]
    assert (await api.acme.get(f"/v1/why/{elsewhere}")).status_code == 403
    assert (await api.acme.get(f"/v1/why/{elsewhere}", params={"workspace": "globex"})).status_code == 403
    assert (await api.admin.get(f"/v1/why/{elsewhere}")).json()["workspace"] == "globex"
    ran = await ctl(api, "why", "no-such-id-anywhere")
    assert ran.code == 4
    assert "nothing is recorded about no-such-id-anywhere" in ran.stderr


async def test_audit_diff_lists_exactly_the_changes_between_two_points(api: ApiHarness) -> None:
    post = api.admin.post
    [kept, archived] = await api.given(memory("kept as it is"), memory("to be archived"))
    start = await _last_seq(api)

    entered = await _ok(
        await post("/v1/memories", json={"workspace": "acme", "content": "555-0100", "reason": "x"})
    )
    await api.caught_up()  # the retraction reads the memory
    await _ok(await post(f"/v1/memories/{entered['memory_id']}/retract", json={"reason": "wrong number"}))
    await _ok(await post(f"/v1/memories/{archived}/archive", json={"reason": "stale"}))
    fact = await _ok(await post("/v1/facts", json={**FACT, "content": "Deploys happen on Fridays"}))
    await settled(api)
    fixed = await _ok(
        await post(
            f"/v1/facts/{fact['memory_id']}/supersede", json={"content": "On Mondays", "reason": "retro"}
        )
    )
    policy = await _ok(
        await post(
            "/v1/policies", json={"workspace": "acme", "domain": "ops", "rule": "Roll back", "reason": "x"}
        )
    )
    grant = {"workspace": "acme", "role": "intern", "domain": "ops", "access": "read", "reason": "onboarding"}
    await _ok(await api.admin.put("/v1/grants", json=grant))
    await _ok(
        await api.admin.put("/v1/access-mode", json={"workspace": "acme", "mode": "strict", "reason": "x"})
    )
    await settled(api)
    end = await _last_seq(api)
    await _ok(
        await post("/v1/memories", json={"workspace": "acme", "content": "after the end", "reason": "x"})
    )
    await api.given(memory("in another workspace", workspace="globex"))
    await settled(api)

    diff = await _ok(await api.admin.get("/v1/audit/diff", params={"from": str(start), "to": str(end)}))

    changed = {(g["kind"], c["target"]) for g in diff["groups"] for c in g["changes"]}
    [conflict] = [
        c["target"] for g in diff["groups"] if g["kind"] == "conflict.recorded" for c in g["changes"]
    ]
    assert changed == {
        ("memory.created", entered["memory_id"]),
        ("memory.retracted", entered["memory_id"]),
        ("memory.archived", archived),
        ("fact.proposed", fact["memory_id"]),
        ("fact.proposed", fixed["memory_id"]),
        ("memory.superseded", fact["memory_id"]),
        ("conflict.recorded", conflict),
        ("policy.proposed", policy["policy_id"]),
        ("domain.created", "ops"),
        ("grant.changed", "* on ops"),
        ("grant.changed", "intern on ops"),
        ("access_mode.changed", "acme"),
    }
    assert kept not in {target for _, target in changed}
    responsible = [e for g in diff["groups"] for c in g["changes"] for e in c["events"]]
    assert all(start < e["seq"] <= end for e in responsible)
    [supersession] = next(g for g in diff["groups"] if g["kind"] == "memory.superseded")["changes"]
    assert [e["type"] for e in supersession["events"]] == [
        "memory.superseded.v1",
        "operator.action.v1",
        "conflict.recorded.v1",
    ]
    assert supersession["events"][1]["actor"] == "operator:alice"

    assert await ctl_json(api, "audit", "diff", str(start), str(end)) == diff
    shown = await ctl(api, "audit", "diff", str(start), str(end), "-w", "acme")
    assert shown.code == 0, shown.stderr
    for part in (
        f"changes after {start} up to {end} in workspace acme",
        "memories retracted (1)",
        "wrong number",
    ):
        assert part in shown.stdout, part
    # The log itself still answers under `audit`.
    assert (await ctl_json(api, "audit", "--type", "workspace.configured"))["items"][0]["payload"] == {
        "access_mode": "strict"
    }


async def test_audit_diff_refuses_points_it_cannot_read_and_other_workspaces(api: ApiHarness) -> None:
    for start, end in (("2026-03-01", "5"), ("3", "2026-03-01T09:30:00"), ("yesterday", "5")):
        refused = await api.admin.get("/v1/audit/diff", params={"from": start, "to": end})
        assert refused.status_code == 400, (start, end)
        assert "an ISO-8601 time with its zone (e.g. 2026-03-01T09:30:00Z" in refused.json()["error"]
    backwards = await _ok(await api.admin.get("/v1/audit/diff", params={"from": "9", "to": "3"}))
    assert (backwards["groups"], backwards["last_seq"]) == ([], None)
    assert (await api.admin.get("/v1/audit/diff", params={"to": "3"})).status_code == 400
    forbidden = await api.acme.get("/v1/audit/diff", params={"from": "0", "to": "3", "workspace": "globex"})
    assert forbidden.status_code == 403
    ran = await ctl(api, "audit", "diff", "2026-03-01", "5")
    assert ran.code == 2
    assert "is neither a stream sequence nor a time with its zone" in ran.stderr
