"""The dispatch preamble over the whole pipeline in memory: keyword-matched facts within budget, repo
first, always the closing line. Moved from tests/integration/test_preamble.py with its assertions kept
(the preamble's reads over PostgreSQL: tests/contract/test_preamble_reads.py)."""

from __future__ import annotations

import pytest

from noema.application.preamble import CLOSING, FACTS_BUDGET_CHARS, MAX_FACTS, build_preamble
from noema.composition.pipeline import InMemoryPipeline
from noema.ids import new_id
from noema_events import MemoryCreated, OperatorAction, OperatorActionPayload
from tests.integration.test_recall import memory


@pytest.fixture
def harness() -> InMemoryPipeline:
    return InMemoryPipeline()


async def given(h: InMemoryPipeline, *events: MemoryCreated) -> list[str]:
    """Store memories (projected as they are stored)."""
    await h.stream.publish(list(events))
    return [e.payload.memory_id for e in events]


async def test_facts_for_the_task_within_budget_repo_first_and_the_closing_line(
    harness: InMemoryPipeline,
) -> None:
    facts = [
        memory(
            f"deploy rule {i}: the deploy key of service {i} rotates on Fridays " + "x" * 150, domain="ops"
        )
        for i in range(8)
    ]
    ours = memory("deploy key rotation for this repo uses the vault CLI", domain="codebase", repo="billing")
    episodic = memory("standup: rotate the deploy key before the release", kind="episodic")
    ids = await given(harness, *facts, ours, episodic)

    p = await build_preamble(
        harness.knowledge,
        "acme",
        "ops-agent",
        "rotate the deploy key before the release",
        repo="billing",
    )
    assert p.text.endswith(CLOSING)
    assert 0 < len(p.facts) <= MAX_FACTS
    assert sum(len(f) for f in p.facts) <= FACTS_BUDGET_CHARS
    assert p.facts[0] == "- [codebase] deploy key rotation for this repo uses the vault CLI"
    assert all("standup" not in f for f in p.facts), "only facts (semantic memories) go into the preamble"

    short = await build_preamble(harness.knowledge, "acme", "ops-agent", "deploy key", repo="billing")
    assert short.facts == []
    assert short.text == CLOSING

    await harness.stream.publish(
        [
            OperatorAction(
                id=new_id(),
                workspace="acme",
                mind="ops",
                occurred_at=facts[0].occurred_at,
                correlation_id="c",
                actor="operator:alice",
                payload=OperatorActionPayload(action="retract", target_id=ids[8], reason="wrong"),
            )
        ]
    )
    assert harness.knowledge.tables.memories[ids[8]]["status"] == "retracted"
    after = await build_preamble(
        harness.knowledge,
        "acme",
        "ops-agent",
        "rotate the deploy key before the release",
        repo="billing",
    )
    assert all("vault CLI" not in f for f in after.facts)


async def test_a_fact_holding_every_word_of_the_task_comes_before_those_holding_one(
    harness: InMemoryPipeline,
) -> None:
    """Issue 32: a short task ("when do we deploy capybara") found facts that repeat one of its
    words ahead of the one fact that holds them all ("The capybara deploy window is …"), which the
    five places then left out. A fact is ranked by how many of the task's words it holds first
    (over PostgreSQL: tests/integration/test_preamble.py)."""
    noise = [
        memory(f"deploy checklist {i}: deploy, verify the deploy, then deploy again", domain="ops")
        for i in range(MAX_FACTS + 2)
    ]
    window = memory("The capybara deploy window is Tuesday 10:00-12:00 UTC, nothing outside it", domain="ops")
    await given(harness, *noise, window)

    task = "when do we deploy capybara"
    p = await build_preamble(harness.knowledge, "acme", "ops-agent", task)
    assert p.facts[0] == f"- [ops] {window.payload.content}"
    assert len(p.facts) == MAX_FACTS  # the others still follow, by their rank
