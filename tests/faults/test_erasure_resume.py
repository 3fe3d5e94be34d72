"""An erasure cut short after recording itself (NATS lost while it deleted the observations: the
process could as well have been killed there) says so with a 503, and running it again finishes it:
the observations deleted, the keys destroyed, the read model blank, a replay still matching."""

from __future__ import annotations

from typing import Any

import nats.errors
import pytest

from noema.adapters.erasure_streams import delete_messages
from noema.domain.attention import memory_id_for
from noema_attend.service import build as build_attend
from tests.integration.api_harness import ApiHarness, api
from tests.integration.cli_process import ctl
from tests.integration.test_erasure import MARKER, PERSON, _memory_count, _stream_holds, observe_the_person
from tests.support import assert_eventually

pytestmark = [pytest.mark.integration, pytest.mark.slow]
__all__ = ["api"]


async def test_an_erasure_cut_short_is_finished_by_running_it_again(
    api: ApiHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = api.h
    await h.start(build_attend)
    memory = memory_id_for(await observe_the_person(api))
    await assert_eventually(lambda: _memory_count(api, "id = $1", memory), timeout=90)
    observations = h.topology.observation_stream, h.topology.observation_subjects
    assert await _stream_holds(api, *observations, MARKER.encode()) == 1

    async def connection_lost(*_: Any) -> int:
        raise nats.errors.ConnectionClosedError

    monkeypatch.setattr("noema.composition.erasure.delete_messages", connection_lost)
    body = {"workspace": "acme", "scope": "subject", "target": PERSON, "reason": "GDPR request 812"}

    cut = await api.admin.post("/v1/erasures", json=body)

    assert cut.status_code == 503, cut.text
    assert "Traceback" not in cut.text
    assert await _stream_holds(api, *observations, MARKER.encode()) == 1  # not deleted yet
    await api.caught_up()  # what was recorded is applied anyway: the keys are gone
    assert await _memory_count(api, "id = $1 AND content = '' AND erased_at IS NOT NULL", memory) == 1

    monkeypatch.setattr("noema.composition.erasure.delete_messages", delete_messages)
    again = await api.admin.post("/v1/erasures", json=body)

    assert again.status_code == 200, again.text
    assert again.json()["observations_deleted"] == 1
    assert again.json()["keys_destroyed"] is True
    assert await _stream_holds(api, *observations, MARKER.encode()) == 0
    records = await h.pool.fetchval("SELECT count(*) FROM events WHERE type = 'content.erased.v1'")
    assert records == 2  # both attempts are on record
    replayed = await ctl(api, "replay")
    assert replayed.code == 0, replayed.stdout + replayed.stderr
