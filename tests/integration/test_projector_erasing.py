"""The projector deletes the observations a recorded erasure names, and nothing else at the
sequences it gives (libs/noema/adapters/erased_observations.py): a forged or stale ``observation_seqs``
deletes no other observation, nor one of another workspace."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from nats.js.errors import NotFoundError

from noema.adapters.erased_observations import delete_erased_observations
from noema.ids import new_id
from noema_events import ContentErased, ContentErasedPayload
from tests.conftest import Harness

pytestmark = pytest.mark.integration


def _erasure(workspace: str, ids: list[str], seqs: list[int], target: str = "person:1") -> ContentErased:
    erasure_id = new_id()
    return ContentErased(
        id=erasure_id,
        workspace=workspace,
        mind="",
        occurred_at=datetime(2026, 3, 1, tzinfo=UTC),
        correlation_id=erasure_id,
        actor="operator:test",
        payload=ContentErasedPayload(
            erasure_id=erasure_id,
            scope="subject",
            target=target,
            reason="request 1",
            observation_ids=ids,
            observation_seqs=seqs,
        ),
    )


async def test_only_the_named_observations_of_the_erasures_workspace_are_deleted(harness: Harness) -> None:
    t, js = harness.topology, harness.js
    stream = t.observation_stream

    async def put(workspace: str, body: bytes) -> int:
        return (await js.publish(t.observation_subject(workspace, "ops"), body)).seq

    named = await put("acme", b'{"id": "obs-named", "payload": {"content": "x"}}')
    broken = await put("acme", b'{"broken": "names person:1')  # does not decode; names the subject
    other = await put("acme", b'{"id": "obs-other", "payload": {"content": "y"}}')
    elsewhere = await put("globex", b'{"id": "obs-named", "payload": {"content": "z"}}')

    erasure = _erasure("acme", ["obs-named"], [named, broken, other, elsewhere, 999_999])
    assert await delete_erased_observations(js, t, [erasure]) == 2

    for seq in (named, broken):
        with pytest.raises(NotFoundError):
            await js.get_msg(stream, seq)
    for seq in (other, elsewhere):
        assert (await js.get_msg(stream, seq)).seq == seq
    # Applying it again (a replay, a rerun) deletes nothing more and raises nothing.
    assert await delete_erased_observations(js, t, [erasure]) == 0
