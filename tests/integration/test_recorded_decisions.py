"""History does not depend on today's code: every value the projection applies was recorded in the
event where it was decided, so a release that changes a constant of the memory dynamics (the recall
boost, the half-life, the activation floor, the mention rate, the confidence cap, the veracity
weights, a fact's importance and salience) or the SQL decay function leaves every replay of the
events already stored — those of earlier releases and today's alike — byte-identical."""

from __future__ import annotations

import pytest

from noema.composition.replay import drop_schema, replay_into
from tests.conftest import Harness
from tests.integration.recorded_stream import CONSTANT_CHANGES, V1_STREAM, fresh_events, publish_recorded

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("change", sorted(CONSTANT_CHANGES))
async def test_replay_gives_the_state_that_was_held_whatever_todays_constants(
    harness: Harness, change: str
) -> None:
    await publish_recorded(harness, [*V1_STREAM, *await fresh_events()])
    url = harness.settings.database_url or ""
    before, after = (f"replay_{harness.settings.db_schema}_{side}" for side in ("before", "after"))
    try:
        held = await replay_into(harness.nc, url, harness.topology, before)
        with pytest.MonkeyPatch.context() as mp:
            CONSTANT_CHANGES[change](mp)
            replayed = await replay_into(harness.nc, url, harness.topology, after)
        assert replayed.events == held.events > len(V1_STREAM)
        assert replayed.checksum == held.checksum, f"changing the {change} changed history"
    finally:
        await drop_schema(url, before)
        await drop_schema(url, after)
