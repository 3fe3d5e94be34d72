"""Recall candidates compete in attention: an admitted recall reinforces the memory, explained."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import asyncpg
import msgspec
import pytest
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from noema.adapters.embedders import create_embedder
from noema.adapters.postgres.voices import RecallStore
from noema.adapters.pull import Puller
from noema.application.search import Recall, SearchResponse
from noema.client import InvalidObservation, build_observation, publish_observation
from noema.domain.attention import memory_id_for
from noema.domain.dynamics import (
    ACTIVATION_FLOOR,
    HALF_LIFE_DAYS,
    RECALL_BOOST,
    decay_activation,
    reinforce_activation,
)
from noema.ids import new_id
from noema.ports import RecallFilters
from noema.runtime.worker import PullWorker
from noema_attend.service import build as build_attend
from noema_events import RecallProposed, decode_event, encode_event
from noema_projector.service import build as build_projector
from noema_retrieve.service import MIN_SCORE, RetrieveHandler
from noema_retrieve.service import build as build_retrieve
from tests.conftest import Harness
from tests.support import assert_eventually

pytestmark = pytest.mark.integration


async def remembered(h: Harness, text: str) -> str:
    """Observe ``text`` (attend and the projector running); returns its memory's id once projected."""
    observation = new_id()
    await publish_observation(
        h.js, text, workspace="acme", mind="ops", observation_id=observation, topology=h.topology
    )
    key = memory_id_for(observation)
    await assert_eventually(lambda: h.pool.fetchval("SELECT count(*) FROM memories WHERE id = $1", key))
    return key


async def ask_and_await_reinforcement(h: Harness, key: str) -> None:
    """Observe a question about the deploy key; returns once ``key`` was recalled and reinforced."""
    await publish_observation(
        h.js, "who rotates the deploy key this Friday?", workspace="acme", mind="ops", topology=h.topology
    )

    async def reinforced() -> bool:
        count: int = await h.pool.fetchval("SELECT recall_count FROM memories WHERE id = $1", key)
        return count == 1

    await assert_eventually(reinforced, timeout=30)


async def test_a_new_observation_recalls_and_reinforces_a_related_memory(harness: Harness) -> None:
    await harness.start(build_attend)
    await harness.start(build_projector)
    key = await remembered(harness, "the deploy key rotates on Fridays")
    before = await harness.pool.fetchrow(
        "SELECT activation, activation_at, importance FROM memories WHERE id = $1", key
    )

    await harness.start(build_retrieve)
    await ask_and_await_reinforcement(harness, key)
    after = await harness.pool.fetchrow("SELECT activation, activation_at FROM memories WHERE id = $1", key)
    days = (after["activation_at"] - before["activation_at"]).total_seconds() / 86400
    decayed = decay_activation(before["activation"], days, before["importance"])
    assert math.isclose(after["activation"], reinforce_activation(decayed), rel_tol=1e-12)
    assert after["activation"] > decayed
    retrieved = await harness.pool.fetchrow(
        "SELECT payload FROM events WHERE type = 'memory.retrieved.v2' AND payload->>'memory_id' = $1", key
    )
    import json

    payload = json.loads(retrieved["payload"])
    # Found by the text voice, first (the new observation's own memory is never a candidate).
    assert payload["components"]["lexical_rank"] == 1
    assert payload["components"]["final"] > 0
    assert "attention_salience" in payload["components"]
    # The reinforcement it decided, as applied above.
    assert (payload["boost"], payload["half_life_days"], payload["activation_floor"]) == (
        RECALL_BOOST,
        HALF_LIFE_DAYS,
        ACTIVATION_FLOOR,
    )
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
            lambda oid=oid: harness.pool.fetchval(  # type: ignore[misc]
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
    assert proposed.payload.content == "the deploy key rotates on Fridays"  # what attention weighs
    assert proposed.payload.query.startswith("who rotates the deploy key this Friday")
    assert proposed.payload.score >= MIN_SCORE
    assert proposed.payload.components["lexical_rank"] == 1  # the observation's own memory was no rival


def blank_observation() -> tuple[str, bytes]:
    """An observation of whitespace only, as a client that skips validation would publish it."""
    raw = msgspec.json.decode(encode_event(build_observation("placeholder", workspace="acme", mind="ops")))
    raw["payload"]["content"] = " \n\t "
    return raw["id"], msgspec.json.encode(raw)


async def test_a_blank_observation_is_dead_lettered_and_recall_goes_on_for_the_next(harness: Harness) -> None:
    await harness.start(build_attend)
    await harness.start(build_projector)
    key = await remembered(harness, "the deploy key rotates on Fridays")
    await harness.start(build_retrieve)  # (its teardown fails the test if the worker died)

    blank_id, blank = blank_observation()
    await harness.js.publish(
        harness.topology.observation_subject("acme", "ops"), blank, headers={"Nats-Msg-Id": blank_id}
    )
    with pytest.raises(InvalidObservation, match="content"):
        await publish_observation(harness.js, "   ", workspace="acme", mind="ops", topology=harness.topology)
    await ask_and_await_reinforcement(harness, key)
    dlq = await harness.js.pull_subscribe(
        harness.topology.dead_letter_subject("attend"), stream=harness.topology.dead_letter_stream
    )
    [rejected] = await dlq.fetch(1, timeout=5)
    assert rejected.data == blank
    assert "payload.content" in (rejected.headers or {})["Noema-Error"]
    assert await harness.pool.fetchval("SELECT count(*) FROM memories") == 2  # the blank one is no memory


async def _all_acked(sub: Any) -> bool:
    return bool((await sub.consumer_info()).num_ack_pending == 0)


class RecallThatFailsFor(Recall):
    """Recall that cannot answer one text. Once the catalog refuses blank observations, no real
    observation is known to fail recall; this keeps the handler's guarantee tested all the same."""

    def __init__(self, recall: Recall, text: str, error: Exception) -> None:
        super().__init__(recall.store, recall.embedder)
        self.text, self.error = text, error

    async def search(self, query: str, filters: RecallFilters, **kwargs: Any) -> SearchResponse:
        if query == self.text:
            raise self.error
        return await super().search(query, filters, **kwargs)


async def test_one_observation_whose_recall_keeps_failing_is_dead_lettered_and_the_others_go_on(
    harness: Harness,
) -> None:
    await harness.start(build_attend)
    await harness.start(build_projector)
    older = new_id()
    texts = ("the deploy key rotates on Fridays", "this one breaks recall", "who rotates the deploy key?")
    for text in texts:
        await publish_observation(
            harness.js,
            text,
            workspace="acme",
            mind="ops",
            observation_id=older if text == texts[0] else None,
            topology=harness.topology,
        )
    await assert_eventually(
        lambda: harness.pool.fetchval("SELECT count(*) = 3 FROM memories WHERE mind = 'ops'")
    )
    real = Recall(await RecallStore.open(harness.pool), None)
    proposals = await harness.js.subscribe(harness.topology.recall_subject("acme", "ops"))

    async def run(recall: Recall, durable: str) -> PullWorker:
        await harness.js.add_consumer(
            harness.topology.observation_stream,
            ConsumerConfig(
                durable_name=durable,
                ack_policy=AckPolicy.EXPLICIT,
                deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                opt_start_seq=2,  # the breaking observation and the question
                filter_subject=harness.topology.observations_only,
                ack_wait=30,
            ),
        )
        puller = await Puller(harness.nc, harness.topology.observation_stream, durable, 8).start()
        handler = RetrieveHandler(harness.nc, recall, harness.topology)
        worker = PullWorker("retrieve", puller, handler, 8, max_attempts=3, backoff_base=0.01)
        harness.stack.push_async_callback(_stopped, worker, asyncio.create_task(worker.run()))
        return worker

    # Lost or restarting servers are no one observation's fault: retried, never dead-lettered.
    outage = asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator command")
    down = await run(RecallThatFailsFor(real, texts[1], outage), "outage")
    await assert_eventually(lambda: _transient(down))
    dlq_info = await harness.js.stream_info(harness.topology.dead_letter_stream)
    assert dlq_info.state.messages == 0

    broken = RecallThatFailsFor(real, texts[1], RuntimeError("recall broke"))
    await run(broken, "broken")
    proposed = decode_event((await proposals.next_msg(timeout=10)).data)
    assert isinstance(proposed, RecallProposed)
    assert proposed.payload.memory_id == memory_id_for(older)
    dlq = await harness.js.pull_subscribe(
        harness.topology.dead_letter_subject("retrieve"), stream=harness.topology.dead_letter_stream
    )
    [skipped] = await dlq.fetch(1, timeout=10)
    headers = skipped.headers or {}
    assert decode_event(skipped.data).payload.content == texts[1]  # type: ignore[attr-defined]
    assert headers["Noema-Error"] == "handling failed 3 times: RuntimeError: recall broke"
    assert headers["Noema-Error-Kind"] == "failed"
    assert headers["Noema-Source"] == "retrieve"
    info = await harness.js.consumer_info(harness.topology.observation_stream, "broken")
    assert info.num_ack_pending == 0
    assert info.num_pending == 0


async def _transient(worker: PullWorker) -> bool:
    return bool(worker.last_error and worker.last_error.startswith("AdminShutdownError"))


async def _stopped(worker: PullWorker, task: asyncio.Task[None]) -> None:
    worker.shutdown()
    await asyncio.wait_for(task, 10)
