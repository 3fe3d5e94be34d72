"""The async work behind each ``noemactl`` command (no printing here)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import msgspec

from noema import operations
from noema.adapters.embedders import create_embedder
from noema.adapters.jetstream import EventPublisher, connect
from noema.adapters.postgres import MemoryQueries, ReadModelProjection, checksum, create_pool
from noema.adapters.postgres import connect as pg_connect
from noema.adapters.postgres.tenancy import ALL_WORKSPACES
from noema.client import send_observation
from noema.credentials import redact_url
from noema.readiness import system_status
from noema.reads import resolve_memory
from noema.replay import drop_schema, replay_into
from noema.runtime import read_state
from noema.settings import Settings
from noema.topology import Topology
from noema_events import ObservationRecorded

__all__ = ["CommandError", "decay", "embed_missing", "publish", "relate", "replay", "status"]


def _http_status(url: str) -> int:
    with urllib.request.urlopen(url, timeout=3) as resp:
        return int(resp.status)


def _running(pid: int) -> bool:
    """True while ``pid`` runs; a process that exited but was not reaped yet (a zombie, e.g. while
    ``up`` is busy or stopped) is not running, though it still answers signal 0."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (not Linux): signal 0 is all there is
    return stat.rpartition(")")[2].split()[:1] not in (["Z"], ["X"])


class CommandError(RuntimeError):
    """A command failed for a reason worth telling the user as is."""


async def publish(settings: Settings, obs: ObservationRecorded) -> tuple[int, bool]:
    """Publish a validated observation; returns its stream sequence and whether the stream already
    held an observation of this id (within the duplicate window; it is then not stored again)."""
    assert settings.nats_url
    nc = await connect(settings.nats_url, name="noemactl", auth=settings.nats_auth)
    try:
        return await send_observation(nc.jetstream(), obs, topology=Topology(settings.prefix))
    finally:
        await nc.close()


async def _pool(settings: Settings) -> asyncpg.Pool:
    # Read-only role; the operator's CLI sees every workspace.
    return await create_pool(
        settings.database_url_for("reader"),
        settings.db_schema,
        app="noemactl",
        workspace=ALL_WORKSPACES,
        min_size=1,
        max_size=1,
    )


async def relate(
    settings: Settings,
    from_id: str,
    to_id: str,
    relation: str,
    confidence: float,
    source: str,
    actor: str,
) -> str:
    """Publish a relationship after checking both ends (ids or unique prefixes; an unknown or
    ambiguous one is an OperationError, as for every operator command)."""
    assert settings.nats_url
    pool = await _pool(settings)
    nc = await connect(settings.nats_url, name="noemactl", auth=settings.nats_auth)
    try:
        reads = MemoryQueries(pool)
        ids = [await resolve_memory(reads, given) for given in (from_id, to_id)]
        publisher = EventPublisher(nc, Topology(settings.prefix))
        # An OperationError (unknown relation, edge across minds) is bad input: exit 2.
        return await operations.relate(
            reads,
            publisher,
            ids[0],
            ids[1],
            relation,
            now=datetime.now(UTC),
            confidence=confidence,
            source=source,
            actor=actor,
        )
    finally:
        await nc.close()
        await pool.close()


async def embed_missing(
    settings: Settings, batch: int, progress: Callable[[int, int], None]
) -> dict[str, Any]:
    """Backfill vectors for the configured embedder."""
    assert settings.nats_url
    embedder = create_embedder(settings.embedder)
    assert embedder is not None
    pool = await _pool(settings)
    nc = await connect(settings.nats_url, name="noemactl-embed", auth=settings.nats_auth)
    try:
        started = time.perf_counter()
        done = await operations.embed_missing(
            MemoryQueries(pool),
            EventPublisher(nc, Topology(settings.prefix)),
            embedder,
            now=lambda: datetime.now(UTC),
            batch=batch,
            progress=progress,
        )
        elapsed = time.perf_counter() - started
    finally:
        await nc.close()
        await pool.close()
    return {
        "embedded": done,
        "model": embedder.name,
        "seconds": round(elapsed, 2),
        "per_s": done / elapsed if elapsed > 0 else 0.0,
    }


async def decay(settings: Settings, workspaces: list[str] | None) -> list[str]:
    """Publish a decay tick now."""
    assert settings.nats_url
    pool = await _pool(settings)
    nc = await connect(settings.nats_url, name="noemactl", auth=settings.nats_auth)
    try:
        return await operations.decay_tick(
            MemoryQueries(pool), EventPublisher(nc, Topology(settings.prefix)), datetime.now(UTC), workspaces
        )
    finally:
        await nc.close()
        await pool.close()


async def _live_position(settings: Settings) -> int:
    assert settings.database_url
    conn = await pg_connect(settings.database_url_for("reader"), settings.db_schema, app="noemactl")
    try:
        return await ReadModelProjection().position(conn)
    finally:
        await conn.close()


async def replay(
    settings: Settings,
    until_seq: int | None,
    keep: bool,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Replay into a fresh schema; compare with the live read model once it reached the same seq."""
    assert settings.nats_url
    assert settings.database_url
    topology = Topology(settings.prefix)
    schema = f"replay_{settings.db_schema}_{os.getpid()}_{int(time.time())}"
    nc = await connect(settings.nats_url, name="noemactl-replay", auth=settings.nats_auth)
    try:
        result = await replay_into(
            nc, settings.database_url, topology, schema, until_seq=until_seq, progress=progress
        )
    finally:
        await nc.close()
    report: dict[str, Any] = {
        "schema": schema,
        "events": result.events,
        "last_seq": result.last_seq,
        "checksum": result.checksum,
    }
    try:
        if until_seq is None:
            # The live projector may still be applying the tail of the stream: wait (bounded) for it.
            deadline = time.monotonic() + 30
            position = await _live_position(settings)
            while position < result.last_seq and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
                position = await _live_position(settings)
            conn = await pg_connect(
                settings.database_url_for("reader"),
                settings.db_schema,
                app="noemactl",
                workspace=ALL_WORKSPACES,
            )
            try:
                live = await checksum(conn)
            finally:
                await conn.close()
            report.update(live_checksum=live, live_position=position, match=live == result.checksum)
    finally:
        if not keep:
            await drop_schema(settings.database_url, schema)
    return report


async def status(settings: Settings) -> dict[str, Any]:
    """Health of every part: the system checks of :mod:`noema.readiness` (the same as ``/readyz``),
    plus, for the instance ``up`` runs from this data folder, its API and its processes; and the
    per-worker figures (backlog, rate, drain estimate, state)."""
    assert settings.nats_url
    assert settings.database_url
    nc = None
    nats_error = None
    try:
        nc = await asyncio.wait_for(
            connect(settings.nats_url, name="noemactl-status", auth=settings.nats_auth), 5
        )
    except Exception as exc:  # whatever the reason, NATS is not usable: that is the finding
        nats_error = f"{redact_url(settings.nats_url)}: {type(exc).__name__}: {exc}".rstrip(": ")
    try:
        found = await system_status(settings, nc, lambda: _live_position(settings), nats_error=nats_error)
    finally:
        if nc is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(nc.close(), 2)
    checks = [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in found.checks]

    def add(name: str, ok: bool, detail: str) -> None:
        checks.append({"name": name, "ok": ok, "detail": detail})

    # `settings` already carries the URLs (located); the state file tells whether they are ours.
    state = read_state(settings.data_dir.expanduser().resolve())
    if state is not None and state.get("nats_url") != settings.nats_url:
        state = None
    expected = settings.expected_workers
    if state and state.get("api_url") and "api" in expected:
        url = f"{state['api_url']}/healthz"
        try:
            code = await asyncio.to_thread(_http_status, url)
            add("api http", code == 200, url)
        except OSError as exc:
            add("api http", False, f"{url}: {exc}")
    if state:
        for name, pid in state.get("services", {}).items():
            if name not in expected:
                continue
            if _running(int(pid)):
                add(f"process {name}", True, f"pid {pid}")
            else:
                add(f"process {name}", False, f"pid {pid} is not running")
    workers = [msgspec.to_builtins(w) for w in found.workers]
    return {"healthy": all(c["ok"] for c in checks), "checks": checks, "workers": workers}
