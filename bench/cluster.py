"""Scale-out benchmark (issue 13): Noema on a three-server NATS JetStream cluster, with two
instances of each claimed worker sharing the partitions.

    python -m bench.cluster [--count 20000] [--workspaces 50] [--instances 2] [--partitions 4]
                            [--concurrency 32] [--out FILE]

Starts `noemactl up` on a temporary data folder with ``NOEMA_NATS_NODES=3`` and
``NOEMA_STREAM_REPLICAS=3`` (three embedded nats-servers on loopback as one JetStream cluster, every
stream on all three; PostgreSQL embedded; no embedder; every observation admitted),
``NOEMA_PARTITIONS`` = --partitions and ``NOEMA_REPLICAS`` = --instances (of attend, the projector
and conflicts; one of each other worker). Publishes --count observations spread over --workspaces
workspaces through the Python client (``noema.client.send_observation``, --concurrency in flight;
one not acknowledged is sent again with the same id, as a client should), and once half are
acknowledged SIGKILLs the nats-server leading the observation stream and one instance of attend,
the projector and conflicts — the owner of partition 0 (of the claim, for the projector) — which
``up`` restarts. Then waits until every acknowledged observation is a memory and runs
``noemactl replay``.

Prints JSON (also to --out): ``sent``, ``acknowledged``, ``memories``, ``lost``, ``duplicated``
(memories of one observation, event ids stored twice), ``replay_match``, ``killed`` (the server and
the workers' pids), ``takeover_s`` (per worker: the kill → every partition, or the claim, owned by
a live instance again; with one instance that is its restart), ``nats_back_s`` (kill → every
stream replica current again), ``publish_per_s`` and ``memories_per_s`` (first publish → last
memory). Ingest throughput with one and with two instances per worker: run it with --instances 1
and with --instances 2 (docs/benchmarks.md records both).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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
from noema.runtime.readiness import assess_stream
from noema.topology import Topology

from ._instance import Instance, running_instance
from ._output import emit

TOPOLOGY = Topology("noema")
SERVERS = 3
KILLED_WORKERS = ("attend", "projector", "conflicts")
PARTITIONED = ("attend", "conflicts")


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


def _log_events(log: Path, *events: str) -> list[dict[str, Any]]:
    """The JSON log records of ``up`` and its children with one of these ``event`` texts, in order."""
    found = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{") and any(f'"{e}"' in line for e in events):
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if record.get("event") in events:
                    found.append(record)
    return sorted(found, key=lambda r: str(r.get("timestamp")))


def owners(log: Path, worker: str) -> dict[int, int]:
    """Who works what now, from the log: partition (0 for the projector's claim) → live pid."""
    owner: dict[int, int] = {}
    for r in _log_events(log, "claim acquired", "partition acquired", "partition handed back"):
        if r.get("worker") != worker:
            continue
        partition, pid = int(r.get("partition", 0)), int(r["pid"])
        if r["event"] != "partition handed back":
            owner[partition] = pid
        elif owner.get(partition) == pid:
            del owner[partition]
    return {p: pid for p, pid in owner.items() if psutil.pid_exists(pid)}


async def _kill(instance: Instance, js: Any) -> dict[str, Any]:
    """SIGKILL the observation stream's leader and, of attend, the projector and conflicts, the
    instance owning partition 0 (the claim); returns what and when."""
    info = await js.stream_info(TOPOLOGY.observation_stream)
    leader = info.cluster.leader
    _nats_server(instance, leader).send_signal(signal.SIGKILL)
    victims = {name: owners(instance.log, name)[0] for name in KILLED_WORKERS}
    for pid in victims.values():
        os.kill(pid, signal.SIGKILL)
    return {"server": leader, "workers": victims, "at": time.monotonic()}


async def _taken_over(instance: Instance, killed: dict[str, Any], partitions: int) -> dict[str, float]:
    """Seconds from the kill until each killed worker's partitions (or claim) are owned again."""
    expected = {w: partitions if w in PARTITIONED and partitions > 1 else 1 for w in KILLED_WORKERS}
    took: dict[str, float] = {}
    while len(took) < len(KILLED_WORKERS) and time.monotonic() - killed["at"] < 300:
        for w in KILLED_WORKERS:
            now = owners(instance.log, w)
            if w not in took and len(now) == expected[w] and killed["workers"][w] not in now.values():
                took[w] = round(time.monotonic() - killed["at"], 2)
        await asyncio.sleep(0.05)
    return took


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


async def run(
    instance: Instance, count: int, workspaces: int, concurrency: int, instances: int, partitions: int
) -> dict[str, Any]:
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
        takeover = asyncio.create_task(_taken_over(instance, killed, partitions))
        await publishing
        published = time.monotonic()
        acked = set(ingest.acked)
        last_memory = await _wait_memories(pool, acked)
        counts = await _memories(pool)
        dup_events = int(await pool.fetchval("SELECT count(*) - count(DISTINCT id) FROM events"))
        nats_back = await back
        took = await takeover
        replay_match = await asyncio.to_thread(_replay, instance)
    finally:
        await pool.close()
        await nc.close()
    sent = len(ingest.todo)
    return {
        "benchmark": "cluster",
        "servers": SERVERS,
        "stream_replicas": SERVERS,
        "instances_per_worker": instances,
        "partitions": partitions,
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
        "takeover_s": took,
        "takeover_worst_s": max(took.values(), default=None),
        "publish_failures": ingest.failures,
        "retries_already_stored": ingest.already_stored,
        "publish_per_s": round(sent / (published - started), 1),
        "memories_per_s": round(len(acked) / max(1e-9, last_memory - started), 1),
        "cpus": os.cpu_count(),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.cluster", description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=20_000, help="observations (default 20000)")
    parser.add_argument("--workspaces", type=int, default=50, help="workspaces they spread over (default 50)")
    parser.add_argument("--concurrency", type=int, default=32, help="publishes in flight (default 32)")
    parser.add_argument(
        "--instances",
        type=int,
        choices=(1, 2, 3),
        default=2,
        help="of attend, projector, conflicts (default 2)",
    )
    parser.add_argument("--partitions", type=int, default=4, help="NOEMA_PARTITIONS (default 4)")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    env = {
        "NOEMA_NATS_NODES": str(SERVERS),
        "NOEMA_STREAM_REPLICAS": str(SERVERS),
        "NOEMA_EMBEDDER": "none",
        "NOEMA_ATTEND_THRESHOLD": "0",  # every observation becomes one memory
        "NOEMA_ATTEND_CAPACITY": "100000",
        "NOEMA_REPLICAS": str(args.instances),
        "NOEMA_PARTITIONS": str(args.partitions),
        "NOEMA_LOG_LEVEL": "info",  # who acquired which partition: the takeover is read from the log
    }
    with running_instance(env) as instance:
        result = asyncio.run(
            run(instance, args.count, args.workspaces, args.concurrency, args.instances, args.partitions)
        )
    emit(result, args.out)
    ok = result["lost"] == 0 and not any(result["duplicated"].values()) and result["replay_match"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
