"""The audit questions on real servers, through the operator API and ``noemactl`` alike: ``why`` on a
memory attend made shows the observation behind it and its later recall, with attend and retrieve
running. ``why`` on a superseded fact, ``audit diff`` and the refusals of both run over the in-memory
composition in tests/unit/test_audit_questions_api_in_memory.py."""

from __future__ import annotations

from typing import Any

import pytest

from noema.client import publish_observation
from noema.domain.attention import memory_id_for
from noema.ids import new_id
from noema_attend.service import build as build_attend
from noema_retrieve.service import build as build_retrieve
from tests.integration.api_harness import ApiHarness, api
from tests.integration.cli_process import ctl
from tests.support import assert_eventually

pytestmark = [pytest.mark.integration, pytest.mark.slow]
__all__ = ["api"]


async def _ok(response: Any) -> Any:
    assert response.status_code in (200, 202), response.text
    return response.json()


def _of_type(why: dict[str, Any], event_type: str) -> list[dict[str, Any]]:
    return [s for s in why["steps"] if s["event"] and s["event"]["type"] == event_type]


async def test_why_a_memory_shows_its_observation_and_its_later_recall(api: ApiHarness) -> None:
    await api.h.start(build_attend)
    observation = new_id()
    await publish_observation(
        api.h.js, "the deploy key rotates on Fridays", workspace="acme", mind="ops",
        observation_id=observation, topology=api.h.topology,
    )  # fmt: skip
    key = memory_id_for(observation)
    await assert_eventually(lambda: api.h.pool.fetchval("SELECT count(*) FROM memories WHERE id = $1", key))
    await api.h.start(build_retrieve)
    await publish_observation(
        api.h.js,
        "who rotates the deploy key this Friday?",
        workspace="acme",
        mind="ops",
        topology=api.h.topology,
    )
    await assert_eventually(
        lambda: api.h.pool.fetchval("SELECT recall_count = 1 FROM memories WHERE id = $1", key), timeout=30
    )
    await api.caught_up()

    why = await _ok(await api.admin.get(f"/v1/why/{key}", params={"workspace": "acme"}))

    assert why["subject"] == "memory"
    steps = {s["id"]: s for s in why["steps"]}
    origin = steps[observation]
    assert (origin["kind"], origin["parent"], origin["event"]) == ("observation", None, None)
    assert origin["decision"]["admitted"] is True
    assert {"salience", "novelty", "credibility"} <= set(origin["decision"]["components"])
    [created] = _of_type(why, "memory.created.v1")
    assert created["parent"] == observation
    [recalled] = _of_type(why, "memory.retrieved.v2")
    proposal = steps[recalled["parent"]]
    assert proposal["kind"] == "recall"
    assert proposal["decision"]["candidate_kind"] == "recall"
    assert proposal["decision"]["admitted"] is True
    assert recalled["event"]["payload"]["components"]["lexical_rank"] == 1
    order = [s["id"] for s in why["steps"]]
    assert order.index(observation) < order.index(created["id"]) < order.index(recalled["id"])

    shown = await ctl(api, "why", key)
    assert shown.code == 0, shown.stderr
    for part in (
        f"observation (on the observation stream) {observation}",
        "attention: admitted · score",
        "recall proposal (on the observation stream)",
        "memory.retrieved.v2 · attend",
        "lexical_rank=1",
    ):
        assert part in shown.stdout, part
