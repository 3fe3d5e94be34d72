"""The preamble's facts in a small tenant of a large shared store are matched one by one, never
through the facts' full-text index, which lists a word's facts in every workspace (a word rare in
the tenant and common in the store cost 24 ms of a 2 ms preamble at 1,000,000 memories spread over
1,000 workspaces: docs/benchmarks.md)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from noema.adapters.postgres import knowledge
from noema.adapters.postgres.knowledge import SMALL_FACT_SCOPE, PostgresKnowledge, facts_sql
from tests.conftest import Harness

pytestmark = pytest.mark.integration

NOW = datetime(2026, 12, 7, tzinfo=UTC)


async def _facts(harness: Harness, workspace: str, n: int, holding: int) -> None:
    """``n`` facts in ``workspace``, the first ``holding`` of them about capybaras."""
    await harness.pool.execute(
        """INSERT INTO memories (id, workspace, mind, kind, epistemic_kind, content, memory_type,
               confidence, importance, salience, credibility, activation, activation_at, status,
               origin_event, origin_seq, created_at, updated_at)
           SELECT $1 || g, $1, 'm', 'semantic', 'fact',
                  CASE WHEN g <= $3 THEN 'the capybara deploy window ' || g ELSE 'the billing port ' || g END,
                  'fact', 0.99, 0.5, 0.5, 0.8, 1.0, $4, 'active', 'e', g, $4, $4
           FROM generate_series(1, $2) g""",
        workspace,
        n,
        holding,
        NOW,
    )


def _index_names(plan: dict[str, Any]) -> set[str]:
    names = {plan["Index Name"]} if "Index Name" in plan else set()
    for child in plan.get("Plans", []):
        names |= _index_names(child)
    return names


async def test_a_small_tenants_facts_are_matched_one_by_one_and_a_large_ones_through_the_index(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _facts(harness, "crowd", 6000, 6000)  # the store: capybaras everywhere
    await _facts(harness, "tenant", 300, 3)  # a small tenant: three of its facts
    await harness.pool.execute("ANALYZE memories")
    args = ("tenant", "'capybara'", None, 5, None, NOW, ["'capybara'"])
    whole = await harness.pool.fetch(facts_sql(read_whole=True), *args)
    indexed = await harness.pool.fetch(facts_sql(read_whole=False), *args)
    assert [tuple(r) for r in whole] == [tuple(r) for r in indexed]
    assert sorted(r["content"] for r in whole) == [f"the capybara deploy window {i}" for i in (1, 2, 3)]
    text = await harness.pool.fetchval("EXPLAIN (FORMAT JSON) " + facts_sql(read_whole=True), *args)
    plan = (json.loads(text) if isinstance(text, str) else text)[0]["Plan"]
    assert "memories_fact_search" not in _index_names(plan)

    chosen: list[bool] = []

    def spy(read_whole: bool) -> str:
        chosen.append(read_whole)
        return facts_sql(read_whole)

    monkeypatch.setattr(knowledge, "facts_sql", spy)
    reads = PostgresKnowledge(harness.pool)
    small = await reads.preamble_parts(
        "tenant", "agent", "the capybara window", repo=None, readable=None, at=NOW, max_facts=5
    )
    assert sorted(content for _, content in small.facts) == [
        f"the capybara deploy window {i}" for i in (1, 2, 3)
    ]
    await _facts(harness, "large", SMALL_FACT_SCOPE + 1, 2)
    await reads.preamble_parts(
        "large", "agent", "the capybara window", repo=None, readable=None, at=NOW, max_facts=5
    )
    assert chosen == [True, False]
