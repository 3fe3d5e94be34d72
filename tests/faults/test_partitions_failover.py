"""Partitions on a real ``noemactl up`` (issue 13): ``NOEMA_PARTITIONS=4`` and two instances each of
attend and conflicts (``NOEMA_REPLICAS=2``), which share the four partitions two and two. One
instance of each is SIGKILLed mid-ingest; the other takes its partitions over within seconds, and
afterwards every acknowledged observation is exactly one memory, each mind's observations were
decided in the order they were published, no working memory forked, fact races have one winner
each, and ``noemactl replay`` matches.

retrieve is paused during the ingest (see test_claims_failover); the embedder is off.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import AsyncIterator

import asyncpg
import psutil
import pytest

from tests.faults.instance import (
    Instance,
    Publisher,
    assert_settled_exactly_once,
    eventually,
    memory_counts,
    propose_rival_facts,
    record,
    running,
    until_published,
)
from tests.faults.test_claims_failover import instances_of

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

N = int(os.environ.get("NOEMA_FAULT_OBSERVATIONS", "2000"))
P = 4
PARTITIONED = ("attend", "conflicts")
WORKSPACES = tuple(f"tenant{i}" for i in range(16))
TAKEOVER_LIMIT_S = 10.0


@pytest.fixture
async def instance(request: pytest.FixtureRequest) -> AsyncIterator[Instance]:
    """A fresh ``up`` with four partitions and two instances of each claimed worker."""
    env = {
        "NOEMA_PARTITIONS": str(P),
        "NOEMA_REPLICAS": "2",
        "NOEMA_EMBEDDER": "none",
        "NOEMA_HEARTBEAT_INTERVAL": "1",
    }
    async with running(request, env) as inst:
        yield inst


def owners(instance: Instance, worker: str) -> dict[int, int]:
    """Each partition's owner pid, from the instances' logs, among the processes still running."""
    found: list[tuple[str, str, int, int]] = []  # (ISO time, event, partition, pid)
    for event in ("partition acquired", "partition handed back"):
        found += [
            (str(e["timestamp"]), event, int(e["partition"]), int(e["pid"]))
            for e in instance.events(event)
            if e.get("worker") == worker
        ]
    owner: dict[int, int] = {}
    for _, event, partition, pid in sorted(found):
        if event == "partition acquired":
            owner[partition] = pid
        elif owner.get(partition) == pid:
            del owner[partition]
    return {p: pid for p, pid in owner.items() if psutil.pid_exists(pid)}


async def balanced(instance: Instance, worker: str) -> dict[int, int]:
    """Wait until two live instances of ``worker`` own two partitions each; returns the owners."""

    async def two_each() -> dict[int, int] | None:
        found = owners(instance, worker)
        pids = list(found.values())
        return found if len(found) == P and sorted(pids.count(p) for p in set(pids)) == [2, 2] else None

    try:
        what = f"{worker}'s partitions shared two and two"
        result: dict[int, int] = await eventually(two_each, 90, 0.2, what)
    except AssertionError as exc:
        now = owners(instance, worker)
        raise AssertionError(f"{exc}\nowners now: {now}\n{instance.story(worker)}") from None
    return result


async def kill_one_of_each(instance: Instance) -> dict[str, float]:
    """SIGKILL the instance owning partition 0 of each partitioned worker; seconds until the other
    instance (already running) owns all of the partitions."""
    before = {w: await balanced(instance, w) for w in PARTITIONED}
    victims = {w: before[w][0] for w in PARTITIONED}
    killed_at = time.monotonic()
    for pid in victims.values():
        os.kill(pid, signal.SIGKILL)
    takeover: dict[str, float] = {}
    while len(takeover) < len(PARTITIONED):
        assert time.monotonic() - killed_at < 60, f"no takeover within 60 s: {takeover}\n" + "\n".join(
            instance.story(w) for w in PARTITIONED if w not in takeover
        )
        for w in PARTITIONED:
            now = owners(instance, w)
            if w not in takeover and len(now) == P and victims[w] not in now.values():
                survivors = set(instances_of(instance, w)) - {victims[w]}
                assert set(now.values()) <= survivors | {victims[w]}, now
                takeover[w] = round(time.monotonic() - killed_at, 2)
        await asyncio.sleep(0.05)
    return takeover


async def decided_out_of_order(pool: asyncpg.Pool, attempted: list[str]) -> list[str]:
    """Minds whose observations were decided in another order than they were published."""
    index = {obs: i for i, obs in enumerate(attempted)}
    rows = await pool.fetch(
        "SELECT workspace, mind, payload::text AS payload FROM events "
        "WHERE type = 'attention.decided.v1' ORDER BY seq"
    )
    last: dict[tuple[str, str], int] = {}
    wrong = []
    for r in rows:
        key = (r["workspace"], r["mind"])
        for decision in json.loads(r["payload"])["decisions"]:
            at = index.get(decision["candidate_id"])
            if at is None:
                continue  # a fact race's observation-less proposals are not attention candidates
            if at < last.get(key, -1):
                wrong.append(f"{key}: {decision['candidate_id']} decided after a later observation")
            last[key] = at
    return wrong


async def one_winner_each(pool: asyncpg.Pool, workspaces: tuple[str, ...]) -> bool:
    rows = await pool.fetch(
        "SELECT workspace, count(*) FILTER (WHERE status = 'active') AS active FROM memories "
        "WHERE domain = 'ops' AND topic = 'deploy-day' AND workspace = ANY($1) GROUP BY workspace",
        list(workspaces),
    )
    return len(rows) == len(workspaces) and all(r["active"] == 1 for r in rows)


async def test_partitions_are_shared_taken_over_from_killed_instances_and_nothing_is_lost_or_reordered(
    instance: Instance,
) -> None:
    assert instance.pool is not None
    pool = instance.pool
    assert all(len(instances_of(instance, w)) == 2 for w in PARTITIONED)
    first = {w: await balanced(instance, w) for w in PARTITIONED}
    status = await asyncio.to_thread(instance.ctl, "status", "--json")
    assert "partitions: pid" in status.stdout, status.stdout

    publisher = Publisher(instance.state()["nats_url"], rate=150, workspaces=WORKSPACES)
    raced = WORKSPACES[:4]
    with instance.paused("retrieve"):
        publisher.start()
        try:

            async def progressed() -> bool:
                return len(await memory_counts(pool)) >= N // 3

            await eventually(progressed, 180, 0.1, "a third of the ingest")
            takeover = await kill_one_of_each(instance)
            for ws in raced:  # fact races on the new owners of the partitions
                await propose_rival_facts(instance, ws)
            await until_published(publisher, N)
        finally:
            await publisher.stop()
        counts = await assert_settled_exactly_once(pool, publisher)
        reordered = await decided_out_of_order(pool, publisher.attempted)
        assert not reordered, f"{len(reordered)} decisions out of order, e.g. {reordered[:3]}"

    await eventually(lambda: one_winner_each(pool, raced), 120, 0.5, "exactly one winner of each fact race")
    replay = await instance.assert_replay_matches(pause=("retrieve",))
    worst = max(takeover.values())
    assert worst <= TAKEOVER_LIMIT_S, takeover
    await instance.close_clients()
    stop_s = instance.stop()
    record(
        "partitions-failover",
        observations=N,
        partitions=P,
        first_owners={w: {str(p): pid for p, pid in o.items()} for w, o in first.items()},
        takeover_s=takeover,
        replay_events=replay["events"],
        stop_s=round(stop_s, 1),
        **counts,
    )
