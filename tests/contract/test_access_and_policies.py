"""Contract of :class:`noema.ports.AccessReads`, :class:`noema.ports.PolicyReads` and
:class:`noema.ports.NoteReads`: the access mode, grants, domains, policies, notes and working memory
read alike from both adapters."""

from __future__ import annotations

from noema.application.access import Caller
from noema.ids import new_id
from noema_events import WorkingMemoryUpdated, WorkingMemoryUpdatedPayload
from noema_events.catalog import WorkingMemoryItem
from tests.contract.conftest import T0, Backend

ALICE = Caller("acme", "alice", "engineer")
OPERATOR = Caller("acme", "root", operator=True)
WM_ID = new_id()


async def test_a_new_domain_seeds_write_for_every_role_in_compatible_mode(backend: Backend) -> None:
    k = backend.knowledge()
    assert await backend.reads.access_mode("acme") == "compatible"
    await k.propose_fact(ALICE, "ops", "deploy", "Deploys run on Tuesdays", repo="billing")
    assert await backend.reads.domain_exists("acme", "repo:billing/ops")
    assert await backend.reads.domain_keys("acme") == ["repo:billing/ops"]
    assert await backend.reads.grants("acme", strict=False) == {("*", "repo:billing/ops"): "write"}
    assert await backend.reads.grants("acme", strict=True) == {}, "strict mode ignores the seeds"
    (domain,) = await backend.reads.list_domains("acme", None)
    assert (domain["domain"], domain["name"], domain["repo"]) == ("repo:billing/ops", "ops", "billing")
    assert await backend.reads.list_domains("acme", []) == []


async def test_grants_and_the_access_mode_follow_the_latest_change(backend: Backend) -> None:
    k = backend.knowledge()
    await k.set_grant(OPERATOR, "engineer", "secrets", "read")
    await k.set_grant(OPERATOR, "engineer", "secrets", "none")
    await k.set_access_mode(OPERATOR, "strict")
    assert await backend.reads.access_mode("acme") == "strict"
    assert await backend.reads.grant("acme", "engineer", "secrets") == "none"
    assert await backend.reads.grant("acme", "intern", "secrets") is None
    rows = await backend.reads.list_grants("acme")
    assert [(r["role"], r["domain"], r["access"], r["seeded"]) for r in rows] == [
        ("*", "secrets", "write", True),
        ("engineer", "secrets", "none", False),
    ]
    assert rows[1]["changed_by"] == "operator:root"


async def test_policies_are_listed_by_domain_and_superseded_ones_only_when_asked(backend: Backend) -> None:
    k = backend.knowledge()
    old = await k.propose_policy(OPERATOR, "ops", "Deploy on Tuesdays")
    await k.propose_policy(OPERATOR, "arch", "One database per service")
    new = await k.supersede_policy(OPERATOR, old, "Deploy on Wednesdays")
    active = await backend.reads.list_policies("acme", False, None)
    assert [(p["domain"], p["rule"]) for p in active] == [
        ("arch", "One database per service"),
        ("ops", "Deploy on Wednesdays"),
    ]
    every = {p["id"]: p for p in await backend.reads.list_policies("acme", True, None)}
    assert (every[old]["active"], every[old]["superseded_by"]) == (False, new)
    assert await backend.reads.list_policies("acme", True, ["arch"]) == [
        p for p in every.values() if p["domain"] == "arch"
    ]
    row = await backend.reads.policy("acme", old)
    assert row == {"domain": "ops", "repo": None, "required_role": None, "active": False}
    assert await backend.reads.policy_ids("acme", old[:8]) == [old]
    assert await backend.reads.policy("other", old) is None


async def test_notes_and_working_memory_are_read_per_agent(backend: Backend) -> None:
    k = backend.knowledge()
    await k.update_my_notes(ALICE, "halfway through the auth refactor")
    assert await backend.reads.notes("acme", "alice") == "halfway through the auth refactor"
    assert await backend.reads.notes("acme", "bob") is None
    fact = await k.propose_fact(ALICE, "ops", "deploy", "Deploys run on Tuesdays")
    await backend.sink.publish(
        [
            WorkingMemoryUpdated(
                id=WM_ID,
                workspace="acme",
                mind="alice",
                occurred_at=T0,
                correlation_id=WM_ID,
                actor="attend",
                payload=WorkingMemoryUpdatedPayload(
                    items=[
                        WorkingMemoryItem(memory_id=fact.memory_id, gist="deploys", weight=0.8, entered_at=T0)
                    ],
                    capacity=5,
                ),
            )
        ]
    )
    held = await backend.reads.working_memory("acme", "alice")
    assert held is not None
    assert held["capacity"] == 5
    assert [i["memory_id"] for i in held["items"]] == [fact.memory_id]
    assert await backend.reads.working_memory("acme", "bob") is None
    statuses = await backend.reads.memory_statuses([fact.memory_id, "missing"])
    assert statuses == {fact.memory_id: ("Deploys run on Tuesdays", "active", None)}
