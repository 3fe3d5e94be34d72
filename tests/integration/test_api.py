"""The operator API over real NATS + PostgreSQL: what needs the servers (health and readiness, the read
model's position). Search against recall (over PostgreSQL under row-level security) and an operator
entry (through NATS and the projector) run over both compositions in tests/contract/test_api_reads.py;
every endpoint's other happy paths and refusals run over the in-memory composition in
tests/unit/test_api_in_memory.py."""

from __future__ import annotations

import pytest

from tests.integration.api_harness import ApiHarness, api, memory

pytestmark = pytest.mark.integration
__all__ = ["api"]  # the fixture, imported for pytest


async def test_health_and_readiness_answer_without_a_token(api: ApiHarness) -> None:
    assert (await api.anonymous.get("/healthz")).json() == {"status": "ok", "problems": []}
    ready = await api.anonymous.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["status"] == "ok"


async def test_replay_status_reports_position_and_lag(api: ApiHarness) -> None:
    await api.given(memory("one"), memory("two"))
    status = (await api.admin.get("/v1/replay/status")).json()
    assert status == {
        "projection": "read_model",
        "position": 2,
        "stream_last_seq": 2,
        "lag": 0,
        "caught_up": True,
    }
