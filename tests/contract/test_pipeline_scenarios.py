"""The pipeline's scenarios, each run twice: over the in-memory runner
(:class:`noema.composition.pipeline.InMemoryPipeline`: the workers' decisions over the in-memory
streams and read model, the fast tier) and over real NATS + PostgreSQL with the workers in their
consumers (marked ``integration``). Observations go in on the observation stream, facts through the
application's own operations; what comes out is read from the read model's ports.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from noema.application.access import Caller
from noema.application.knowledge import Knowledge
from noema.client import build_observation
from noema.composition.pipeline import InMemoryPipeline
from noema.domain.attention import memory_id_for
from noema.ports import EventSink, KnowledgeReadModel, MemoryReads
from noema.runtime.settings import Located
from noema_events import (
    ActivationDecayed,
    ObservationRecorded,
    RecallProposed,
    RelationshipAdded,
    decode_event,
    encode_event,
)
from noema_events.catalog import RelationshipAddedPayload
from tests.conftest import Harness
from tests.support import assert_eventually


class Fixed:
    """An embedder of constant vectors (the pipeline's plumbing, not a model)."""

    name = "fixed"
    dimensions = 3

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, 0.0, 0.0] for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        return [1.0, 0.0, 0.0]


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Pipeline:
    """One pipeline under test."""

    name: str
    knowledge: KnowledgeReadModel
    records: MemoryReads
    sink: EventSink
    observe: Callable[[ObservationRecorded], Awaitable[None]]
    settle: Callable[[Callable[[], Awaitable[bool]]], Awaitable[None]]
    """Return once the condition holds (in memory: after running every worker until idle)."""
    proposals: Callable[[], Awaitable[list[RecallProposed]]]
    """The recall proposals on the observation stream, in order."""
    decay: Callable[[datetime], Awaitable[ActivationDecayed]]
    """A decay tick as of the time given (aligned down to the hour), as the decay worker ticks it;
    returns the tick of workspace ``acme``."""
    skipped: Callable[[], Awaitable[dict[int, tuple[str, str]]]]
    """What the projector dead-lettered: event stream sequence → (reason, kind)."""
    position: Callable[[], Awaitable[int]]
    """The last event stream sequence the read model applied."""

    def operations(self) -> Knowledge:
        return Knowledge(self.knowledge, self.sink, _now)


@pytest.fixture(params=["memory", pytest.param("servers", marks=pytest.mark.integration)])
def servers_if_needed(request: pytest.FixtureRequest) -> Harness | None:
    if request.param == "memory":
        return None
    harness: Harness = request.getfixturevalue("harness")
    return harness


@pytest.fixture
async def pipeline(servers_if_needed: Harness | None) -> AsyncIterator[Pipeline]:
    if servers_if_needed is None:
        memory = InMemoryPipeline(embedder=Fixed())

        async def settled(check: Callable[[], Awaitable[bool]]) -> None:
            await memory.run()
            assert await check()

        async def proposed() -> list[RecallProposed]:
            return [ev for ev in memory.candidates if isinstance(ev, RecallProposed)]

        async def decay(at: datetime) -> ActivationDecayed:
            await memory.decay(at)
            return [ev for ev in memory.stream.events if isinstance(ev, ActivationDecayed)][-1]

        async def skipped() -> dict[int, tuple[str, str]]:
            return {d.seq: (d.reason, d.kind) for d in memory.dead_letters.letters}

        async def position() -> int:
            return memory.projecting.position

        yield Pipeline(
            "memory",
            memory.knowledge,
            memory.records,
            memory.stream,
            memory.observe,
            settled,
            proposed,
            decay,
            skipped,
            position,
        )
        return
    yield await _on_servers(servers_if_needed)


async def _on_servers(h: Harness) -> Pipeline:
    from noema.adapters.jetstream import EventPublisher, last_on_subject, read_stream, stream_last_seq
    from noema.adapters.postgres import MemoryQueries, ReadModelProjection
    from noema.adapters.postgres.knowledge import PostgresKnowledge
    from noema.runtime.wiring import sealer
    from noema_attend.service import build as build_attend
    from noema_conflicts.service import build as build_conflicts
    from noema_decay.service import DecayWorker
    from noema_embed.service import build as build_embed
    from noema_projector.service import build as build_projector
    from noema_retrieve.service import build as build_retrieve

    async def embed(settings: Located, stack: AsyncExitStack) -> Any:
        return await build_embed(settings, stack, Fixed())

    async def retrieve(settings: Located, stack: AsyncExitStack) -> Any:
        return await build_retrieve(settings, stack, Fixed())

    for build in (build_projector, build_attend, build_conflicts, embed, retrieve):
        await h.start(build)

    async def observe(obs: ObservationRecorded) -> None:
        subject = h.topology.observation_subject(obs.workspace, obs.mind)
        await h.js.publish(subject, encode_event(obs), headers={"Nats-Msg-Id": obs.id})

    async def eventually(check: Callable[[], Awaitable[bool]]) -> None:
        await assert_eventually(check)

    async def proposed() -> list[RecallProposed]:
        t = h.topology
        last = await stream_last_seq(h.js, t.observation_stream)
        out: list[RecallProposed] = []
        async for batch in read_stream(h.nc, t.observation_stream, t.observation_subjects, 1, last):
            out += [ev for ev in (decode_event(m.data) for m in batch) if isinstance(ev, RecallProposed)]
        return await sealer(h.pool).open(out)  # retrieve seals what it proposes (docs/privacy.md)

    async def decay(at: datetime) -> ActivationDecayed:
        await DecayWorker(
            MemoryQueries(h.pool), EventPublisher(h.nc, h.topology), 3600, clock=lambda: at
        ).tick()
        subject = h.topology.event_subject_for("acme", "", "activation.decayed")
        last = await last_on_subject(h.js, h.topology.event_stream, subject)
        assert last is not None
        tick = decode_event(last[1])
        assert isinstance(tick, ActivationDecayed)
        return tick

    async def skipped() -> dict[int, tuple[str, str]]:
        t = h.topology
        info = await h.js.stream_info(t.dead_letter_stream)
        out = {}
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            headers = dict((await h.js.get_msg(t.dead_letter_stream, seq)).headers or {})
            if headers["Noema-Source"] == "projector":
                out[int(headers["Noema-Original-Seq"])] = (
                    headers["Noema-Error"],
                    headers["Noema-Error-Kind"],
                )
        return out

    async def position() -> int:
        async with h.pool.acquire() as conn:
            return await ReadModelProjection().position(conn)

    return Pipeline(
        "servers",
        PostgresKnowledge(h.pool),
        MemoryQueries(h.pool),
        EventPublisher(h.nc, h.topology),
        observe,
        eventually,
        proposed,
        decay,
        skipped,
        position,
    )


def observation(content: str, n: int = 1, mind: str = "ops") -> ObservationRecorded:
    return build_observation(content, workspace="acme", mind=mind, observation_id=f"obs-{mind}-{n}")


async def test_an_observation_becomes_a_memory_with_its_origin_event(pipeline: Pipeline) -> None:
    obs = observation("the deploy key rotates on Fridays")
    await pipeline.observe(obs)
    memory_id = memory_id_for(obs.id)

    async def stored() -> bool:
        return await pipeline.records.get(memory_id) is not None

    await pipeline.settle(stored)
    detail = await pipeline.records.get(memory_id)
    assert detail is not None
    assert detail["content"] == "the deploy key rotates on Fridays"
    assert detail["origin"]["type"] == "memory.created.v1"
    assert detail["origin"]["id"] == detail["origin_event"]
    assert detail["origin"]["causation_id"] == detail["source_observation_ids"][0] == obs.id


async def test_an_observation_stored_twice_is_one_memory(pipeline: Pipeline) -> None:
    obs = observation("the staging database is restored every night at 03:00")
    await pipeline.observe(obs)
    await pipeline.observe(obs)  # a retried publish: the same id
    later = observation("the staging database lives in eu-west-1", n=2)
    await pipeline.observe(later)

    async def both() -> bool:
        return await pipeline.records.get(memory_id_for(later.id)) is not None

    await pipeline.settle(both)
    page = await pipeline.records.memory_workspaces()
    assert page == ["acme"]
    assert await pipeline.records.get(memory_id_for(obs.id)) is not None
    counted = [m for m in [await pipeline.records.memory(memory_id_for(o.id)) for o in (obs, later)] if m]
    assert len(counted) == 2


async def test_contradicting_facts_leave_one_winner_and_a_recorded_conflict(pipeline: Pipeline) -> None:
    alice = Caller("acme", "alice", "engineer")
    ops = pipeline.operations()
    await ops.propose_fact(alice, "ops", "deploy-day", "Deploys happen on Fridays")
    await ops.propose_fact(alice, "ops", "deploy-day", "Deploys happen on Tuesdays")

    async def settled() -> bool:
        return len(await pipeline.knowledge.list_conflicts("acme", None, None, 10)) == 1

    await pipeline.settle(settled)
    active = await pipeline.knowledge.list_facts(
        "acme",
        at=_now(),
        domain="ops",
        topic="deploy-day",
        include_inactive=False,
        readable=None,
        repo=None,
        limit=10,
    )
    assert [f["content"] for f in active] == ["Deploys happen on Tuesdays"]  # the newer statement wins


async def test_every_memory_and_fact_is_embedded(pipeline: Pipeline) -> None:
    texts = ["backups run at 02:00 from the primary", "the on-call rota changes on Mondays"]
    for n, text in enumerate(texts):
        await pipeline.observe(observation(text, n=n))
    await pipeline.operations().propose_fact(
        Caller("acme", "alice", "engineer"), "ops", "backups", "Backups are kept for 30 days"
    )

    async def embedded() -> bool:
        stored = await pipeline.records.get(memory_id_for("obs-ops-1")) is not None
        return stored and await pipeline.records.count_unembedded(Fixed.name) == 0

    await pipeline.settle(embedded)


async def test_a_past_memory_is_proposed_to_attention_for_a_related_observation(pipeline: Pipeline) -> None:
    first = observation("the deploy key rotates on Fridays")
    await pipeline.observe(first)

    async def remembered() -> bool:
        return await pipeline.records.get(memory_id_for(first.id)) is not None

    await pipeline.settle(remembered)
    question = observation("when does the deploy key rotate?", n=2)
    await pipeline.observe(question)

    async def proposed() -> bool:
        return any(p.payload.observation_id == question.id for p in await pipeline.proposals())

    await pipeline.settle(proposed)
    (proposal,) = [p for p in await pipeline.proposals() if p.payload.observation_id == question.id]
    assert proposal.payload.memory_id == memory_id_for(first.id)
    assert proposal.payload.content == "the deploy key rotates on Fridays"
    assert (proposal.workspace, proposal.mind, proposal.causation_id) == ("acme", "ops", question.id)


async def test_a_decay_tick_lists_a_fact_that_expired_in_its_interval(pipeline: Pipeline) -> None:
    tick_at = datetime.fromtimestamp((_now() + timedelta(days=2)).timestamp() // 3600 * 3600, UTC)
    alice = Caller("acme", "alice", "engineer")
    ops = pipeline.operations()
    expiring = await ops.propose_fact(
        alice, "ops", "freeze", "The release freeze holds", valid_until=tick_at - timedelta(minutes=30)
    )
    await ops.propose_fact(alice, "ops", "backups", "Backups are kept for 30 days")

    async def both() -> bool:
        facts = await pipeline.knowledge.list_facts(
            "acme",
            at=_now(),
            domain="ops",
            topic=None,
            include_inactive=False,
            readable=None,
            repo=None,
            limit=10,
        )
        return len(facts) == 2

    await pipeline.settle(both)
    tick = await pipeline.decay(tick_at + timedelta(minutes=10))
    assert tick.payload.tick_at == tick_at
    assert tick.payload.since == tick_at - timedelta(hours=1)
    assert tick.payload.expired == [expiring.memory_id]
    assert tick.payload.expired_total == 1


async def test_an_edge_the_read_model_refuses_is_dead_lettered_and_the_stream_after_it_projected(
    pipeline: Pipeline,
) -> None:
    ops, dev = (
        observation("the deploy key rotates on Fridays"),
        observation("builds run on arm64", mind="dev"),
    )
    for obs in (ops, dev):
        await pipeline.observe(obs)

    async def remembered() -> bool:
        return all([await pipeline.records.get(memory_id_for(o.id)) is not None for o in (ops, dev)])

    await pipeline.settle(remembered)
    # An edge stays within one mind (the foreign keys): one from an ops memory to a dev memory can
    # only be refused, and the projector goes on past it.
    edge = RelationshipAdded(
        id="edge-between-minds",
        workspace="acme",
        mind="ops",
        occurred_at=_now(),
        correlation_id="c-edge",
        actor="ops",
        payload=RelationshipAddedPayload(
            relationship_id="rel-between-minds",
            from_id=memory_id_for(ops.id),
            to_id=memory_id_for(dev.id),
            relation="supports",
        ),
    )
    edge_seq = await pipeline.sink.publish([edge])
    fact = await pipeline.operations().propose_fact(
        Caller("acme", "alice", "engineer"), "ops", "backups", "Backups are kept for 30 days"
    )

    async def past_it() -> bool:
        return await pipeline.records.get(fact.memory_id) is not None and edge_seq in await pipeline.skipped()

    await pipeline.settle(past_it)
    reason, kind = (await pipeline.skipped())[edge_seq]
    assert reason.startswith("refused by the"), reason
    assert kind == "invalid"
    assert await pipeline.position() > edge_seq
    assert (
        await pipeline.records.relationship(memory_id_for(ops.id), memory_id_for(dev.id), "supports") is None
    )
