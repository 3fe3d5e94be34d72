"""What the explorer reads besides the common reads, over the in-memory composition
(tests/unit/api_in_memory.py): ``after_seq`` refused when malformed or on a public read, and the
vocabulary. Moved from tests/integration/test_api_explorer.py with their assertions kept; the writes
that name their stream sequence, the reads that wait for it and the neighbourhood (a recursive query)
stay there, on the real servers."""

from __future__ import annotations

from typing import get_args

import httpx
import pytest

from noema_events.vocabulary import (
    CHANNEL_CREDIBILITY,
    EPISTEMIC_KINDS,
    MEMORY_KINDS,
    MEMORY_STATUSES,
    MEMORY_TYPES,
    RELATIONS,
    VERACITIES,
    Access,
)
from tests.unit.api_in_memory import InMemoryApi as ApiHarness
from tests.unit.api_in_memory import api

__all__ = ["api"]


def stored_seq(res: httpx.Response) -> int:
    """The stream sequence a write answered with."""
    assert res.status_code == 202, res.text
    return int(res.headers["noema-stream-seq"])


@pytest.mark.parametrize("value", ["-1", "x", "1.5", "", "9" * 30])
async def test_a_bad_after_seq_is_a_400_that_says_what_to_give(api: ApiHarness, value: str) -> None:
    res = await api.admin.get("/v1/memories", params={"after_seq": value})
    assert res.status_code == 400
    assert "after_seq must be one whole number" in res.json()["error"]


async def test_after_seq_is_only_for_authenticated_reads(api: ApiHarness) -> None:
    # Public endpoints take no after_seq (an anonymous caller cannot make the API wait).
    res = await api.anonymous.get("/healthz", params={"after_seq": "1"})
    assert res.status_code == 400
    assert "after_seq" in res.json()["error"]


async def test_the_vocabulary_is_the_event_catalogs_and_needs_no_token(api: ApiHarness) -> None:
    res = await api.anonymous.get("/v1/vocabulary")
    assert res.status_code == 200
    v = res.json()
    assert v["memory_kinds"] == list(MEMORY_KINDS)
    assert v["epistemic_kinds"] == list(EPISTEMIC_KINDS)
    assert v["memory_statuses"] == list(MEMORY_STATUSES)
    assert [t["name"] for t in v["memory_types"]] == list(MEMORY_TYPES)
    assert v["relations"] == list(RELATIONS)
    assert {c["name"]: c["credibility"] for c in v["channels"]} == CHANNEL_CREDIBILITY
    assert v["veracities"] == list(VERACITIES)
    assert v["access_levels"] == list(get_args(Access))
    assert v["access_modes"] == ["compatible", "strict"]
    assert "hybrid" in v["search_modes"]
