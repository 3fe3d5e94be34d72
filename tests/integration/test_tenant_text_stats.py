"""Text statistics are per tenant: loading data into other workspaces leaves a workspace's recall as it was.

The semantic voice is not exercised here (no embedder, so semantic mode is text + nothing and hybrid
is text, graph and recency): what is under test are the word statistics that shape text ranking —
which words are too common to match on, BM25's document counts — not the vector index.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from noema.adapters.postgres.knowledge import PostgresKnowledge
from noema.application.preamble import build_preamble
from noema.ports import RecallFilters
from noema_events import MemoryCreated
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.integration.test_recall import NOW, given, memory, recall_for

pytestmark = pytest.mark.integration

ACME = [
    "Deploys happen on Tuesdays after the change review",
    "the deploy key rotates on Fridays",
    "billing deploys need a change ticket and a second reviewer",
    "the staging database is refreshed nightly",
    "Alice owns the billing service",
    "the vault holds the deploy key",
]

QUERIES = [
    ("keyword", "deploy key"),
    ("keyword", "billing deploy plan"),
    ("semantic", "deploy key"),
    ("hybrid", "deploy key"),
    ("hybrid", "plan the next deploy of billing"),
]

TASK = "plan the next deploy of billing"


def elsewhere(workspace: str, i: int) -> MemoryCreated:
    """A memory of another workspace, made of the words acme searches by."""
    event = memory(f"deploy note {i}: the billing deploy key was used for deploy plan {i}")
    return msgspec.structs.replace(event, workspace=workspace)


async def snapshot(h: Harness) -> dict[str, Any]:
    """acme's results (ids, scores, every component) for each query, and its preamble, from fresh caches."""
    recall = await recall_for(h)
    f = RecallFilters(workspace="acme")
    out: dict[str, Any] = {}
    for mode, query in QUERIES:
        response = await recall.search(query, f, mode=mode, now=NOW)
        out[f"{mode}:{query}"] = [(r.id, r.score, sorted(r.components.items())) for r in response.results]
    preamble = await build_preamble(PostgresKnowledge(h.pool), "acme", "ops-agent", TASK)
    out["preamble"] = preamble.text
    return out


async def test_loading_other_workspaces_leaves_a_workspace_results_scores_and_preamble_identical(
    harness: Harness,
) -> None:
    await harness.start(build_projector)
    await given(harness, *(memory(text) for text in ACME))
    before = await snapshot(harness)
    assert before["keyword:deploy key"], "acme's deploy memories match its query"
    assert "billing deploys need a change ticket" in before["preamble"]

    # Thousands of memories made of the same words, in two other workspaces.
    for workspace in ("globex", "initech"):
        await given(harness, *(elsewhere(workspace, i) for i in range(1500)))
    # PostgreSQL's own statistics catch up with the load (as autovacuum would).
    await harness.pool.execute("ANALYZE memories")

    after = await snapshot(harness)
    assert after == before


RECOUNT = """SELECT m.workspace, u.lexeme, count(*)::int AS memories FROM memories m, unnest(m.search) u
             GROUP BY 1, 2 ORDER BY 1, 2"""
COUNTS = "SELECT workspace, lexeme, memories FROM memory_terms WHERE memories > 0 ORDER BY 1, 2"


async def test_word_counts_stay_exact_through_inserts_edits_moves_and_deletes(harness: Harness) -> None:
    await harness.start(build_projector)
    first, second, third = await given(harness, *(memory(text) for text in ACME[:3]))
    assert [tuple(r) for r in await harness.pool.fetch(COUNTS)] == [
        tuple(r) for r in await harness.pool.fetch(RECOUNT)
    ]
    await harness.pool.execute("UPDATE memories SET content = 'the vault was resealed' WHERE id = $1", first)
    await harness.pool.execute("UPDATE memories SET workspace = 'globex' WHERE id = $1", second)
    await harness.pool.execute("UPDATE memories SET activation = 0.5 WHERE id = $1", third)  # no word change
    await harness.pool.execute("DELETE FROM memories WHERE id = $1", third)
    assert [tuple(r) for r in await harness.pool.fetch(COUNTS)] == [
        tuple(r) for r in await harness.pool.fetch(RECOUNT)
    ]
