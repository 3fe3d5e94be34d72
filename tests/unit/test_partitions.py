"""Partitions by workspace: the partition function agrees with NATS's, the subjects and consumer
names a partition count implies, and how instances share the partitions (balance, takeover)."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from noema.runtime.claims import ClaimLost
from noema.runtime.partitions import PartitionedService, claim_order, fair_share
from noema.runtime.settings import Settings, SettingsError
from noema.runtime.worker import ConsumerGap
from noema.topology import Topology, partition_of

# What nats-server 2.15.1 stored for `noema.obs.<ws>.m1` under the transform
# `noema.obs.*.>` -> `noema.obsp.{{partition(4,1)}}.{{wildcard(1)}}.>` (run by hand; the integration
# test tests/integration/test_partitions.py checks the same against the server on every run).
SERVER_SAID = {"acme": 3, "beta": 3, "w1": 1, "w2": 0, "w3": 3}


def test_the_partition_of_a_workspace_is_the_one_nats_computes() -> None:
    assert {ws: partition_of(ws, 4) for ws in SERVER_SAID} == SERVER_SAID


def test_the_partition_function_is_32_bit_fnv_1a_of_the_utf8_token() -> None:
    # FNV-1a reference values (the function Go's hash/fnv New32a computes).
    assert partition_of("", 2**32) == 0x811C9DC5
    assert partition_of("a", 2**32) == 0xE40C292C
    assert partition_of("foobar", 2**32) == 0xBF9CF968


def test_workspaces_spread_over_every_partition() -> None:
    counts = [0] * 8
    for i in range(800):
        counts[partition_of(f"tenant-{i}", 8)] += 1
    assert all(60 <= c <= 140 for c in counts), counts


def test_one_partition_changes_no_subject_and_no_consumer_name() -> None:
    t = Topology("noema")
    assert not t.partitioned
    assert t.observation_transform is None
    assert t.partitioned_durable("attend", 0) == t.durable("attend") == "noema_attend"
    assert t.partition("acme") == 0
    assert t.stored_observations_only == "noema.obs.*.*"
    assert t.published_subject("noema.obs.acme.ops") == "noema.obs.acme.ops"


def test_partitioned_observations_are_stored_under_the_count_and_the_partition() -> None:
    t = Topology("noema", 4)
    assert t.observation_transform == (
        "noema.obs.*.>",
        "noema.obs_part.4.{{partition(4,1)}}.{{wildcard(1)}}.>",
    )
    assert t.partition_observations(3) == "noema.obs_part.4.3.>"
    stored = "noema.obs_part.4.3.acme.ops.recall"
    assert t.published_subject(stored) == t.recall_subject("acme", "ops")
    assert t.published_subject("noema.obs_part.4.3.acme.ops") == t.observation_subject("acme", "ops")
    assert t.workspace_of_subject(stored) == "acme"
    assert t.workspace_of_subject("noema.evt.acme._.fact_proposed") == "acme"
    assert t.workspace_of_subject("noema.dlq.attend") is None
    assert t.stored_observations_only == ["noema.obs.*.*", "noema.obs_part.*.*.*.*"]


def test_each_partition_count_has_consumers_of_its_own() -> None:
    t = Topology("noema", 4)
    assert [t.partitioned_durable("attend", p) for p in range(2)] == ["noema_attend_4_0", "noema_attend_4_1"]
    assert t.layout_of_durable("attend", "noema_attend") == 1
    assert t.layout_of_durable("attend", "noema_attend_4_1") == 4
    assert t.layout_of_durable("attend", "noema_attend_8_7") == 8
    assert t.layout_of_durable("attend", "noema_retrieve") is None
    assert t.layout_of_durable("attend", "noema_attend_x") is None
    assert t.stored_observation_subjects(1) == "noema.obs.>"
    assert t.stored_observation_subjects(8) == "noema.obs_part.8.>"


def test_the_partition_count_is_a_setting_that_fails_fast() -> None:
    assert Settings.from_env({}).partitions == 1
    settings = Settings.from_env({"NOEMA_PARTITIONS": "4"})
    assert settings.topology == Topology("noema", 4)
    assert settings.to_env()["NOEMA_PARTITIONS"] == "4"
    with pytest.raises(SettingsError):
        Settings.from_env({"NOEMA_PARTITIONS": "0"})
    with pytest.raises(ValueError, match="partitions"):
        Topology("noema", 65)


def test_the_fair_share_is_the_ceiling_of_partitions_per_live_instance() -> None:
    assert [fair_share(4, n) for n in (0, 1, 2, 3, 4, 5)] == [4, 4, 2, 2, 1, 1]


def test_instances_try_the_partitions_from_different_places() -> None:
    assert claim_order(4, 6) == [2, 3, 0, 1]
    assert sorted(claim_order(5, 123)) == list(range(5))


class Store:
    """The claims' store in memory: members and per-partition owners (what PostgreSQL keeps)."""

    def __init__(self) -> None:
        self.members: set[int] = set()
        self.owners: dict[int, int] = {}
        self.others = 0  # instances of another partition count
        self._ids = itertools.count(1)

    def session(self) -> Claims:
        return Claims(self, next(self._ids))

    def end(self, session: int) -> None:
        """The session ends (its process died): everything it held is free."""
        self.members.discard(session)
        self.owners = {p: s for p, s in self.owners.items() if s != session}


class Claims:
    def __init__(self, store: Store, session: int) -> None:
        self.store, self.session = store, session

    async def join(self) -> None:
        self.store.members.add(self.session)

    async def members(self) -> int:
        return len(self.store.members)

    async def others(self) -> int:
        return self.store.others

    async def try_claim(self, partition: int) -> bool:
        return self.store.owners.setdefault(partition, self.session) == self.session

    async def held(self) -> set[int]:
        return {p for p, s in self.store.owners.items() if s == self.session}

    async def check(self, partition: int) -> None:
        if self.store.owners.get(partition) != self.session:
            raise ClaimLost(f"partition {partition}")

    async def release(self, partition: int) -> None:
        if self.store.owners.get(partition) == self.session:
            del self.store.owners[partition]

    async def leave(self) -> None:
        self.store.end(self.session)


class Worker:
    """A partition's worker: runs until shut down; records who ran which partition."""

    def __init__(self, ran: list[tuple[int, int]], instance: int, partition: int) -> None:
        ran.append((instance, partition))
        self._stop = asyncio.Event()

    async def run(self) -> None:
        await self._stop.wait()

    def shutdown(self) -> None:
        self._stop.set()


def service(store: Store, instance: int, ran: list[tuple[int, int]]) -> tuple[PartitionedService, Claims]:
    claims = store.session()

    async def start(partition: int) -> Worker:
        return Worker(ran, instance, partition)

    return PartitionedService(f"w{instance}", None, claims, 4, start, poll_s=0.01, instance=instance), claims  # type: ignore[arg-type]


async def until(check: object, timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():  # type: ignore[operator]
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


async def test_a_second_instance_gets_half_the_partitions_and_takes_all_over_when_the_first_dies() -> None:
    store, ran = Store(), list[tuple[int, int]]()
    first, first_claims = service(store, 0, ran)
    one = asyncio.create_task(first.run())
    await until(lambda: first.owned == [0, 1, 2, 3])
    assert first.claim_state == "owner:0,1,2,3"

    second, _ = service(store, 1, ran)
    assert second.claim_state == "standby"
    two = asyncio.create_task(second.run())
    await until(lambda: len(first.owned) == 2 and len(second.owned) == 2)
    assert set(first.owned).isdisjoint(second.owned)
    assert store.owners == {p: 1 if p in first.owned else 2 for p in range(4)}

    # The first instance's process dies: its session ends, the second takes every partition.
    store.end(first_claims.session)
    await until(lambda: second.owned == [0, 1, 2, 3])
    with pytest.raises(ClaimLost):
        await one  # the former owner finds its partitions gone and stops, to be restarted
    second.shutdown()
    await two
    assert store.owners == {}
    assert store.members == set()
    # The second instance started a worker for each partition it got: two at first, then the rest.
    assert sorted(p for i, p in ran if i == 1) == [0, 1, 2, 3]


async def test_a_partition_worker_that_fails_ends_the_instance_loudly() -> None:
    store = Store()
    claims = store.session()

    class Failing(Worker):
        async def run(self) -> None:
            raise RuntimeError("a bug in the handler")

    async def start(partition: int) -> Worker:
        return Failing([], 0, partition)

    svc = PartitionedService("w", None, claims, 2, start, poll_s=0.01)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="a bug in the handler"):
        await asyncio.wait_for(svc.run(), 5)
    assert store.owners == {}
    assert store.members == set()


async def test_a_partition_whose_consumer_had_a_gap_is_given_up_and_claimed_again_afresh() -> None:
    store = Store()
    started: list[int] = []

    class Gap(Worker):
        async def run(self) -> None:
            raise ConsumerGap("consumer delivery 5 after 2")

    async def start(partition: int) -> Worker:
        started.append(partition)
        return (Gap if started.count(partition) == 1 else Worker)([], 0, partition)

    svc = PartitionedService("w", None, store.session(), 2, start, poll_s=0.01)  # type: ignore[arg-type]
    running = asyncio.create_task(svc.run())
    await until(lambda: sorted(started) == [0, 0, 1, 1] and svc.owned == [0, 1])
    svc.shutdown()
    await running  # the gap ended only its partition's worker, not the instance


async def test_a_partition_that_cannot_start_for_a_server_outage_is_tried_again() -> None:
    store = Store()
    tries: list[int] = []

    async def start(partition: int) -> Worker:
        tries.append(partition)
        if len(tries) == 1:
            raise TimeoutError("no stream leader yet")  # JetStream electing one after a server loss
        return Worker([], 0, partition)

    svc = PartitionedService("w", None, store.session(), 1, start, poll_s=0.01)  # type: ignore[arg-type]
    running = asyncio.create_task(svc.run())
    await until(lambda: svc.owned == [0])
    assert tries == [0, 0]
    svc.shutdown()
    await running


async def test_a_shutdown_during_a_round_is_no_worker_stopping_on_its_own() -> None:
    # The round asks the claims' store which partitions are still held (a database round trip); a
    # shutdown arriving meanwhile stops the workers, which the round then finds done. That is the
    # shutdown, not a worker that stopped on its own (a teardown error seen once in CI).
    store = Store()
    claims = store.session()
    svc = PartitionedService("w", None, claims, 2, lambda p: _started(p), poll_s=0.01)  # type: ignore[arg-type]
    held = claims.held
    asking = asyncio.Event()
    answer = asyncio.Event()

    async def slow_held() -> set[int]:
        if svc.owned == [0, 1]:
            asking.set()
            await answer.wait()
        return await held()

    claims.held = slow_held  # type: ignore[method-assign]
    running = asyncio.create_task(svc.run())
    await asyncio.wait_for(asking.wait(), 5)
    svc.shutdown()
    await asyncio.sleep(0)  # the workers see the shutdown and end
    answer.set()
    await asyncio.wait_for(running, 5)
    assert store.owners == {}


async def _started(partition: int) -> Worker:
    return Worker([], 0, partition)
