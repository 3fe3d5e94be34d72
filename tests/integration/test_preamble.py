"""The dispatch preamble's fact order over PostgreSQL (full text): what the in-memory read model does
too (tests/unit/test_preamble_in_memory.py), checked where the SQL ranks it."""

from __future__ import annotations

import pytest

from noema.adapters.postgres.knowledge import PostgresKnowledge
from noema.application.preamble import MAX_FACTS, build_preamble
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.integration.test_recall import given, memory

pytestmark = pytest.mark.integration


async def test_a_fact_holding_every_word_of_the_task_comes_before_those_holding_one(harness: Harness) -> None:
    """Issue 32: a short task ("when do we deploy capybara") found facts that repeat one of its
    words ahead of the one fact that holds them all ("The capybara deploy window is …"), which the
    five places then left out. A fact is ranked by how many of the task's words it holds first."""
    await harness.start(build_projector)
    noise = [
        memory(f"deploy checklist {i}: deploy, verify the deploy, then deploy again", domain="ops")
        for i in range(MAX_FACTS + 2)
    ]
    window = memory("The capybara deploy window is Tuesday 10:00-12:00 UTC, nothing outside it", domain="ops")
    await given(harness, *noise, window)

    task = "when do we deploy capybara"
    p = await build_preamble(PostgresKnowledge(harness.pool), "acme", "ops-agent", task)
    assert p.facts[0] == f"- [ops] {window.payload.content}"
    assert len(p.facts) == MAX_FACTS  # the others still follow, by their rank
