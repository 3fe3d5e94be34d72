"""A real ``noemactl up`` in a temporary data folder, a steady publisher, and the exactly-once checks
the fault tests share."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import asyncpg
import nats
import psutil
from nats.aio.client import Client as NATS
from nats.js.errors import NotFoundError

from noema.adapters.jetstream import nats_servers
from noema.client import build_observation, send_observation
from noema.runtime.embedded import free_port
from noema.runtime.health import watched_consumer
from noema.runtime.locate import state_nats_url
from noema.topology import Topology
from tests.support import assert_eventually

NOEMACTL = [sys.executable, "-m", "noema_cli.main"]
PREFIX = "noema"
SCHEMA = "noema"
TOPOLOGY = Topology(PREFIX)
DURABLES = ("attend", "retrieve", "conflicts", "projector")
FIGURES_FILE = os.environ.get("NOEMA_FAULT_FIGURES")
"""When set, every test appends its measured figures (one JSON object per line) to this file."""


async def _quiet(error: Exception) -> None:
    """The test's own clients see the outages too; their reconnect attempts need no traceback."""


async def client(url: str) -> NATS:
    """The test's own connection to ``url`` — one server or a cluster's list — reconnecting forever
    (to any server of a cluster: the credentials in the URL are given to each)."""
    servers = nats_servers(url)
    first = urlsplit(servers[0])
    credentials = (
        {"user": unquote(first.username), "password": unquote(first.password)}
        if first.username and first.password
        else {}
    )
    return await nats.connect(
        servers, max_reconnect_attempts=-1, reconnect_time_wait=0.5, error_cb=_quiet, **credentials
    )


def record(scenario: str, **figures: Any) -> None:
    """Print (and optionally append to :data:`FIGURES_FILE`) what a scenario measured."""
    line = json.dumps({"scenario": scenario, **figures})
    print(f"FAULT-FIGURES {line}")
    if FIGURES_FILE:
        with open(FIGURES_FILE, "a") as f:
            f.write(line + "\n")


async def eventually(check: Any, timeout: float, interval: float = 0.5, what: str = "condition") -> Any:
    """:func:`tests.support.assert_eventually`, polling less often by default (these checks query
    a running instance)."""
    return await assert_eventually(check, timeout, interval, what)


@dataclass
class Instance:
    """One ``noemactl up`` on the embedded default, in its own data folder."""

    root: Path
    env_overrides: dict[str, str] = field(default_factory=dict)
    up: subprocess.Popen[bytes] | None = None
    pool: asyncpg.Pool | None = None
    nc: NATS | None = None

    @property
    def data_dir(self) -> Path:
        """The data folder ``up`` runs in."""
        return self.root / "var"

    @property
    def log_path(self) -> Path:
        """Where ``up`` and every child log (JSON lines)."""
        return self.root / "up.log"

    def env(self) -> dict[str, str]:
        """The environment of ``up`` and of every ``noemactl`` call on this instance."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA_")}
        env.update(
            NOEMA_DATA_DIR=str(self.data_dir),
            NOEMA_API_PORT=str(free_port()),
            NOEMA_LOG_FORMAT="json",
            NOEMA_ATTEND_THRESHOLD="0",  # every observation is admitted: one memory each
            NOEMA_ATTEND_CAPACITY="100000",
        )
        env.update(self.env_overrides)
        return env

    def start(self) -> None:
        """Start ``up`` (returns at once; see :meth:`ready`)."""
        self._env = self.env()
        with self.log_path.open("ab") as log:
            self.up = subprocess.Popen([*NOEMACTL, "up"], env=self._env, stdout=log, stderr=subprocess.STDOUT)

    def state(self) -> dict[str, Any]:
        """The state file ``up`` writes (addresses, service pids), its ``nats_url`` with the
        operator's credentials put in (``nats_user``, ``nats_password``), as Noema connects."""
        state = dict(json.loads((self.data_dir / "noema.json").read_text()))
        state["nats_url"] = state_nats_url(state)
        return state

    async def ready(self, timeout: float = 180.0) -> None:
        """Wait until ``up`` wrote its state and every durable consumer exists; open connections."""
        assert self.up is not None

        async def state_written() -> bool:
            assert self.up is not None
            assert self.up.poll() is None, f"noemactl up exited with {self.up.returncode}: {self.tail()}"
            # Its own state: a killed `up` before it leaves one behind.
            with contextlib.suppress(OSError, ValueError):
                return bool(self.state()["pid"] == self.up.pid)
            return False

        await eventually(state_written, timeout, 0.2, "noemactl up writing its state")
        state = self.state()
        self.nc = await client(state["nats_url"])
        self.pool = await asyncpg.create_pool(
            state["database_url"], min_size=1, max_size=2, server_settings={"search_path": SCHEMA}
        )
        js = self.nc.jetstream()

        # embed runs only with an embedder; like the claimed workers, it creates its durable consumer
        # once it holds its claim, which can be well after ``up`` wrote its state on a loaded machine.
        workers = DURABLES + (("embed",) if "embed" in state["services"] else ())

        async def consumers_exist() -> bool:
            for name in workers:
                watched = watched_consumer(name, self.topology)
                assert watched is not None, name
                stream = watched.stream
                for durable in self.durables(name):
                    try:
                        await js.consumer_info(stream, durable)
                    except NotFoundError:
                        return False
                    except nats.errors.Error:
                        # A cluster just started may not answer yet (its JetStream leaders are being
                        # elected, more slowly on busy cores): not there yet, ask again.
                        return False
            return True

        await eventually(consumers_exist, timeout, 0.5, "every durable consumer")

    @property
    def topology(self) -> Topology:
        """The instance's names: its partition count is ``NOEMA_PARTITIONS`` of its environment."""
        return Topology(PREFIX, int(self.env_overrides.get("NOEMA_PARTITIONS", "1")))

    def durables(self, worker: str) -> list[str]:
        """The durable consumers of ``worker``: one, or one per partition (attend, conflicts)."""
        watched = watched_consumer(worker, self.topology)
        assert watched is not None, worker
        return list(watched.durables or (watched.durable,))

    def tail(self, lines: int = 30) -> str:
        """The end of the log, for failure messages."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def events(self, event: str) -> list[dict[str, Any]]:
        """Every JSON log record of ``up`` and its children with this ``event`` text."""
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            if line.startswith("{") and f'"{event}"' in line:
                with contextlib.suppress(ValueError):
                    record_ = json.loads(line)
                    if record_.get("event") == event:
                        out.append(record_)
        return out

    def story(self, worker: str, lines: int = 60) -> str:
        """What ``worker``'s instances logged about themselves (claims, partitions, restarts,
        warnings and errors) — for a failure message, so a failed run on another machine says why."""
        told = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            if not line.startswith("{"):
                continue
            with contextlib.suppress(ValueError):
                record_ = json.loads(line)
                mine = worker in (record_.get("worker"), str(record_.get("service", "")).partition("-")[0])
                loud = record_.get("level") in ("warning", "error", "critical")
                if mine and (loud or "partition" in str(record_.get("event")) or "claim" in str(record_)):
                    told.append(line[:400])
        return "\n".join(told[-lines:])

    def nats_process(self) -> psutil.Process:
        """The embedded nats-server (a child of ``up``)."""
        assert self.up is not None
        found = [p for p in psutil.Process(self.up.pid).children() if p.name() == "nats-server"]
        assert len(found) == 1, f"one nats-server expected under up, found {found}"
        return found[0]

    def postmaster(self) -> psutil.Process:
        """The embedded PostgreSQL postmaster (daemonised: not a child of ``up``)."""
        pid = int((self.data_dir / "pg" / "postmaster.pid").read_text().split()[0])
        return psutil.Process(pid)

    def freeze(self) -> None:
        """Pause the supervisor (its children run on), so a fault can be set up before it reacts."""
        assert self.up is not None
        self.up.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        """Let the supervisor run again."""
        assert self.up is not None
        self.up.send_signal(signal.SIGCONT)

    def ctl(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run ``noemactl`` against this instance."""
        return subprocess.run(
            [*NOEMACTL, *args], env=self._env, capture_output=True, text=True, timeout=timeout
        )

    @contextlib.contextmanager
    def paused(self, *services: str) -> Iterator[None]:
        """SIGSTOP these services for a while (a quiet moment for ``replay``, which compares with the
        live read model as it is), SIGCONT them afterwards."""
        pids = [int(self.state()["services"][name]) for name in services]
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

    async def settle(self, consumers: tuple[str, ...] = ("attend",), timeout: float = 240.0) -> None:
        """Wait until the pipeline is idle: nothing pending for these observation consumers, and the
        read model holds the whole event stream, unchanged over three polls."""
        assert self.nc is not None
        assert self.pool is not None
        js, pool = self.nc.jetstream(), self.pool
        seen: list[int] = []

        async def idle() -> bool:
            for durable in (d for name in consumers for d in self.durables(name)):
                info = await js.consumer_info(TOPOLOGY.observation_stream, durable)
                if info.num_pending or info.num_ack_pending:
                    seen.clear()
                    return False
            last = (await js.stream_info(TOPOLOGY.event_stream)).state.last_seq
            projected = await pool.fetchval("SELECT coalesce(max(seq), 0) FROM events")
            seen.append(last if projected == last else -1)
            return len(seen) >= 3 and len(set(seen[-3:])) == 1 and seen[-1] != -1

        await eventually(idle, timeout, 1.0, "an idle pipeline (everything consumed and projected)")

    async def assert_replay_matches(self, pause: tuple[str, ...] = ("retrieve", "embed")) -> dict[str, Any]:
        """``noemactl replay`` rebuilds the read model from the stream and it matches the live one.

        Compared on a quiet system: the services that would keep adding events (recall proposals,
        vectors) are paused meanwhile, and attend and the projector have finished."""
        running = [name for name in pause if name in self.state()["services"]]
        with self.paused(*running):
            await self.settle()
            result = await asyncio.to_thread(self.ctl, "replay", "--json")
        assert result.returncode == 0, f"replay failed: {result.stderr}{result.stdout}"
        report = dict(json.loads(result.stdout))
        assert report["match"] is True, report
        return report

    async def assert_consumer_resumes(self, name: str, since_seq: int, timeout: float = 120.0) -> None:
        """The durable observation consumer ``name`` delivers messages past ``since_seq``."""
        assert self.nc is not None
        js = self.nc.jetstream()

        async def delivered() -> bool:
            info = await js.consumer_info(TOPOLOGY.observation_stream, TOPOLOGY.durable(name))
            seq: int = info.delivered.stream_seq
            return seq > since_seq

        try:
            await eventually(delivered, timeout, 0.5, f"{name} delivering again")
        except AssertionError as exc:
            state = "unknown"
            with contextlib.suppress(Exception):
                info = await js.consumer_info(TOPOLOGY.observation_stream, TOPOLOGY.durable(name))
                state = (
                    f"delivered {info.delivered.stream_seq}, ack floor {info.ack_floor.stream_seq}, "
                    f"pending {info.num_pending}, ack pending {info.num_ack_pending}, "
                    f"waiting pulls {info.num_waiting}, redelivered {info.num_redelivered}"
                )
            raise AssertionError(
                f"{exc}\nthe consumer: {state}\n{name}'s story:\n{self.story(name)}\nlog:\n{self.tail(40)}"
            ) from None

    async def close_clients(self) -> None:
        """Close the test's own connections."""
        if self.pool is not None:
            await self.pool.close()
            self.pool = None
        if self.nc is not None:
            await self.nc.close()
            self.nc = None

    def stop(self) -> float:
        """Ctrl-C: returns how long ``up`` took to exit; asserts a clean stop (exit 0, no service
        killed, no process left: not a worker, not nats-server, not the postmaster)."""
        assert self.up is not None
        children = psutil.Process(self.up.pid).children(recursive=True)
        postmaster = self.postmaster()
        started = time.monotonic()
        self.up.send_signal(signal.SIGINT)
        code = self.up.wait(60)
        took = time.monotonic() - started
        _, alive = psutil.wait_procs([*children, postmaster], timeout=5)
        assert code == 0, f"up exited with {code}: {self.tail()}"
        assert not alive, f"left running after stop: {[p.cmdline() for p in alive]}"
        killed = self.events("service did not stop in time; killing")
        assert not killed, f"services had to be killed: {killed}"
        return took

    def keep_log(self, name: str) -> None:
        """Copy the log to ``$NOEMA_FAULT_LOGS/<name>.log`` when that variable is set."""
        folder = os.environ.get("NOEMA_FAULT_LOGS")
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            shutil.copy(self.log_path, Path(folder) / f"{name}.log")

    def force_stop(self) -> None:
        """Teardown after a failure: stop whatever is still running."""
        if self.up is not None and self.up.poll() is None:
            self.up.send_signal(signal.SIGCONT)
            self.up.send_signal(signal.SIGINT)
            try:
                self.up.wait(30)
            except subprocess.TimeoutExpired:
                self.up.kill()
        with contextlib.suppress(Exception):
            self.postmaster().send_signal(signal.SIGINT)


@contextlib.contextmanager
def temporary_root() -> Iterator[Path]:
    """A folder outside /root (the embedded PostgreSQL runs as a system user when we are root)."""
    path = Path(tempfile.mkdtemp(prefix="noema-fault-", dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class Publisher:
    """Publishes observations at a steady pace and remembers which ones JetStream acknowledged."""

    def __init__(
        self,
        nats_url: str,
        rate: float = 50.0,
        workspace: str = "acme",
        *,
        retry: bool = False,
        workspaces: tuple[str, ...] = (),
    ) -> None:
        self._url = nats_url
        self._pause = 1.0 / rate
        self._workspaces = workspaces or (workspace,)
        """Observation i goes to ``workspaces[i % len(workspaces)]``, to mind ``agent<i % 4>``."""
        self.scopes: dict[str, tuple[str, str]] = {}
        """Each attempted observation's workspace and mind."""
        self._retry = retry
        """Publish an observation that was not acknowledged again, with the same id, until it is
        (as a client should): JetStream stores it once whether or not the first try was stored."""
        self.attempted: list[str] = []
        self.acked: dict[str, float] = {}  # observation id -> when it was acknowledged (monotonic)
        self.failures = 0
        self.duplicates = 0
        """Retries JetStream acknowledged as already stored (the failed try had been stored)."""
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start publishing in the background."""
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Stop publishing (the publish in flight completes or fails)."""
        self._stop.set()
        if self._task is not None:
            await self._task

    async def _run(self) -> None:
        nc = await client(self._url)
        js = nc.jetstream()
        i = 0
        try:
            while not self._stop.is_set():
                obs = build_observation(
                    f"observation {i}: host-{i % 97} reported status {i * 7 % 13}",
                    workspace=self._workspaces[i % len(self._workspaces)],
                    mind=f"agent{i % 4}",
                )
                i += 1
                self.attempted.append(obs.id)
                self.scopes[obs.id] = (obs.workspace, obs.mind)
                while True:
                    try:
                        stored = await send_observation(js, obs, topology=TOPOLOGY, timeout=2.0)
                    except Exception:  # not acknowledged: it may or may not be stored; never counted
                        self.failures += 1
                        await asyncio.sleep(0.2)
                        if self._retry and not self._stop.is_set():
                            continue
                        break
                    self.duplicates += stored.duplicate
                    self.acked[obs.id] = time.monotonic()
                    await asyncio.sleep(self._pause)
                    break
        finally:
            await nc.close()


async def memory_counts(pool: asyncpg.Pool) -> dict[str, int]:
    """Memories per source observation id."""
    rows = await pool.fetch(
        "SELECT source_observation_ids[1] AS obs, count(*) AS n FROM memories "
        "WHERE kind = 'episodic' GROUP BY 1"
    )
    return {r["obs"]: int(r["n"]) for r in rows}


async def wait_all_memories(pool: asyncpg.Pool, ids: set[str], timeout: float) -> float:
    """Wait until every id in ``ids`` has a memory; returns when that happened (monotonic)."""

    async def all_there() -> bool:
        counts = await memory_counts(pool)
        missing = ids - counts.keys()
        return not missing or False

    await eventually(all_there, timeout, 0.5, f"a memory for each of {len(ids)} acknowledged observations")
    return time.monotonic()


async def why_missing(instance: Instance, missing: set[str]) -> str:
    """Where the observations without a memory are: their attention decisions, the consumers' state,
    the event stream against the read model, dead letters and the workers' own story — so a failed
    run on another machine says why."""
    assert instance.pool is not None
    pool = instance.pool
    lines = [f"{len(missing)} without a memory, e.g. {sorted(missing)[:3]}"]
    with contextlib.suppress(Exception):
        decided = await pool.fetchval(
            "SELECT count(DISTINCT d->>'candidate_id') "
            "FROM events e, jsonb_array_elements(e.payload->'decisions') d "
            "WHERE e.type = 'attention.decided.v1' AND d->>'candidate_id' = ANY($1::text[])",
            sorted(missing),
        )
        lines.append(f"of them with an attention decision in the read model: {decided}")
        projected = await pool.fetchval("SELECT coalesce(max(seq), 0) FROM events")
        lines.append(f"read model's last event seq: {projected}")
    if instance.nc is not None:
        js = instance.nc.jetstream()
        with contextlib.suppress(Exception):
            last = (await js.stream_info(TOPOLOGY.event_stream)).state.last_seq
            lines.append(f"event stream's last seq: {last}")
        for stream, worker in ((TOPOLOGY.observation_stream, "attend"), (TOPOLOGY.event_stream, "projector")):
            for durable in instance.durables(worker):
                with contextlib.suppress(Exception):
                    info = await js.consumer_info(stream, durable)
                    lines.append(
                        f"{durable}: pending {info.num_pending}, ack pending {info.num_ack_pending}, "
                        f"redelivered {info.num_redelivered}, delivered to seq {info.delivered.stream_seq}, "
                        f"acked to seq {info.ack_floor.stream_seq}"
                    )
    dead = instance.events("message dead-lettered")
    told = [{k: d.get(k) for k in ("worker", "seq", "reason")} for d in dead[:3]]
    lines.append(f"dead-lettered: {len(dead)} {told}")
    for worker in ("attend", "projector"):
        lines.append(f"--- {worker}:\n{instance.story(worker, 15)}")
    return "\n".join(lines)


async def assert_exactly_once(pool: asyncpg.Pool, acked: set[str], attempted: set[str]) -> dict[str, int]:
    """0 lost, 0 duplicated: one memory per acknowledged observation, none for anything never
    published, no event id twice, one attention decision per observation, one memory.created per
    memory. Returns the counts."""
    counts = await memory_counts(pool)
    lost = acked - counts.keys()
    duplicated = {k: n for k, n in counts.items() if n > 1}
    invented = counts.keys() - attempted
    assert not lost, f"{len(lost)} acknowledged observations have no memory, e.g. {sorted(lost)[:3]}"
    assert not duplicated, f"{len(duplicated)} observations have several memories: {list(duplicated)[:3]}"
    assert not invented, f"memories for observations never published: {sorted(invented)[:3]}"
    dup_event_ids = await pool.fetch(
        "SELECT id, count(*) AS n, array_agg(type) AS types FROM events "
        "GROUP BY id HAVING count(*) > 1 LIMIT 5"
    )
    assert not dup_event_ids, f"event ids stored more than once: {[dict(r) for r in dup_event_ids]}"
    dup_decisions = await pool.fetch(
        "SELECT d->>'candidate_id' AS obs, count(*) AS n, array_agg(DISTINCT e.id) AS events "
        "FROM events e, jsonb_array_elements(e.payload->'decisions') d "
        "WHERE e.type = 'attention.decided.v1' "
        "AND coalesce(d->>'candidate_kind', 'observation') = 'observation' "
        "GROUP BY 1 HAVING count(*) > 1"
    )
    assert not dup_decisions, (
        f"{len(dup_decisions)} observations were decided more than once (attention.decided with "
        f"different event ids on redelivery), e.g. {[dict(r) for r in dup_decisions[:3]]}"
    )
    dup_created = await pool.fetchval(
        "SELECT count(*) - count(DISTINCT payload->>'memory_id') FROM events WHERE type = 'memory.created.v1'"
    )
    assert dup_created == 0, f"{dup_created} memories were created by more than one memory.created event"
    events = int(await pool.fetchval("SELECT count(*) FROM events"))
    return {"acknowledged": len(acked), "memories": sum(counts.values()), "events": events}


async def working_memory_forks(pool: asyncpg.Pool) -> list[str]:
    """Working memory updates that did not continue their mind's previous one.

    A cycle stores its new memories and its mind's working memory together, so every item that
    enters a working memory was created after the mind's previous update. Two owners deciding one
    mind from the same state would leave one update holding an item the other had already evicted:
    an item created before the previous update, but not in it."""
    rows = await pool.fetch(
        "SELECT seq, type, workspace, mind, payload::text AS payload FROM events "
        "WHERE type IN ('memory.created.v1', 'working_memory.updated.v1') ORDER BY seq"
    )
    created: dict[str, int] = {}
    last: dict[tuple[str, str], tuple[int, set[str]]] = {}
    forks: list[str] = []
    for r in rows:
        payload = json.loads(r["payload"])
        if r["type"] == "memory.created.v1":
            created[payload["memory_id"]] = r["seq"]
            continue
        key = (r["workspace"], r["mind"])
        items = {i["memory_id"] for i in payload["items"]}
        previous_seq, previous = last.get(key, (0, set()))
        forks += [
            f"seq {r['seq']} ({key}): {m} created at {created.get(m)}, not in the update at {previous_seq}"
            for m in items - previous
            if created.get(m, 0) < previous_seq
        ]
        last[key] = (r["seq"], items)
    return forks


async def propose_rival_facts(instance: Instance, workspace: str) -> None:
    """Two contradicting facts about one slot of ``workspace``, proposed at once (one must win)."""
    race = [
        asyncio.to_thread(
            instance.ctl, "fact", "propose", text, "-w", workspace, "-d", "ops", "-t", "deploy-day"
        )
        for text in ("Deploys happen on Fridays", "Deploys happen on Tuesdays")
    ]
    for done in await asyncio.gather(*race):
        assert done.returncode == 0, done.stderr


async def until_published(publisher: Publisher, count: int) -> None:
    """Wait until ``count`` observations are acknowledged."""

    async def published() -> bool:
        return len(publisher.acked) >= count

    await eventually(published, 300, 0.2, f"{count} observations acknowledged")


async def assert_settled_exactly_once(pool: asyncpg.Pool, publisher: Publisher) -> dict[str, int]:
    """Once the (stopped) publisher's acknowledged observations all have a memory:
    :func:`assert_exactly_once`, and no working memory forked. Returns the counts."""
    acked = set(publisher.acked)

    async def all_memories() -> bool:
        return not acked - (await memory_counts(pool)).keys()

    await eventually(all_memories, 400, 0.5, f"a memory for each of {len(acked)} acknowledged observations")
    counts = await assert_exactly_once(pool, acked, set(publisher.attempted))
    forks = await working_memory_forks(pool)
    assert not forks, f"{len(forks)} working memory forks, e.g. {forks[:3]}"
    return counts


@contextlib.asynccontextmanager
async def running(request: Any, env: dict[str, str]) -> AsyncIterator[Instance]:
    """A fresh ``up`` with these settings in a temporary folder, ready; stopped (its log kept, see
    :meth:`Instance.keep_log`) afterwards."""
    with temporary_root() as root:
        inst = Instance(root, env)
        inst.start()
        try:
            await inst.ready()
            yield inst
        finally:
            await inst.close_clients()
            inst.force_stop()
            inst.keep_log(request.node.name)
