"""Recall stays fair while most memories still lack a vector (an embed backlog): the text match that
has no vector yet outranks a poorly matching memory that happens to have one, and says why."""

from __future__ import annotations

import pytest

from noema.ports import RecallFilters
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.integration.test_recall import EMBEDDER, UNRELATED, given, memory, recall_for

pytestmark = pytest.mark.integration

WITH_VECTORS = [
    "Deploys happen on Tuesdays",
    "nulbyte joined the team chat",
    "the cafeteria serves soup on Fridays",
]
"""The few memories the embed worker has reached: none is about the questions."""


async def test_a_text_match_without_a_vector_outranks_a_poor_match_with_one(harness: Harness) -> None:
    await harness.start(build_projector)
    embedded = await given(harness, *(memory(text) for text in WITH_VECTORS), embed=True)
    backups, outage, *_ = await given(
        harness,
        memory("the nightly database backups are copied to the Dublin bucket"),
        memory("the payments outage was caused by an expired certificate"),
        *(memory(text) for text in UNRELATED),
    )
    recall = await recall_for(harness, EMBEDDER)
    f = RecallFilters(workspace="acme")
    for query, relevant, mode in (
        ("database backups", backups, "hybrid"),
        ("why did the payments outage happen?", outage, "hybrid"),
        ("why did the payments outage happen?", outage, "semantic"),
    ):
        found = await recall.search(query, f, mode=mode)
        ids = [r.id for r in found.results]
        label = f"{mode}: {query}"
        assert ids[0] == relevant, label
        by_id = {r.id: r.components for r in found.results}
        assert by_id[relevant]["semantic_available"] == 0.0, label
        assert any(by_id[m]["semantic_available"] == 1.0 for m in embedded if m in by_id), label
        assert 0 < by_id[relevant]["semantic_coverage"] < 1, label
