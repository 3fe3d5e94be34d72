"""``noemactl up``: start the embedded servers (unless external ones are configured), prepare them,
then run every worker and the operator API as child processes until SIGINT/SIGTERM.

Nothing is given up on. An embedded server (NATS, PostgreSQL) that exits is restarted at once, and
again with backoff while it cannot start; the workers that need it are restarted only after it is
back. A worker that exits is restarted with capped exponential backoff (0.5 s doubling to 30 s,
reset after 30 s of stable running); its durable consumer resumes where it stopped. Every exit and
restart is logged. SIGINT/SIGTERM stops the workers (all at once, a few seconds' grace), then NATS,
then PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import structlog

from noema.adapters.embedders import EmbedderConfigError
from noema.adapters.postgres import migrate
from noema.adapters.postgres.roles import DbRole, prepare_database_at
from noema.runtime.cluster import EmbeddedCluster
from noema.runtime.credentials import redact_url
from noema.runtime.embedded import EmbeddedNats, EmbeddedPostgres, die_with_parent, resolve_data_dir
from noema.runtime.embedding import check_configured
from noema.runtime.identities import service_user
from noema.runtime.locate import (
    nats_fields,
    read_state,
    register,
    registered,
    registry_dir,
    state_path,
    unregister,
    write_state,
)
from noema.runtime.settings import Located, Settings, SettingsError
from noema.runtime.wiring import open_bus
from noema_api.settings import prepare_tokens

__all__ = ["CLAIMED", "NEEDS", "SERVICES", "Backoff", "Supervisor", "child_env", "kind_of", "prepare"]

log = structlog.get_logger("noema.up")

SERVICES: dict[str, str] = {
    "attend": "noema_attend",
    "projector": "noema_projector",
    "embed": "noema_embed",
    "retrieve": "noema_retrieve",
    "decay": "noema_decay",
    "conflicts": "noema_conflicts",
    "api": "noema_api",
    "service": "noema_service",
}
"""Every process ``up`` runs: name → module (``python -m <module>``); embed only with an embedder."""

NEEDS: dict[str, tuple[str, ...]] = {"embed": ("nats",)}
"""The servers a service cannot work without, when not both (``nats`` and ``postgres``; attend
needs PostgreSQL too: its claim is a lock there)."""

CLAIMED = ("attend", "projector", "conflicts")
"""The workers that run under a claim (noema.runtime.claims): ``NOEMA_REPLICAS`` runs that many of
each (``attend``, ``attend-2``, ...), one working and the others standing by."""


def kind_of(child: str) -> str:
    """The service a child is an instance of (``attend-2`` → ``attend``)."""
    return child.partition("-")[0]


BACKOFF_INITIAL_S = 0.5
BACKOFF_CAP_S = 30.0
STABLE_AFTER_S = 30.0
"""A service that ran this long before exiting starts its backoff again from the initial delay."""
SERVER_BACKOFF_CAP_S = 5.0
STREAMS_TIMEOUT_S = 15.0
"""How long restoring the streams after a NATS restart may take before it is tried again."""
STREAMS_RETRY_S = 2.0
"""Between two failed attempts to start an embedded server again: nothing works without it."""
STOP_GRACE_S = 3.5
"""How long the services have to stop on SIGTERM before they are killed (all at once)."""
POLL_S = 0.2
READY_POLL_S = 1.0
"""How often `up` asks the API's /readyz until it first says ready."""
READY_TIMEOUT_S = 2.0


@dataclass
class Backoff:
    """Capped exponential backoff: ``initial`` doubling up to ``cap``, reset after a stable run."""

    initial: float = BACKOFF_INITIAL_S
    cap: float = BACKOFF_CAP_S
    stable_after: float = STABLE_AFTER_S
    failures: int = 0

    def next_delay(self, ran_for: float = 0.0) -> float:
        """The wait before the next attempt, after one that ended after ``ran_for`` seconds."""
        if ran_for >= self.stable_after:
            self.failures = 0
        delay = min(self.cap, self.initial * 2.0**self.failures)
        self.failures += 1
        return delay

    def reset(self) -> None:
        """Forget earlier failures (their cause is gone)."""
        self.failures = 0


EnvOf = Callable[[str], dict[str, str]]
"""A child's environment, by the child's name (once the servers are located)."""

DB_ROLES_OF: dict[str, DbRole] = {"projector": "projector"}
"""The database role of each process that needs more than the read-only one."""


def child_env(base: dict[str, str], settings: Located, name: str) -> dict[str, str]:
    """A child's environment: the settings, with its own database role's URL as the only one
    (so no child can sign in as the schema owner, or write unless it is the projector)."""
    env = {**base, **settings.to_env()}
    for var in ("NOEMA_DATABASE_URL_PROJECTOR", "NOEMA_DATABASE_URL_READER"):
        env.pop(var, None)
    env["NOEMA_DATABASE_URL"] = settings.database_url_for(DB_ROLES_OF.get(name, "reader"))
    return env


async def prepare(settings: Located, superuser_url: str | None = None) -> None:
    """Give the owner role the schema (with ``superuser_url``: the embedded server), apply migrations
    as the owner, grant the application roles, create the streams (all idempotent)."""
    if superuser_url is not None:
        await prepare_database_at(superuser_url, settings.db_schema)
    await migrate(settings.database_url, settings.db_schema)
    await prepare_streams(settings)


async def prepare_streams(settings: Located) -> None:
    """Create the streams, or update them to the settings (as the operator: ``settings``' NATS
    identity must be allowed to)."""
    async with AsyncExitStack() as stack:
        await open_bus(settings, stack, "noema-up")


@dataclass
class _Child:
    name: str
    module: str
    needs: tuple[str, ...] = ("nats", "postgres")
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    restart_at: float | None = None
    restarts: int = 0
    backoff: Backoff = field(default_factory=Backoff)
    waiting_for: frozenset[str] = frozenset()
    metrics_port: int | None = None
    """Its own metrics port (``NOEMA_METRICS_PORT`` and up, one per child); None: as configured."""


class _Restartable(Protocol):
    @property
    def alive(self) -> bool: ...

    def restart(self) -> None: ...


@dataclass
class _Server:
    name: str
    server: _Restartable
    down_since: float | None = None
    restart_at: float = 0.0
    attempts: int = 0
    backoff: Backoff = field(default_factory=lambda: Backoff(cap=SERVER_BACKOFF_CAP_S, stable_after=1e9))

    @property
    def kind(self) -> str:
        """What the services need it as: ``nats`` (each server of a cluster, ``nats-<i>``, too)."""
        return self.name.partition("-")[0]


def _down(servers: list[_Server]) -> frozenset[str]:
    """The kinds of server that are down: NATS only when every server of a cluster is."""
    down = {s.name for s in servers if s.down_since is not None}
    nats = [s for s in servers if s.kind == "nats"]
    if nats and all(s.name in down for s in nats):
        down.add("nats")
    return frozenset(down)


def _embedded_nats(settings: Settings, data_dir: Path) -> EmbeddedNats | EmbeddedCluster:
    """The embedded NATS ``up`` runs: one server, or a cluster of ``NOEMA_NATS_NODES``."""
    if settings.stream_replicas > settings.nats_nodes:
        raise RuntimeError(
            f"NOEMA_STREAM_REPLICAS={settings.stream_replicas} needs as many NATS servers; the embedded "
            f"NATS has {settings.nats_nodes} (NOEMA_NATS_NODES)"
        )
    if settings.nats_nodes > 1:
        return EmbeddedCluster(
            data_dir, settings.nats_nodes, prefix=settings.prefix, partitions=settings.partitions
        )
    return EmbeddedNats(data_dir, prefix=settings.prefix, partitions=settings.partitions)


def _assign_metrics_ports(children: list[_Child], settings: Settings) -> dict[str, str]:
    """With ``NOEMA_METRICS_PORT`` set to a port, each child but the API (which serves ``/metrics``
    on its own port) gets one of its own, counting up from it, as they would all share one host;
    returns where each child's metrics are (the API's included), for the state file."""
    api = f"http://{settings.api_host}:{settings.api_port}/metrics"
    if not settings.metrics_port:  # unset: none served; 0: each child takes a free port (logged)
        return {"api": api}
    where = {}
    ports = iter(range(settings.metrics_port, 65536))
    for child in children:
        if kind_of(child.name) == "api":
            continue
        child.metrics_port = next(ports, None)
        if child.metrics_port is None:
            raise SettingsError(
                f"NOEMA_METRICS_PORT={settings.metrics_port} leaves too few ports for every service"
            )
        where[child.name] = f"http://{settings.metrics_host}:{child.metrics_port}/metrics"
    return {"api": api, **where}


def port_in_use(host: str, port: int) -> bool:
    """Whether something listens on ``host:port``, so a server could not bind it (SO_REUSEADDR, as
    uvicorn binds: a connection of a stopped server in TIME_WAIT does not count)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
        return False


def _fixed_ports(children: list[_Child], settings: Settings) -> list[tuple[str, str, int, str]]:
    """The fixed ports the children will listen on: (child, host, port, the setting choosing it)."""
    ports = []
    for child in children:
        if kind_of(child.name) == "api" and settings.api_port:
            ports.append((child.name, settings.api_host, settings.api_port, "NOEMA_API_PORT"))
        elif child.metrics_port:
            ports.append((child.name, settings.metrics_host, child.metrics_port, "NOEMA_METRICS_PORT"))
    return ports


def _taken_port(children: list[_Child], settings: Settings) -> tuple[str, str, int, str] | None:
    """The first fixed port of :func:`_fixed_ports` that something else already listens on."""
    return next((p for p in _fixed_ports(children, settings) if port_in_use(p[1], p[2])), None)


class Supervisor:
    """Owns the embedded servers and the worker processes of one data folder."""

    def __init__(self, settings: Settings, services: dict[str, str] | None = None) -> None:
        self.settings = settings
        if services is None:
            services = {k: v for k, v in SERVICES.items() if k != "embed" or settings.embedder != "none"}
        self.services = services
        # A plain flag: a signal handler must not take locks (threading.Event.set can deadlock there).
        self._stop_requested = False
        self._nats: EmbeddedNats | EmbeddedCluster | None = None
        self._pg: EmbeddedPostgres | None = None
        self._children: list[_Child] = []
        self._servers: list[_Server] = []
        self._data_dir: Path | None = None
        self._located: Located | None = None
        self._streams_due: float | None = None
        """When the streams are to be checked again after a NATS restart (None: not needed)."""
        self._ready_due: float | None = None
        """When to ask the API's /readyz again until it first answers 200 (None: said, or no API)."""
        self._up_at = 0.0
        self._ready_url = ""

    def request_stop(self, *_: Any) -> None:
        """Ask the supervisor to stop everything (signal-safe)."""
        self._stop_requested = True

    def _child_env(self, name: str, env: dict[str, str]) -> dict[str, str]:
        """The environment of child ``name``: on the embedded NATS, its own identity's credentials
        (each process may do only what it needs; noema.runtime.identities)."""
        if self._nats is None:
            return env
        return {
            **env,
            "NOEMA_NATS_URL": self._nats.url,
            "NOEMA_NATS_USER": service_user(name),
            "NOEMA_NATS_PASSWORD": self._nats.credentials.password(name),
        }

    def _spawn(self, child: _Child, env_of: EnvOf) -> None:
        # Own session: Ctrl-C reaches only the supervisor, which then stops the children in order.
        # die_with_parent: a killed supervisor does not leave workers behind.
        env = env_of(kind_of(child.name))
        if child.metrics_port is not None:
            env["NOEMA_METRICS_PORT"] = str(child.metrics_port)
        child.proc = subprocess.Popen(
            [sys.executable, "-m", child.module],
            env=env,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        child.started_at = time.monotonic()
        if child.restarts:
            log.warning("service restarted", service=child.name, pid=child.proc.pid, restarts=child.restarts)
        else:
            log.info("service started", service=child.name, pid=child.proc.pid)
        state = read_state(self._data_dir) if self._data_dir else None
        if state is not None and self._data_dir is not None:
            state["services"][child.name] = child.proc.pid
            write_state(self._data_dir, state)

    def run(self) -> int:
        """Start everything, supervise until stopped; returns the process exit code."""
        data_dir = resolve_data_dir(self.settings.data_dir)
        running = read_state(data_dir)
        if running is not None:
            # One line in the log's own format (JSON off a terminal): a plain-text line would break it.
            log.error(
                "already running",
                data_dir=str(data_dir),
                pid=running.get("pid"),
                hint="stop it first, or give another data folder (--data-dir or NOEMA_DATA_DIR)",
            )
            return 5  # conflict (docs/errors.md): the data folder is in use
        settings = Settings(**{**self.settings.__dict__, "data_dir": data_dir})
        # Before any server starts: a metrics port range that does not fit is refused at once.
        self._children = [
            _Child(name, module, NEEDS.get(name, ("nats", "postgres")))
            for name, module in self.services.items()
        ] + [
            _Child(f"{name}-{i}", self.services[name])
            for name in CLAIMED
            if name in self.services
            for i in range(2, settings.replicas + 1)
        ]
        metrics = _assign_metrics_ports(self._children, settings)
        taken = _taken_port(self._children, settings)
        if taken is not None:
            # Before anything starts: the API would otherwise restart forever on "address already in
            # use" while `status` asked whatever else answers there.
            service, host, port, setting = taken
            log.error(
                "port in use",
                service=service,
                address=f"{host}:{port}",
                hint=f"another Noema or program listens there: stop it, or choose another with {setting}",
            )
            return 5  # conflict (docs/errors.md)
        # Only now, once nothing refused to start: a refused `up` leaves no data folder behind.
        data_dir.mkdir(parents=True, exist_ok=True)
        self._data_dir = data_dir
        with contextlib.suppress(OSError):
            registered(registry_dir())  # forgets the records of instances that died (a killed `up`)
        # SIGHUP too: a closed terminal stops everything cleanly (PostgreSQL is not our child and
        # would otherwise be left running).
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, self.request_stop)
        embedded = not settings.external
        superuser_url = None
        try:
            if embedded:
                if settings.nats_url is None:
                    self._nats = _embedded_nats(settings, data_dir)
                    self._nats.start()
                self._pg = EmbeddedPostgres(data_dir)
                self._pg.start()
                # On our own NATS, `up` itself (preparing the streams) and noema.json are the operator.
                nats_url = self._nats.operator_url if self._nats else str(settings.nats_url)
                if settings.database_url is None:
                    superuser_url = self._pg.url
                    located = settings.with_urls(
                        nats_url,
                        self._pg.role_url("owner"),
                        projector_url=self._pg.role_url("projector"),
                        reader_url=self._pg.role_url("reader"),
                    )
                else:
                    located = settings.with_urls(nats_url, settings.database_url)
            else:
                located = Located.of(settings)
            asyncio.run(prepare(located, superuser_url))
            try:
                # Before any worker starts: a wrong embedding server, model or dimensions refuses.
                asyncio.run(check_configured(located))
            except EmbedderConfigError as exc:
                log.error("embedder unusable", error=str(exc))
                return 2
            self._located = located
            tokens_file, created = prepare_tokens(located)
            base = dict(os.environ)

            def env_of(name: str) -> dict[str, str]:
                return self._child_env(name, child_env(base, located, name))

            if self._nats is not None and self._pg is not None:
                nats_servers = (
                    [_Server(n.stem, n) for n in self._nats.nodes]
                    if isinstance(self._nats, EmbeddedCluster)
                    else [_Server("nats", self._nats)]
                )
                self._servers = [*nats_servers, _Server("postgres", self._pg)]
            for child in self._children:
                self._spawn(child, env_of)
            write_state(
                data_dir,
                {
                    "pid": os.getpid(),
                    "started_at": datetime.now(UTC).isoformat(),
                    # The URL without credentials, the operator's beside it (nats.js refuses them
                    # in a URL); `locate` puts them back (noema.runtime.locate.state_nats_url).
                    **nats_fields(located.nats_url),
                    # Without credentials: `locate` adds those of the identity asking (e.g. mcp).
                    "nats_plain_url": self._nats.url if self._nats else None,
                    "database_url": located.database_url,
                    "database_urls": {
                        role: located.database_url_for(role) for role in ("owner", "projector", "reader")
                    },
                    "api_url": f"http://{located.api_host}:{located.api_port}",
                    "embedded": embedded,
                    "services": {c.name: c.proc.pid for c in self._children if c.proc},
                    "metrics": metrics,
                },
            )
            try:  # so that commands started in another folder (an MCP host's server) find it
                register(registry_dir(), data_dir)
            except OSError as exc:
                log.warning("instance not registered; give other commands --data-dir", error=str(exc))
            log.info(
                "noema is up",
                data_dir=str(data_dir),
                nats=redact_url(located.nats_url),
                api=f"http://{located.api_host}:{located.api_port}",
                api_tokens=str(tokens_file),
                api_token_created=created,
                api_token_hint="run `noemactl api token` to print it",
                ready_hint="`noema is ready` follows once every part has reported (GET /readyz: 200)",
            )
            if "api" in self.services:
                self._up_at = self._ready_due = time.monotonic()
                self._ready_url = f"http://{located.api_host}:{located.api_port}/readyz"
            return self._supervise(env_of)
        finally:
            self._shutdown(data_dir)

    def _supervise(self, env_of: EnvOf) -> int:
        while not self._stop_requested:
            time.sleep(POLL_S)
            now = time.monotonic()
            for server in self._servers:
                if self._stop_requested:
                    break
                self._check_server(server, now)
            down = _down(self._servers)
            if "nats" not in down:
                self._restore_streams(now)
            for child in self._children:
                if self._stop_requested:
                    break
                self._check_child(child, env_of, now, down)
            self._announce_ready(now)
        return 0

    def _announce_ready(self, now: float) -> None:
        """Say `noema is ready` once the API's /readyz first answers 200: the workers have sent
        their first heartbeats a few seconds after `noema is up` (until then /readyz says 503)."""
        if self._ready_due is None or now < self._ready_due:
            return
        try:
            with urllib.request.urlopen(self._ready_url, timeout=READY_TIMEOUT_S) as answer:
                ready = answer.status == 200
        except (OSError, ValueError):  # not serving yet, or 503 (an HTTPError)
            ready = False
        if not ready:
            self._ready_due = time.monotonic() + READY_POLL_S
            return
        self._ready_due = None
        log.info("noema is ready", waited_s=round(now - self._up_at, 1), readyz=self._ready_url)

    def _check_server(self, server: _Server, now: float) -> None:
        """Restart an embedded server that exited: at once, then with backoff until it starts."""
        if server.down_since is None:
            if server.server.alive:
                return
            server.down_since, server.restart_at = now, now
            code = getattr(server.server, "exit_code", None)
            log.error("server exited; restarting", server=server.name, exit_code=code)
        if now < server.restart_at:
            return
        server.attempts += 1
        try:
            server.server.restart()
        except Exception as exc:  # any failure to start is retried: nothing works without it
            delay = server.backoff.next_delay()
            server.restart_at = time.monotonic() + delay
            log.warning(
                "server restart failed; retrying",
                server=server.name,
                attempt=server.attempts,
                error=f"{type(exc).__name__}: {exc}"[:500],
                delay_s=delay,
            )
            return
        log.warning(
            "server restarted",
            server=server.name,
            down_s=round(time.monotonic() - server.down_since, 1),
            attempts=server.attempts,
        )
        server.down_since, server.attempts = None, 0
        server.backoff.reset()
        if server.kind == "nats":
            self._streams_due = now
        for child in self._children:
            if server.kind in child.needs:
                child.backoff.reset()  # their exits were the server's fault

    def _restore_streams(self, now: float) -> None:
        """After a NATS server restarted, create again what the restart lost — the vector cache's
        stream is kept in memory only, and only the operator (``up``) may create a stream; the
        workers work without it meanwhile. Tried again every few seconds until it succeeds."""
        if self._streams_due is None or now < self._streams_due or self._located is None:
            return
        try:
            asyncio.run(asyncio.wait_for(prepare_streams(self._located), STREAMS_TIMEOUT_S))
        except Exception as exc:  # NATS not answering yet, a cluster electing: next time
            self._streams_due = time.monotonic() + STREAMS_RETRY_S
            log.warning(
                "streams not restored yet; retrying",
                error=f"{type(exc).__name__}: {exc}"[:500],
                delay_s=STREAMS_RETRY_S,
            )
            return
        self._streams_due = None
        log.info("streams restored after a NATS restart")

    def _check_child(self, child: _Child, env_of: EnvOf, now: float, down: frozenset[str]) -> None:
        """Restart a service that exited, with backoff, once the servers it needs are up."""
        assert child.proc is not None
        if child.restart_at is not None:
            waiting = down & set(child.needs)
            if waiting != child.waiting_for:
                child.waiting_for = waiting
                if waiting:
                    log.info("service waits for its servers", service=child.name, servers=sorted(waiting))
            if now < child.restart_at or waiting:
                return
            child.restart_at = None
            child.restarts += 1
            self._spawn(child, env_of)
            return
        code = child.proc.poll()
        if code is None:
            return
        ran_for = now - child.started_at
        delay = child.backoff.next_delay(ran_for)
        log.warning(
            "service exited; restarting",
            service=child.name,
            exit_code=code,
            ran_for_s=round(ran_for, 1),
            delay_s=delay,
        )
        child.restart_at = now + delay

    def _shutdown(self, data_dir: Path) -> None:
        for child in self._children:
            if child.proc and child.proc.poll() is None:
                child.proc.terminate()
        deadline = time.monotonic() + STOP_GRACE_S
        for child in self._children:
            if child.proc is None:
                continue
            try:
                child.proc.wait(max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("service did not stop in time; killing", service=child.name)
                child.proc.kill()
                child.proc.wait()
        # The two servers stop side by side: nothing uses either any more.
        pg_stop = threading.Thread(target=self._pg.stop) if self._pg else None
        if pg_stop is not None:
            pg_stop.start()
        if self._nats:
            self._nats.stop()
        if pg_stop is not None:
            pg_stop.join()
        unregister(registry_dir(), data_dir)
        path = state_path(data_dir)
        if path.exists():
            path.unlink()
        log.info("noema stopped")
