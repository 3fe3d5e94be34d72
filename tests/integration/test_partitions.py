"""Partitions by workspace on the real servers (issue 13): NATS stores each observation under the
partition Noema computes; two instances of attend (and of conflicts) share four partitions, one
owner each; every observation is decided once, each mind's in publish order; and when an instance's
session ends (as PostgreSQL ends it when its process dies) the other takes its partitions over
within seconds, while the former owner, fenced, publishes nothing more."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from typing import Any

import pytest
from nats.aio.msg import Msg

from noema.adapters.erasure_streams import find_observations
from noema.adapters.jetstream import ensure_streams, read_stream, stream_last_seq
from noema.adapters.postgres import create_pool
from noema.adapters.postgres.claims import AdvisoryClaim, AdvisoryPartitions, claim_key
from noema.adapters.pull import Puller, durable_puller
from noema.application.knowledge import Caller
from noema.client import build_observation, publish_observation, send_observation
from noema.composition.instance import connected_knowledge
from noema.runtime.claims import ClaimLost
from noema.runtime.partitions import PartitionedService
from noema.runtime.settings import Located
from noema.runtime.worker import ConsumerGap, PullWorker
from noema.topology import Topology
from noema_attend.service import build as build_attend
from noema_conflicts.service import build as build_conflicts
from noema_events import AttentionDecided, decode_event
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.support import assert_eventually

pytestmark = pytest.mark.integration

P = 4
TAKEOVER_S = 10.0
WORKSPACES = [f"tenant{i}" for i in range(12)]


def partitioned(harness: Harness) -> Located:
    return replace(harness.settings, partitions=P, attend_threshold=0.0, attend_capacity=10_000)


async def test_nats_stores_each_observation_under_the_partition_noema_computes(harness: Harness) -> None:
    t = Topology(harness.topology.prefix, P)
    await ensure_streams(harness.js, t, 120)
    sent = []
    for ws in [*WORKSPACES, "acme", "beta", "w1", "w2", "w3", "Team_9-x"]:
        await publish_observation(harness.js, f"hello from {ws}", workspace=ws, mind="ops", topology=t)
        sent.append(ws)
    stored = [
        m async for batch in read_stream(harness.nc, t.observation_stream, ">", 1, len(sent)) for m in batch
    ]
    assert [m.subject for m in stored] == [
        f"{t.prefix}.obs_part.{P}.{t.partition(ws)}.{ws}.ops" for ws in sent
    ]
    assert [t.published_subject(m.subject) for m in stored] == [
        t.observation_subject(ws, "ops") for ws in sent
    ]
    assert len({t.partition(ws) for ws in sent}) == P

    # Back to one partition: the stream's transform is removed, new observations stored as published.
    await ensure_streams(harness.js, harness.topology, 120)
    seq = await publish_observation(harness.js, "as published", workspace="acme", mind="ops", topology=t)
    assert (await harness.js.get_msg(t.observation_stream, seq)).subject == f"{t.prefix}.obs.acme.ops"


@dataclass
class Instance:
    """One in-process instance of a partitioned worker: its resources, its task."""

    service: PartitionedService
    task: asyncio.Task[None]
    stack: AsyncExitStack


@pytest.fixture
async def instances(harness: Harness) -> AsyncIterator[Callable[[Any], Any]]:
    started: list[Instance] = []

    async def start(build: Any) -> Instance:
        stack = AsyncExitStack()
        service = await build(partitioned(harness), stack)
        assert isinstance(service, PartitionedService)
        inst = Instance(service, asyncio.create_task(service.run(), name=service.name), stack)
        started.append(inst)
        return inst

    yield start
    for inst in started:
        inst.service.shutdown()
        if not inst.task.done():
            await asyncio.wait_for(inst.task, 30)  # a survivor's own failure fails the test
        await inst.stack.aclose()


async def balanced(a: Instance, b: Instance) -> bool:
    owned = a.service.owned, b.service.owned
    return len(owned[0]) == len(owned[1]) == P // 2 and not set(owned[0]) & set(owned[1])


async def end_sessions_of(harness: Harness, inst: Instance, worker: str) -> None:
    """End the instance's claim session as PostgreSQL does when its process dies."""
    pids = await harness.pool.fetch(
        "SELECT DISTINCT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2 "
        "AND classid = ((hashtext($1)::bigint + 4294967296) % 4294967296)::oid AND objid = ANY($2::bigint[])",
        claim_key(harness.settings.db_schema, worker),
        inst.service.owned,
    )
    assert len(pids) == 1, pids
    assert await harness.pool.fetchval("SELECT pg_terminate_backend($1)", pids[0]["pid"])


async def take_over(harness: Harness, dead: Instance, survivor: Instance, worker: str) -> float:
    """The dead instance's partitions are the survivor's within seconds; the dead one stops."""
    killed = time.monotonic()
    await end_sessions_of(harness, dead, worker)

    async def all_taken() -> bool:
        return survivor.service.owned == list(range(P))

    await assert_eventually(all_taken, TAKEOVER_S, 0.05, "the survivor owning every partition")
    took = time.monotonic() - killed
    with pytest.raises(ClaimLost):
        await asyncio.wait_for(dead.task, 30)
    return took


async def decisions(harness: Harness) -> list[tuple[int, AttentionDecided]]:
    t = harness.topology
    last = await stream_last_seq(harness.js, t.event_stream)
    found = []
    async for batch in read_stream(harness.nc, t.event_stream, t.event_subjects, 1, last):
        for m in batch:
            event = decode_event(m.data)
            if isinstance(event, AttentionDecided):
                found.append((m.metadata.sequence.stream, event))
    return found


async def test_two_attend_instances_share_the_partitions_decide_each_observation_once_in_order_and_take_over(
    harness: Harness, instances: Callable[[Any], Any]
) -> None:
    t = Topology(harness.topology.prefix, P)
    first: Instance = await instances(build_attend)

    async def all_first() -> bool:
        return first.service.owned == list(range(P))

    await assert_eventually(all_first, 20, 0.05, "the only instance owning every partition")
    second: Instance = await instances(build_attend)
    await assert_eventually(lambda: balanced(first, second), 20, 0.05, "two partitions each")

    order: dict[tuple[str, str], list[str]] = defaultdict(list)

    async def publish(count: int, offset: int) -> None:
        for i in range(offset, offset + count):
            ws, mind = WORKSPACES[i % len(WORKSPACES)], f"agent{i % 2}"
            obs = build_observation(f"obs {i} of {ws}", workspace=ws, mind=mind)
            await send_observation(harness.js, obs, topology=t)
            order[(ws, mind)].append(obs.id)

    await publish(240, 0)
    victim, survivor = (first, second) if 0 in first.service.owned else (second, first)
    publishing = asyncio.create_task(publish(240, 240))  # observations keep coming meanwhile
    took = await take_over(harness, victim, survivor, "attend")
    await publishing
    print(f"attend takeover_s={took:.2f}")

    async def all_decided() -> bool:
        return sum(len(e.payload.decisions) for _, e in await decisions(harness)) >= 480

    await assert_eventually(all_decided, 120, 0.5, "a decision for each of 480 observations")
    decided = await decisions(harness)
    by_mind: dict[tuple[str, str], list[str]] = defaultdict(list)
    for _, event in decided:
        by_mind[(event.workspace, event.mind)] += [d.candidate_id for d in event.payload.decisions]
    ids = [c for cs in by_mind.values() for c in cs]
    assert len(ids) == len(set(ids)) == 480, "an observation was decided twice (or not at all)"
    for key, published in order.items():
        assert by_mind[key] == published, f"{key}: decided out of publish order"
    # Each mind's decisions record the partition's progress: never backwards.
    marks: dict[tuple[str, str], int] = {}
    for _, event in decided:
        key = (event.workspace, event.mind)
        assert (event.payload.through_seq or 0) >= marks.get(key, 0)
        marks[key] = event.payload.through_seq or 0
    assert took <= TAKEOVER_S
    for consumer in (t.partitioned_durable("attend", p) for p in range(P)):
        info = await harness.js.consumer_info(t.observation_stream, consumer)
        assert info.num_pending == 0


async def test_two_conflicts_instances_share_the_partitions_and_every_race_has_one_winner(
    harness: Harness, instances: Callable[[Any], Any]
) -> None:
    settings = partitioned(harness)
    await harness.start(lambda _settings, stack: build_projector(settings, stack))
    first: Instance = await instances(build_conflicts)
    second: Instance = await instances(build_conflicts)
    await assert_eventually(lambda: balanced(first, second), 20, 0.05, "two partitions each")
    k = connected_knowledge(harness.pool, harness.nc, harness.topology)

    async def race(workspaces: list[str]) -> None:
        for ws in workspaces:
            caller = Caller(ws, "alice", "engineer")
            await k.propose_fact(caller, "ops", "deploy-day", "Deploys happen on Fridays")
            await k.propose_fact(caller, "ops", "deploy-day", "Deploys happen on Tuesdays")

    async def one_winner_each(workspaces: list[str]) -> bool:
        rows = await harness.pool.fetch(
            "SELECT workspace, count(*) FILTER (WHERE status = 'active') AS active FROM memories "
            "WHERE domain = 'ops' AND topic = 'deploy-day' AND workspace = ANY($1) GROUP BY workspace",
            workspaces,
        )
        return len(rows) == len(workspaces) and all(r["active"] == 1 for r in rows)

    await race(WORKSPACES[:6])
    await assert_eventually(lambda: one_winner_each(WORKSPACES[:6]), 60, 0.2, "one winner per workspace")
    victim, survivor = first, second
    took = await take_over(harness, victim, survivor, "conflicts")
    await race(WORKSPACES[6:])
    await assert_eventually(lambda: one_winner_each(WORKSPACES), 60, 0.2, "one winner per workspace after")

    async def recorded() -> int:
        sql = "SELECT count(*) FROM events WHERE type = 'conflict.recorded.v1'"
        return int(await harness.pool.fetchval(sql))

    # A settlement's supersession and its conflict.recorded are projected one after the other (the
    # winner shows before the record when the batch is published one by one): wait for the record.
    await assert_eventually(
        lambda: _at_least(recorded, len(WORKSPACES)), 30, 0.2, "a conflict recorded per workspace"
    )
    assert await recorded() == len(WORKSPACES)  # one per race, none twice
    print(f"conflicts takeover_s={took:.2f}")


async def test_turning_partitions_on_continues_from_the_unpartitioned_consumer_and_retires_it(
    harness: Harness, instances: Callable[[Any], Any]
) -> None:
    one = replace(partitioned(harness), partitions=1)
    t1, t4 = harness.topology, Topology(harness.topology.prefix, P)
    order: dict[tuple[str, str], list[str]] = defaultdict(list)

    async def publish(count: int, offset: int, topology: Topology) -> None:
        for i in range(offset, offset + count):
            ws, mind = WORKSPACES[i % len(WORKSPACES)], f"agent{i % 2}"
            obs = build_observation(f"obs {i} of {ws}", workspace=ws, mind=mind)
            await send_observation(harness.js, obs, topology=topology)
            order[(ws, mind)].append(obs.id)

    async def decided_count() -> int:
        return sum(len(e.payload.decisions) for _, e in await decisions(harness))

    single = await harness.start(lambda _settings, stack: build_attend(one, stack))
    await publish(100, 0, t1)
    await assert_eventually(lambda: _at_least(decided_count, 100), 60, 0.2, "100 decisions, unpartitioned")
    single.shutdown()
    [task] = [t for t in asyncio.all_tasks() if t.get_name() == "attend"]
    await asyncio.wait_for(task, 10)
    await publish(60, 100, t1)  # stored unpartitioned while no attend runs: the old consumer's backlog

    async def old_backlog() -> bool:
        info = await harness.js.consumer_info(t1.observation_stream, t1.durable("attend"))
        return bool(info.num_pending == 60)

    await assert_eventually(old_backlog, 10, 0.1, "60 observations waiting on the unpartitioned consumer")

    await instances(build_attend)  # NOEMA_PARTITIONS=4 from here on
    await instances(build_attend)
    await publish(100, 160, t4)
    await assert_eventually(lambda: _at_least(decided_count, 260), 120, 0.5, "260 decisions in all")

    by_mind: dict[tuple[str, str], list[str]] = defaultdict(list)
    for _, event in await decisions(harness):
        by_mind[(event.workspace, event.mind)] += [d.candidate_id for d in event.payload.decisions]
    assert by_mind == order, "an observation was decided twice, not at all, or out of its mind's order"

    async def retired() -> bool:
        # Two instances may still be balancing their partitions: an owner taking a partition over
        # deletes its consumer and re-creates it at its ack floor (noema.adapters.partition_consumers),
        # so a partition's consumer can be missing for a moment; the old one never comes back.
        names = {info.name for info in await harness.js.consumers_info(t1.observation_stream)}
        assert t1.durable("attend") not in names, "the old consumer is retired"
        return names == {t4.partitioned_durable("attend", p) for p in range(P)}

    await assert_eventually(retired, 30, 0.2, "each partition's consumer, and no other")


async def _at_least(count: Callable[[], Any], wanted: int) -> bool:
    return bool(await count() >= wanted)


class Idle:
    """A partition's worker that does nothing until shut down (only the claims are under test)."""

    def __init__(self) -> None:
        self._stop = asyncio.Event()

    async def run(self) -> None:
        await self._stop.wait()

    def shutdown(self) -> None:
        self._stop.set()


async def test_instances_of_two_partition_counts_never_work_at_once(harness: Harness) -> None:
    schema = harness.settings.db_schema
    pools = [
        await create_pool(
            harness.settings.database_url, schema, app=f"noema-test-{i}", min_size=1, max_size=2
        )
        for i in (1, 2, 3)
    ]
    try:
        unpartitioned = AdvisoryClaim(pools[0], schema, "attend", poll_s=0.1)
        assert await unpartitioned.acquire(asyncio.Event())

        async def idle(_: int) -> Idle:
            return Idle()

        claims = AdvisoryPartitions(pools[1], schema, "attend", P)
        partitioned = PartitionedService("attend", None, claims, P, idle, poll_s=0.1)  # type: ignore[arg-type]
        running = asyncio.create_task(partitioned.run())
        await asyncio.sleep(1.5)  # rounds enough to claim, were it allowed
        assert partitioned.owned == [], "a partitioned instance worked beside an unpartitioned owner"
        assert await claims.others() == 1

        await unpartitioned.release()  # the old instance is gone (a rollout replaced it)

        async def all_owned() -> bool:
            return partitioned.owned == list(range(P))

        await assert_eventually(all_owned, 10, 0.05, "the partitioned instance owning every partition")
        late = AdvisoryClaim(pools[2], schema, "attend", poll_s=0.1)
        stopping = asyncio.Event()
        waiting = asyncio.create_task(late.acquire(stopping))
        await asyncio.sleep(1.0)
        assert not waiting.done(), "an unpartitioned instance claimed beside partitioned ones"
        partitioned.shutdown()
        await asyncio.wait_for(running, 10)
        assert await asyncio.wait_for(waiting, 10), "nobody works once the partitioned instance left"
        await late.release()
    finally:
        for pool in pools:
            pool.terminate()


async def test_a_partition_worker_stops_on_a_gap_in_its_consumer_sequence(harness: Harness) -> None:
    """A former owner still connected takes messages from the consumer the new owner re-created
    under the same name: the new owner sees the gap (they would return only after the ack wait,
    behind later ones) and stops, to re-create the consumer at its ack floor."""
    t = harness.topology
    for i in range(6):
        await publish_observation(harness.js, f"note {i}", workspace="acme", mind="ops", topology=t)
    puller = await durable_puller(
        harness.nc,
        t.observation_stream,
        "gap_test",
        t.observation_subjects,
        2,
        ack_wait=60,
        max_ack_pending=10,
    )
    thief = await Puller(harness.nc, t.observation_stream, "gap_test", 2).start()

    class Acking:
        def __init__(self) -> None:
            self.seen: list[int] = []

        async def __call__(self, msgs: list[Msg]) -> None:
            if not self.seen:
                assert len(await thief.fetch(timeout=5)) == 2  # two deliveries go elsewhere
            self.seen.extend(m.metadata.sequence.consumer for m in msgs)
            for m in msgs:
                await m.ack()

        async def reject(self, msg: Msg, reason: str, kind: str) -> None:
            raise AssertionError(reason)

    handler = Acking()
    worker = PullWorker("gap", puller, handler, 2, contiguous=True)
    with pytest.raises(ConsumerGap, match="consumer delivery"):
        await asyncio.wait_for(worker.run(), 30)
    assert handler.seen[:2] == [1, 2]
    assert handler.seen == list(range(1, len(handler.seen) + 1)), "the worker handled past the gap"
    await thief.stop()


async def test_erasure_finds_a_workspaces_observations_stored_before_and_after_partitioning(
    harness: Harness,
) -> None:
    t1, t4 = harness.topology, Topology(harness.topology.prefix, P)
    ids = set()
    for topology in (t1, t4):  # unpartitioned, then partitioned (the stream's transform set)
        await ensure_streams(harness.js, topology, 120)
        for ws in ("acme", "globex"):
            obs = build_observation(f"a note of {ws}", workspace=ws, mind="ops")
            await send_observation(harness.js, obs, topology=topology)
            ids.add(obs.id)
    found = await find_observations(harness.nc, t4, "acme", None, ids)
    stored = [await harness.js.get_msg(t4.observation_stream, f.seq) for f in found]
    assert [m.subject for m in stored] == [
        t1.observation_subject("acme", "ops"),
        f"{t4.prefix}.obs_part.{P}.{t4.partition('acme')}.acme.ops",
    ]
