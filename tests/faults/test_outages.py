"""Outages of the servers under a steady stream of observations, on a real ``noemactl up``.

Each scenario, from a fresh instance: observations are published before, during (refused or not
acknowledged while NATS is down) and after the outage; the supervisor restarts the server with no
one's help; afterwards every acknowledged observation is exactly one memory (0 lost, 0 duplicated,
no event id twice), ``noemactl replay`` matches, and Ctrl-C stops everything cleanly.

The outage is held for its full length by keeping the server from starting again (its port taken,
or its data folder unreadable), so ``up`` keeps failing to restart it and must keep trying; the
supervisor is paused for the few milliseconds it takes to set that up, so it cannot win the race.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import asyncpg
import pytest

from tests.faults.instance import (
    TOPOLOGY,
    Instance,
    Publisher,
    assert_exactly_once,
    eventually,
    memory_counts,
    record,
    running,
    why_missing,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(420)]

NATS_OUTAGE_S = 30.0
PG_OUTAGE_S = 60.0


@pytest.fixture
async def instance(request: pytest.FixtureRequest) -> AsyncIterator[Instance]:
    """A fresh ``up`` without an embedder (vectors play no part here, and cost the CPU)."""
    async with running(request, {"NOEMA_EMBEDDER": "none"}) as inst:
        yield inst


def _take_port(port: int, timeout: float = 20.0) -> socket.socket:
    """Listen on ``port`` as soon as the dead server released it (so it cannot start again)."""
    deadline = time.monotonic() + timeout
    while True:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past the old connections' TIME_WAIT
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            s.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)
            continue
        s.listen(16)
        return s


async def _first_memory_after(pool: asyncpg.Pool, publisher: Publisher, since: float) -> float:
    """When the first observation acknowledged after ``since`` became a memory (monotonic)."""
    while True:
        ids = [i for i, t in publisher.acked.items() if t > since]
        try:
            found = ids and await pool.fetchval(
                "SELECT count(*) FROM memories WHERE source_observation_ids[1] = ANY($1::text[])", ids
            )
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
            found = False  # PostgreSQL is not back yet
        if found:
            return time.monotonic()
        await asyncio.sleep(0.1)


async def _observation_seq(instance: Instance) -> int:
    """The observation stream's last sequence (waits for NATS to answer)."""
    assert instance.nc is not None
    js = instance.nc.jetstream()

    async def last() -> int | None:
        try:
            return int((await js.stream_info(TOPOLOGY.observation_stream)).state.last_seq)
        except Exception:  # NATS is still starting
            return None

    return int(await eventually(last, 60, 0.5, "the observation stream answering"))


async def _conflicts_decide_again(instance: Instance) -> None:
    """Two contradicting facts proposed after the outage are settled by the conflicts worker."""
    for day in ("Fridays", "Tuesdays"):
        fact = ("fact", "propose", f"Deploys happen on {day}", "-w", "acme", "-d", "ops", "-t", "deploy-day")
        result = await asyncio.to_thread(instance.ctl, *fact)
        assert result.returncode == 0, result.stderr
    assert instance.pool is not None
    pool = instance.pool

    async def decided() -> bool:
        return bool(await pool.fetchval("SELECT count(*) FROM conflicts WHERE workspace = 'acme'"))

    await eventually(decided, 120, 0.5, "the conflicts worker deciding a fact proposed after the outage")


async def _status_fails(instance: Instance, server: str, within_s: float) -> str:
    """``noemactl status`` run during the outage: it must exit non-zero and name the failing server;
    returns its first failing line."""

    async def failing() -> str | None:
        result = await asyncio.to_thread(instance.ctl, "status", "--json", timeout=60)
        if result.returncode == 0:
            return None
        checks = json.loads(result.stdout)["checks"]
        named = [f"{c['name']}: {c['detail']}" for c in checks if not c["ok"] and server in c["name"]]
        return named[0] if named else None

    found: str = await eventually(failing, within_s, 1.0, f"status failing on {server} during the outage")
    return found


async def _status_recovers(instance: Instance) -> None:
    """After recovery ``noemactl status`` exits 0 again, with no manual step."""

    async def healthy() -> bool:
        result = await asyncio.to_thread(instance.ctl, "status", timeout=60)
        return result.returncode == 0

    await eventually(healthy, 120, 1.0, "status exiting 0 after the outage")


def _readable(path: Path) -> None:
    if path.exists() and path.stat().st_mode & 0o777 == 0:
        path.chmod(0o700)


async def _outage(
    instance: Instance,
    scenario: str,
    server: str,
    fault: Callable[[], Callable[[], None]],
    hold_s: float,
) -> None:
    """Publish, cause ``fault`` (which returns how to clear it), hold it ``hold_s``, clear it, then
    check recovery and exactly-once delivery."""
    assert instance.pool is not None
    publisher = Publisher(instance.state()["nats_url"], rate=10)
    publisher.start()
    pool = instance.pool

    async def some_memories() -> bool:
        return len(await memory_counts(pool)) >= 50

    await eventually(some_memories, 120, what="50 memories before the outage")

    instance.freeze()
    try:
        clear = fault()
    finally:
        instance.thaw()
    faulted_at = time.monotonic()
    # status tells the truth while the server is down: non-zero, with a line naming what is wrong.
    during = await _status_fails(instance, server, hold_s)
    await asyncio.sleep(
        max(0.0, hold_s - (time.monotonic() - faulted_at))
    )  # the outage: its length is the scenario
    assert instance.up is not None
    assert instance.up.poll() is None, "up gave up during the outage"
    failed_restarts = [e for e in instance.events("server restart failed; retrying") if e["server"] == server]
    assert failed_restarts, f"up did not keep trying to restart {server}: {instance.tail()}"
    clear()
    cleared_at = time.monotonic()
    stream_seq_at_clear = await _observation_seq(instance)
    first_memory = asyncio.create_task(_first_memory_after(pool, publisher, cleared_at))

    async def restarted() -> bool:
        return any(e["server"] == server for e in instance.events("server restarted"))

    await eventually(restarted, 60, 0.2, f"{server} restarted by up")
    restarted_at = time.monotonic()
    acked_before = len(publisher.acked)

    async def publishing_again() -> bool:
        return len(publisher.acked) >= acked_before + 50

    await eventually(publishing_again, 120, what="50 observations acknowledged after the outage")
    await publisher.stop()
    acked = set(publisher.acked)

    async def all_memories() -> bool:
        return not acked - (await memory_counts(pool)).keys()

    try:
        what = f"a memory for each of {len(acked)} acknowledged observations"
        await eventually(all_memories, 240, 0.25, what)
    except AssertionError as exc:
        missing = acked - (await memory_counts(pool)).keys()
        raise AssertionError(f"{exc}\n{await why_missing(instance, missing)}") from None
    caught_up_at = time.monotonic()
    await _status_recovers(instance)
    status_ok_at = time.monotonic()
    delivering_at = await asyncio.wait_for(first_memory, 10)
    counts = await assert_exactly_once(pool, acked, set(publisher.attempted))
    await instance.assert_consumer_resumes("retrieve", stream_seq_at_clear)
    if server == "nats":
        await _conflicts_decide_again(instance)
    replay = await instance.assert_replay_matches()
    await instance.close_clients()
    stop_s = instance.stop()
    exits: dict[str, int] = {}
    for e in instance.events("service exited; restarting"):
        exits[e["service"]] = exits.get(e["service"], 0) + 1
    record(
        scenario,
        service_exits=exits,
        outage_s=round(cleared_at - faulted_at, 1),
        failed_restart_attempts=len(failed_restarts),
        server_back_after_clear_s=round(restarted_at - cleared_at, 1),
        first_new_memory_after_clear_s=round(delivering_at - cleared_at, 1),
        all_memories_after_clear_s=round(caught_up_at - cleared_at, 1),
        status_failed_during_outage=during,
        status_ok_after_clear_s=round(status_ok_at - cleared_at, 1),
        not_acknowledged_publishes=publisher.failures,
        replay_events=replay["events"],
        stop_s=round(stop_s, 1),
        **counts,
    )


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
async def test_nats_down_30s_recovers_with_exactly_one_memory_per_acknowledged_observation(
    instance: Instance, sig: signal.Signals
) -> None:
    port = int(instance.state()["nats_url"].rsplit(":", 1)[1])

    def kill_nats() -> Callable[[], None]:
        instance.nats_process().send_signal(sig)
        blocker = _take_port(port)
        return blocker.close

    await _outage(instance, f"nats-{sig.name.lower()}-30s", "nats", kill_nats, NATS_OUTAGE_S)


async def test_postgres_killed_and_down_60s_recovers_with_exactly_one_memory_per_acknowledged_observation(
    instance: Instance,
) -> None:
    pgdata: Path = instance.data_dir / "pg"

    def kill_postgres() -> Callable[[], None]:
        postmaster = instance.postmaster()
        postmaster.send_signal(signal.SIGKILL)  # the harsher of the two: crash recovery on restart
        postmaster.wait(30)
        mode = pgdata.stat().st_mode
        pgdata.chmod(0)  # PostgreSQL cannot start on it until the mode is back

        def clear() -> None:
            pgdata.chmod(mode)

        return clear

    try:
        await _outage(instance, "postgres-sigkill-60s", "postgres", kill_postgres, PG_OUTAGE_S)
    finally:
        _readable(pgdata)  # a failed test must not leave it unreadable for the teardown
