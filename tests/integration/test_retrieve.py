"""Recall candidates compete in attention: an admitted recall reinforces the memory, explained."""

from __future__ import annotations

import math

import pytest

from noema.adapters.embedders import create_embedder
from noema.adapters.postgres.recall import RecallStore
from noema.client import publish_observation
from noema.domain.attention import memory_id_for
from noema.domain.dynamics import decay_activation, reinforce_activation
from noema.ids import new_id
from noema.recall import Recall
from noema_attend.service import build as build_attend
from noema_events import RecallProposed, decode_event
from noema_projector.service import build as build_projector
from noema_retrieve.service import MIN_SCORE, RetrieveHandler
from noema_retrieve.service import build as build_retrieve
from tests.conftest import Harness
from tests.support import assert_eventually

pytestmark = pytest.mark.integration


async def test_a_new_observation_recalls_and_reinforces_a_related_memory(harness: Harness) -> None:
    await harness.start(build_attend)
    await harness.start(build_projector)
    first = new_id()
    await publish_observation(
        harness.js,
        "the deploy key rotates on Fridays",
        workspace="acme",
        mind="ops",
        observation_id=first,
        topology=harness.topology,
    )
    key = memory_id_for(first)
    await assert_eventually(lambda: harness.pool.fetchval("SELECT count(*) FROM memories WHERE id = $1", key))
    before = await harness.pool.fetchrow(
        "SELECT activation, activation_at, importance FROM memories WHERE id = $1", key
    )

    await harness.start(build_retrieve)
    await publish_observation(
        harness.js,
        "who rotates the deploy key this Friday?",
        workspace="acme",
        mind="ops",
        topology=harness.topology,
    )

    async def reinforced() -> bool:
        return await harness.pool.fetchval("SELECT recall_count FROM memories WHERE id = $1", key) == 1

    await assert_eventually(reinforced, timeout=30)
    after = await harness.pool.fetchrow("SELECT activation, activation_at FROM memories WHERE id = $1", key)
    days = (after["activation_at"] - before["activation_at"]).total_seconds() / 86400
    decayed = decay_activation(before["activation"], days, before["importance"])
    assert math.isclose(after["activation"], reinforce_activation(decayed), rel_tol=1e-12)
    assert after["activation"] > decayed
    retrieved = await harness.pool.fetchrow(
        "SELECT payload FROM events WHERE type = 'memory.retrieved.v1' AND payload->>'memory_id' = $1", key
    )
    import json

    payload = json.loads(retrieved["payload"])
    # Found by the text voice, first (the new observation's own memory is never a candidate).
    assert payload["components"]["lexical_rank"] == 1
    assert payload["components"]["final"] > 0
    assert "attention_salience" in payload["components"]
    decisions = await harness.pool.fetch(
        "SELECT d FROM events e, jsonb_array_elements(e.payload->'decisions') d "
        "WHERE e.type = 'attention.decided.v1' AND d->>'candidate_kind' = 'recall'"
    )
    assert len(decisions) == 1
    assert json.loads(decisions[0]["d"])["memory_id"] == key


async def test_the_observations_own_memory_neither_appears_nor_pushes_recalls_down(harness: Harness) -> None:
    """Whether or not the new observation is already projected, the older memory is proposed."""
    await harness.start(build_attend)
    await harness.start(build_projector)
    older, newer = new_id(), new_id()
    for text, oid in (
        ("the deploy key rotates on Fridays", older),
        ("who rotates the deploy key this Friday, and which vault holds it?", newer),
    ):
        await publish_observation(
            harness.js, text, workspace="acme", mind="ops", observation_id=oid, topology=harness.topology
        )
    for oid in (older, newer):
        await assert_eventually(
            lambda oid=oid: harness.pool.fetchval(
                "SELECT count(*) FROM memories WHERE id = $1", memory_id_for(oid)
            )
        )
    # The retrieve handler meets the newer observation after its memory is projected (the race that
    # used to rank the observation's own memory first and the older one below the proposal floor).
    recall = Recall(await RecallStore.open(harness.pool), create_embedder(harness.settings.embedder))
    sub = await harness.js.pull_subscribe(
        harness.topology.observations_only, durable=None, stream=harness.topology.observation_stream
    )
    msgs = [m for m in await sub.fetch(2, timeout=5) if newer.encode() in m.data]
    assert len(msgs) == 1
    proposals = await harness.js.subscribe(harness.topology.recall_subject("acme", "ops"))
    await RetrieveHandler(harness.nc, recall, harness.topology)(msgs)
    proposed = decode_event((await proposals.next_msg(timeout=5)).data)
    assert isinstance(proposed, RecallProposed)
    assert proposed.payload.memory_id == memory_id_for(older)
    assert proposed.payload.score >= MIN_SCORE
    assert proposed.payload.components["lexical_rank"] == 1  # the observation's own memory was no rival
