"""What an agent must not see, through the ``Noema`` facade every surface calls: in strict mode the
domains its role may not read (search, preamble, conflicts, policies, domains), and — in any mode —
another agent's notes, including what it noted with record_observation."""

from __future__ import annotations

import pytest

from noema.adapters.postgres.voices import RecallStore
from noema.application.access import Caller
from noema.application.facade import SearchOptions
from noema.client import publish_observation
from noema.composition.instance import Instance
from noema_attend.service import build as build_attend
from noema_conflicts.service import build as build_conflicts
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.integration.test_knowledge import ALICE, BOB, OPERATOR, settled
from tests.support import assert_eventually

pytestmark = pytest.mark.integration

INTERN = Caller("acme", "ivy", "intern")
PARTNER = Caller("acme", "hana", "hr-partner")
KEYWORD = SearchOptions(mode="keyword", limit=50)


async def facade(harness: Harness) -> Instance:
    return Instance(harness.settings, harness.pool, harness.nc, await RecallStore.open(harness.pool))


async def test_in_strict_mode_the_facade_shows_a_role_only_the_domains_it_may_read(harness: Harness) -> None:
    await harness.start(build_projector)
    await harness.start(build_conflicts)
    app = await facade(harness)
    k = app.knowledge
    for domain, first, second in (
        ("hr", "Salary bands are reviewed every March", "Salary bands are reviewed every April"),
        ("ops", "The salary export runs on the ops cluster", "The salary export runs on the web cluster"),
    ):
        await k.propose_fact(ALICE, domain, "salary", first)
        await settled(harness)
        await k.propose_fact(BOB, domain, "salary", second)  # a conflict in each domain
    await k.propose_policy(ALICE, "hr", "Never share salary bands outside HR")
    await k.propose_policy(ALICE, "ops", "Page the on-call before restarting the salary export")
    await k.set_access_mode(OPERATOR, "strict")
    await k.set_grant(OPERATOR, "intern", "ops", "read")
    await k.set_grant(OPERATOR, "hr-partner", "hr", "read")
    await settled(harness)
    task = "prepare the salary bands review in April"

    async def seen(who: Caller) -> dict[str, set[str | None]]:
        found = await app.search(who, "salary", KEYWORD)
        preamble = await app.preamble(who, task)
        return {
            "search": {r.memory.get("domain") for r in found.results},
            "preamble policies": {p.split("]")[0].removeprefix("- [") for p in preamble.policies},
            "preamble facts": {d for d in ("hr", "ops") if any(f"[{d}" in f for f in preamble.facts)},
            "conflicts": {c["domain"] for c in await k.list_conflicts(who)},
            "policies": {p["domain"] for p in await k.list_policies(who)},
            "domains": {d["domain"] for d in await k.list_domains(who)},
        }

    intern = await seen(INTERN)
    assert {part: "hr" in domains for part, domains in intern.items()} == dict.fromkeys(intern, False)
    assert intern["search"] == intern["conflicts"] == intern["policies"] == intern["domains"] == {"ops"}
    # The role with read on hr sees it there (so hr is hidden from the intern, not missing), and
    # nothing of ops, which it has no grant on.
    assert await seen(PARTNER) == {part: {"hr"} for part in intern}
    intern_preamble = await app.preamble(INTERN, task)
    assert "Salary bands" not in intern_preamble.text
    assert "outside HR" not in intern_preamble.text


async def test_a_recorded_observation_stays_in_the_notes_and_no_other_agent_finds_it(
    harness: Harness,
) -> None:
    await harness.start(build_projector)
    await harness.start(build_conflicts)
    await harness.start(build_attend)
    app = await facade(harness)
    secret = "the vault recovery codes are kept in the blue folder in the ops office drawer"
    line = await app.knowledge.record_observation(ALICE, secret)
    # An ordinary observation of alice's mind after it: once attend has made it a memory, it has
    # also decided on anything published before it.
    marker = "the billing migration finished without errors on the primary cluster of the region"
    await publish_observation(harness.js, marker, workspace="acme", mind="alice", topology=harness.topology)
    await assert_eventually(
        lambda: harness.pool.fetchval("SELECT count(*) = 1 FROM memories WHERE content = $1", marker)
    )
    await settled(harness)
    assert [r.memory["content"] for r in (await app.search(BOB, "billing migration", KEYWORD)).results] == [
        marker
    ], "the search works"
    assert (await app.search(BOB, "vault recovery codes", KEYWORD)).results == []
    assert (await app.search(None, "vault recovery codes", KEYWORD, workspace="acme")).results == []
    assert await app.knowledge.get_notes(ALICE) == line
    assert secret not in (await app.preamble(BOB, "where are the vault recovery codes")).text
    assert secret in (await app.preamble(ALICE, "where are the vault recovery codes")).text
