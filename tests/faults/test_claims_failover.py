"""Two instances each of attend, the projector and conflicts (``NOEMA_REPLICAS=2``) on a real
``noemactl up``: one owns each worker's claim, the other stands by. The owners are SIGKILLed
mid-ingest (twice); the standbys take over within seconds, and afterwards every acknowledged
observation is exactly one memory, no event id is stored twice, no mind's working memory forked, a
fact race has exactly one winner, and ``noemactl replay`` matches.

retrieve is paused during the ingest (a recall may bring an old memory back into a working memory,
which the fork check would not tell from a fork); the embedder is off (less load, same claims).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator

import psutil
import pytest

from noema.runtime.health import read_heartbeats
from tests.faults.instance import (
    TOPOLOGY,
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

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

N = int(os.environ.get("NOEMA_FAULT_OBSERVATIONS", "2000"))
CLAIMED = ("attend", "projector", "conflicts")
TAKEOVER_LIMIT_S = 10.0


@pytest.fixture
async def instance(request: pytest.FixtureRequest) -> AsyncIterator[Instance]:
    """A fresh ``up`` with two instances of each claimed worker."""
    env = {"NOEMA_REPLICAS": "2", "NOEMA_EMBEDDER": "none", "NOEMA_HEARTBEAT_INTERVAL": "1"}
    async with running(request, env) as inst:
        yield inst


def owner(instance: Instance, worker: str) -> int | None:
    """The pid that last acquired ``worker``'s claim, if it is still running."""
    acquired = [e for e in instance.events("claim acquired") if e.get("worker") == worker]
    if not acquired:
        return None
    pid = int(acquired[-1]["pid"])
    return pid if psutil.pid_exists(pid) else None


def instances_of(instance: Instance, worker: str) -> list[int]:
    """The pids ``up`` runs of ``worker`` (``attend``, ``attend-2``)."""
    services = instance.state()["services"]
    return [int(pid) for name, pid in services.items() if name.partition("-")[0] == worker]


async def owners(instance: Instance) -> dict[str, int]:
    """Each claimed worker's owner, once every one has one."""

    async def all_owned() -> dict[str, int] | None:
        found = {w: owner(instance, w) for w in CLAIMED}
        return None if None in found.values() else {w: p for w, p in found.items() if p is not None}

    result: dict[str, int] = await eventually(all_owned, 60, 0.1, "an owner for every claim")
    return result


async def kill_owners(instance: Instance) -> dict[str, float]:
    """SIGKILL every owner at once; seconds until each worker's standby (already running) owns it."""
    before = await owners(instance)
    standbys = {w: set(instances_of(instance, w)) - {pid} for w, pid in before.items()}
    for w, standby in standbys.items():
        assert standby, f"no standby of {w} runs: {instance.state()['services']}"
    killed_at = time.monotonic()
    for pid in before.values():
        os.kill(pid, signal.SIGKILL)
    takeover: dict[str, float] = {}
    while len(takeover) < len(CLAIMED):
        assert time.monotonic() - killed_at < 60, f"no takeover within 60 s: {takeover}"
        for w in CLAIMED:
            now_owner = owner(instance, w)
            if w not in takeover and now_owner not in (None, before[w]):
                assert now_owner in standbys[w], f"{w}: pid {now_owner} owns it, not the standby"
                takeover[w] = round(time.monotonic() - killed_at, 2)
        await asyncio.sleep(0.05)
    return takeover


async def test_standbys_take_over_from_killed_owners_and_nothing_is_lost_duplicated_or_forked(
    instance: Instance,
) -> None:
    assert instance.pool is not None
    pool = instance.pool
    first = await owners(instance)
    assert all(len(instances_of(instance, w)) == 2 for w in CLAIMED)
    nc = instance.nc
    assert nc is not None

    async def claims_reported() -> bool:
        beats = [b for b in await read_heartbeats(nc, TOPOLOGY) if b.worker in CLAIMED and not b.stopped]
        return sorted((b.worker, b.claim) for b in beats) == sorted(
            (w, c) for w in CLAIMED for c in ("owner", "standby")
        )

    await eventually(claims_reported, 30, 0.5, "heartbeats naming one owner and one standby per worker")
    status = await asyncio.to_thread(instance.ctl, "status", "--json")
    assert "standing by" in status.stdout, status.stdout

    publisher = Publisher(instance.state()["nats_url"], rate=150)
    rounds: list[dict[str, float]] = []
    with instance.paused("retrieve"):
        publisher.start()
        try:
            for tenth in (3, 6):

                async def progressed(tenth: int = tenth) -> bool:
                    return len(await memory_counts(pool)) >= tenth * N // 10

                await eventually(progressed, 180, 0.1, f"{tenth}/10 of the ingest")
                rounds.append(await kill_owners(instance))
                if tenth == 3:  # a fact race on the new conflicts owner
                    await propose_rival_facts(instance, "acme")

            await until_published(publisher, N)
        finally:
            await publisher.stop()
        counts = await assert_settled_exactly_once(pool, publisher)

    async def one_winner() -> bool:
        active = await pool.fetchval(
            "SELECT count(*) FROM memories WHERE workspace = 'acme' AND domain = 'ops' "
            "AND topic = 'deploy-day' AND status = 'active'"
        )
        conflicts = await pool.fetchval("SELECT count(*) FROM events WHERE type = 'conflict.recorded.v1'")
        return bool(active == 1 and conflicts == 1)

    await eventually(one_winner, 120, 0.5, "exactly one winner of the fact race")
    replay = await instance.assert_replay_matches(pause=("retrieve",))
    worst = max(s for r in rounds for s in r.values())
    assert worst <= TAKEOVER_LIMIT_S, rounds
    assert {w for r in rounds for w in r} == set(CLAIMED)
    await instance.close_clients()
    stop_s = instance.stop()
    record(
        "claims-failover",
        observations=N,
        first_owners=first,
        takeover_s=rounds,
        worst_takeover_s=worst,
        replay_events=replay["events"],
        stop_s=round(stop_s, 1),
        **counts,
    )
