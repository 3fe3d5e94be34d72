"""``noemactl up``: start the embedded servers (unless external ones are configured), prepare them,
then run every worker and the operator API as child processes until SIGINT/SIGTERM.

A child that dies is restarted (its durable consumer resumes where it stopped); one that keeps
crashing stops the whole system with a non-zero exit, loudly.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import structlog

from noema.adapters.jetstream import connect, ensure_streams
from noema.adapters.postgres import migrate
from noema.adapters.postgres.roles import DbRole, prepare_database
from noema.embedded import EmbeddedNats, EmbeddedPostgres, resolve_data_dir
from noema.runtime import read_state, state_path, write_state
from noema.settings import Settings
from noema.topology import Topology
from noema_api.settings import prepare_tokens

__all__ = ["SERVICES", "Supervisor", "child_env", "prepare"]

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

MAX_RESTARTS = 5
RESTART_WINDOW_S = 60.0


DB_ROLES_OF: dict[str, DbRole] = {"projector": "projector"}
"""The database role of each process that needs more than the read-only one."""


def child_env(base: dict[str, str], settings: Settings, name: str) -> dict[str, str]:
    """A child's environment: the settings, with its own database role's URL as the only one
    (so no child can sign in as the schema owner, or write unless it is the projector)."""
    env = {**base, **settings.to_env()}
    for var in ("NOEMA_DATABASE_URL_PROJECTOR", "NOEMA_DATABASE_URL_READER"):
        env.pop(var, None)
    env["NOEMA_DATABASE_URL"] = settings.database_url_for(DB_ROLES_OF.get(name, "reader"))
    return env


async def prepare(settings: Settings, superuser_url: str | None = None) -> None:
    """Give the owner role the schema (with ``superuser_url``: the embedded server), apply migrations
    as the owner, grant the application roles, create the streams (all idempotent)."""
    assert settings.nats_url
    assert settings.database_url
    if superuser_url is not None:
        conn = await asyncpg.connect(superuser_url)
        try:
            await prepare_database(conn, settings.db_schema)
        finally:
            await conn.close()
    await migrate(settings.database_url, settings.db_schema)
    nc = await connect(settings.nats_url, name="noema-up")
    try:
        await ensure_streams(
            nc.jetstream(), Topology(settings.prefix), settings.duplicate_window_s, settings.stream_replicas
        )
    finally:
        await nc.close()


@dataclass
class _Child:
    name: str
    module: str
    proc: subprocess.Popen[bytes] | None = None
    crashes: list[float] = field(default_factory=list)
    restart_at: float | None = None


class Supervisor:
    """Owns the embedded servers and the worker processes of one data folder."""

    def __init__(self, settings: Settings, services: dict[str, str] | None = None) -> None:
        self.settings = settings
        if services is None:
            services = {k: v for k, v in SERVICES.items() if k != "embed" or settings.embedder != "none"}
        self.services = services
        # A plain flag: a signal handler must not take locks (threading.Event.set can deadlock there).
        self._stop_requested = False
        self._nats: EmbeddedNats | None = None
        self._pg: EmbeddedPostgres | None = None
        self._children: list[_Child] = []
        self._data_dir: Path | None = None
        self._located = settings
        """The settings with the servers' URLs, once they are known."""

    def request_stop(self, *_: Any) -> None:
        """Ask the supervisor to stop everything (signal-safe)."""
        self._stop_requested = True

    def _spawn(self, child: _Child, env: dict[str, str]) -> None:
        # Own session: Ctrl-C reaches only the supervisor, which then stops the children in order.
        env = child_env(env, self._located, child.name)
        child.proc = subprocess.Popen([sys.executable, "-m", child.module], env=env, start_new_session=True)
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
            log.error("already running", data_dir=str(data_dir), pid=running.get("pid"))
            print(f"Noema is already running from {data_dir} (pid {running.get('pid')})", file=sys.stderr)
            return 1
        data_dir.mkdir(parents=True, exist_ok=True)
        self._data_dir = data_dir
        settings = Settings(**{**self.settings.__dict__, "data_dir": data_dir})
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self.request_stop)
        embedded = not settings.external
        superuser_url = None
        try:
            if embedded:
                self._nats = EmbeddedNats(data_dir)
                self._nats.start()
                self._pg = EmbeddedPostgres(data_dir)
                self._pg.start()
                if settings.database_url is None:
                    superuser_url = self._pg.url
                    settings = settings.with_urls(
                        settings.nats_url or self._nats.url,
                        self._pg.role_url("owner"),
                        projector_url=self._pg.role_url("projector"),
                        reader_url=self._pg.role_url("reader"),
                    )
                else:
                    settings = settings.with_urls(settings.nats_url or self._nats.url, settings.database_url)
            assert settings.nats_url
            assert settings.database_url
            asyncio.run(prepare(settings, superuser_url))
            tokens_file, created = prepare_tokens(settings)
            self._located = settings
            env = dict(os.environ)
            self._children = [_Child(name, module) for name, module in self.services.items()]
            for child in self._children:
                self._spawn(child, env)
            write_state(
                data_dir,
                {
                    "pid": os.getpid(),
                    "started_at": datetime.now(UTC).isoformat(),
                    "nats_url": settings.nats_url,
                    "database_url": settings.database_url,
                    "database_urls": {
                        role: settings.database_url_for(role) for role in ("owner", "projector", "reader")
                    },
                    "api_url": f"http://{settings.api_host}:{settings.api_port}",
                    "embedded": embedded,
                    "services": {c.name: c.proc.pid for c in self._children if c.proc},
                },
            )
            log.info(
                "noema is up",
                data_dir=str(data_dir),
                nats=settings.nats_url,
                api=f"http://{settings.api_host}:{settings.api_port}",
                api_tokens=str(tokens_file),
                api_token_created=created,
            )
            print(f"HTTP API token: run `noemactl api token` (tokens kept in {tokens_file})", file=sys.stderr)
            return self._supervise(env, data_dir)
        finally:
            self._shutdown(data_dir)

    def _supervise(self, env: dict[str, str], data_dir: Path) -> int:
        while not self._stop_requested:
            time.sleep(0.25)
            now = time.monotonic()
            for child in self._children:
                assert child.proc is not None
                if child.restart_at is not None:
                    if now < child.restart_at:
                        continue
                    child.restart_at = None
                    self._spawn(child, env)
                    continue
                code = child.proc.poll()
                if code is None:
                    continue
                child.crashes = [t for t in child.crashes if now - t < RESTART_WINDOW_S] + [now]
                if len(child.crashes) > MAX_RESTARTS:
                    log.error("service keeps crashing; stopping", service=child.name, exit_code=code)
                    return 1
                delay = min(8.0, 0.5 * 2 ** (len(child.crashes) - 1))
                log.warning("service exited; restarting", service=child.name, exit_code=code, delay_s=delay)
                child.restart_at = now + delay
                continue
        return 0

    def _shutdown(self, data_dir: Path) -> None:
        for child in self._children:
            if child.proc and child.proc.poll() is None:
                child.proc.terminate()
        deadline = time.monotonic() + 15
        for child in self._children:
            if child.proc is None:
                continue
            try:
                child.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("service did not stop in time; killing", service=child.name)
                child.proc.kill()
                child.proc.wait()
        if self._nats:
            self._nats.stop()
        if self._pg:
            self._pg.stop()
        path = state_path(data_dir)
        if path.exists():
            path.unlink()
        log.info("noema stopped")
