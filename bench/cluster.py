"""Scale-out benchmark, its first slice (issue 13): Noema on a three-server NATS JetStream cluster.

    python -m bench.cluster [--count 20000] [--workspaces 50] [--concurrency 32] [--out FILE]

Starts `noemactl up` on a temporary data folder with ``NOEMA_NATS_NODES=3`` and
``NOEMA_STREAM_REPLICAS=3`` (three embedded nats-servers on loopback as one JetStream cluster, every
stream on all three; PostgreSQL embedded; no embedder; every observation admitted), one instance of
each worker. Publishes --count observations spread over --workspaces workspaces through the Python
client (``noema.client.send_observation``, --concurrency in flight; one not acknowledged is sent
again with the same id, as a client should), and once half are acknowledged SIGKILLs the
nats-server leading the observation stream and the attend, projector and conflicts processes
(``up`` restarts all four). Then waits until every acknowledged observation is a memory and runs
``noemactl replay``.

Prints JSON (also to --out): ``sent``, ``acknowledged``, ``memories``, ``lost``, ``duplicated``
(memories of one observation, event ids stored twice), ``replay_match``, ``killed`` (the server and
the workers), ``nats_back_s`` (kill → every stream replica current again), ``publish_per_s`` and
``memories_per_s`` (first publish → last memory), and ``not_yet``: what issue 13's benchmark asks
that this one cannot measure before partitions and claims exist — two instances of each worker
(so no ``takeover_s``, no throughput with two instances).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg
import nats
import psutil
from nats.aio.client import Client as NATS

from noema.adapters.jetstream import auth_options, nats_servers
from noema.client import build_observation, send_observation
from noema.runtime.locate import read_state
from noema.runtime.readiness import assess_stream
from noema.runtime.topology import Topology

from ._instance import Instance, running_instance
from ._output import emit

TOPOLOGY = Topology("noema")
SERVERS = 3
KILLED_WORKERS = ("attend", "projector", "conflicts")
NOT_YET = [
    "two instances of each worker: attend, the projector and conflicts are singletons until "
    "partitions by workspace and claims with failover exist (issue 13), so takeover_s is null",
    "ingest throughput with 2 instances per worker (the same reason)",
]


async def _quiet(_: Exception) -> None:
    """Reconnect attempts while a server is down need no traceback."""


async def _connect(url: str) -> NATS:
    return await nats.connect(
        nats_servers(url),
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.5,
        error_cb=_quiet,
        **auth_options(url, None),
    )


def _nats_server(instance: Instance, name: str) -> psutil.Process:
    """The nats-server ``noema-<i>`` under ``up``."""
    conf = str(instance.data_dir / f"nats-{name.rsplit('-', 1)[1]}.conf")
    for child in psutil.Process(instance.up_pid).children():
        if child.name() == "nats-server" and conf in child.cmdline():
            return child
    raise RuntimeError(f"no nats-server {name} under up")


class Ingest:
    """Publishes the observations, each until acknowledged, and records when."""

    def __init__(self, js: Any, count: int, workspaces: int) -> None:
        self.js = js
        self.todo = [
            build_observation(
                f"observation {i}: host-{i % 97} reported status {i * 7 % 13}",
                workspace=f"ws{i % workspaces:03d}",
                mind=f"agent{i % 4}",
            )
            for i in range(count)
        ]
        self.acked: dict[str, float] = {}
        self.failures = 0
        self.already_stored = 0
        self.half = asyncio.Event()

    async def worker(self, queue: asyncio.Queue[int]) -> None:
        while not queue.empty():
            obs = self.todo[queue.get_nowait()]
            while True:
                try:
                    stored = await send_observation(self.js, obs, topology=TOPOLOGY, timeout=2.0)
                except Exception:  # not acknowledged (a server going away): the same id again
                    self.failures += 1
                    await asyncio.sleep(0.2)
                    continue
                self.already_stored += stored.duplicate
                self.acked[obs.id] = time.monotonic()
                if len(self.acked) >= len(self.todo) // 2:
                    self.half.set()
                break

    async def run(self, concurrency: int) -> None:
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(len(self.todo)):
            queue.put_nowait(i)
        await asyncio.gather(*(self.worker(queue) for _ in range(concurrency)))


async def _kill(instance: Instance, js: Any) -> dict[str, Any]:
    """SIGKILL the observation stream's leader and the stateful workers; returns what and when."""
    info = await js.stream_info(TOPOLOGY.observation_stream)
    leader = info.cluster.leader
    _nats_server(instance, leader).send_signal(signal.SIGKILL)
    services = (read_state(instance.data_dir) or {}).get("services", {})
    for name in KILLED_WORKERS:
        os.kill(int(services[name]), signal.SIGKILL)
    return {"server": leader, "workers": list(KILLED_WORKERS), "at": time.monotonic()}


async def _replicas_current(js: Any, since: float, timeout: float = 300.0) -> float | None:
    """Seconds from ``since`` until both main streams have every replica current again."""
    await asyncio.sleep(1.0)  # the leader notices the loss first
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            checks = []
            for stream in (TOPOLOGY.observation_stream, TOPOLOGY.event_stream):
                info = await js.stream_info(stream)
                checks.append(assess_stream(stream, 0, info.cluster))
            if all(c.ok and "catching up" not in c.detail for c in checks):
                return time.monotonic() - since
        except Exception:  # a server answering no stream info yet
            pass
        await asyncio.sleep(0.5)
    return None


async def _memories(pool: asyncpg.Pool) -> dict[str, int]:
    rows = await pool.fetch(
        "SELECT source_observation_ids[1] AS obs, count(*) AS n FROM memories "
        "WHERE kind = 'episodic' GROUP BY 1"
    )
    return {r["obs"]: int(r["n"]) for r in rows}


async def _wait_memories(pool: asyncpg.Pool, ids: set[str], stall_s: float = 180.0) -> float:
    """Poll until every id is a memory, or nothing new arrived for ``stall_s``; returns when the
    last one arrived (monotonic)."""
    seen, last_change = -1, time.monotonic()
    while True:
        have = len(ids & (await _memories(pool)).keys())
        if have != seen:
            seen, last_change = have, time.monotonic()
        if have == len(ids) or time.monotonic() - last_change > stall_s:
            return last_change
        await asyncio.sleep(1.0)


def _replay(instance: Instance) -> bool:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA_")}
    env["NOEMA_DATA_DIR"] = str(instance.data_dir)
    done = subprocess.run(
        [sys.executable, "-m", "noema_cli.main", "replay", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if done.returncode != 0:
        print(f"replay failed: {done.stderr[-2000:]}", file=sys.stderr)
        return False
    return bool(json.loads(done.stdout).get("match"))


async def run(instance: Instance, count: int, workspaces: int, concurrency: int) -> dict[str, Any]:
    nc = await _connect(instance.nats_url)
    js = nc.jetstream()
    pool = await asyncpg.create_pool(
        instance.owner_db_url, min_size=1, max_size=2, server_settings={"search_path": "noema"}
    )
    try:
        ingest = Ingest(js, count, workspaces)
        started = time.monotonic()
        publishing = asyncio.create_task(ingest.run(concurrency))
        await ingest.half.wait()
        killed = await _kill(instance, js)
        back = asyncio.create_task(_replicas_current(js, killed["at"]))
        await publishing
        published = time.monotonic()
        acked = set(ingest.acked)
        last_memory = await _wait_memories(pool, acked)
        counts = await _memories(pool)
        dup_events = int(await pool.fetchval("SELECT count(*) - count(DISTINCT id) FROM events"))
        nats_back = await back
        replay_match = await asyncio.to_thread(_replay, instance)
    finally:
        await pool.close()
        await nc.close()
    sent = len(ingest.todo)
    return {
        "benchmark": "cluster",
        "servers": SERVERS,
        "stream_replicas": SERVERS,
        "instances_per_worker": 1,
        "sent": sent,
        "workspaces": workspaces,
        "acknowledged": len(acked),
        "memories": sum(counts.values()),
        "lost": len(acked - counts.keys()),
        "duplicated": {
            "memories": sum(1 for n in counts.values() if n > 1),
            "event_ids": dup_events,
        },
        "replay_match": replay_match,
        "killed": {"server": killed["server"], "workers": killed["workers"]},
        "nats_back_s": None if nats_back is None else round(nats_back, 1),
        "takeover_s": None,
        "publish_failures": ingest.failures,
        "retries_already_stored": ingest.already_stored,
        "publish_per_s": round(sent / (published - started), 1),
        "memories_per_s": round(len(acked) / max(1e-9, last_memory - started), 1),
        "cpus": os.cpu_count(),
        "not_yet": NOT_YET,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.cluster", description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=20_000, help="observations (default 20000)")
    parser.add_argument("--workspaces", type=int, default=50, help="workspaces they spread over (default 50)")
    parser.add_argument("--concurrency", type=int, default=32, help="publishes in flight (default 32)")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    env = {
        "NOEMA_NATS_NODES": str(SERVERS),
        "NOEMA_STREAM_REPLICAS": str(SERVERS),
        "NOEMA_EMBEDDER": "none",
        "NOEMA_ATTEND_THRESHOLD": "0",  # every observation becomes one memory
        "NOEMA_ATTEND_CAPACITY": "100000",
    }
    with running_instance(env) as instance:
        result = asyncio.run(run(instance, args.count, args.workspaces, args.concurrency))
    emit(result, args.out)
    ok = result["lost"] == 0 and not any(result["duplicated"].values()) and result["replay_match"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
