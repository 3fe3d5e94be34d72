"""The async work behind each ``noemactl`` command (no printing here)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import asyncpg
from nats.js.errors import NotFoundError

from noema import operations
from noema.adapters.embedders import create_embedder
from noema.adapters.jetstream import EventPublisher, connect, stream_last_seq
from noema.adapters.postgres import ReadModelProjection, checksum, create_pool
from noema.adapters.postgres import connect as pg_connect
from noema.adapters.postgres.tenancy import ALL_WORKSPACES
from noema.client import send_observation
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


class CommandError(RuntimeError):
    """A command failed for a reason worth telling the user as is."""


async def publish(settings: Settings, obs: ObservationRecorded) -> tuple[int, bool]:
    """Publish a validated observation; returns its stream sequence and whether the stream already
    held an observation of this id (within the duplicate window; it is then not stored again)."""
    assert settings.nats_url
    nc = await connect(settings.nats_url, name="noemactl")
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
    nc = await connect(settings.nats_url, name="noemactl")
    try:
        ids = [await resolve_memory(pool, given) for given in (from_id, to_id)]
        publisher = EventPublisher(nc, Topology(settings.prefix))
        # An OperationError (unknown relation, edge across minds) is bad input: exit 2.
        return await operations.relate(
            pool,
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
    nc = await connect(settings.nats_url, name="noemactl-embed")
    try:
        started = time.perf_counter()
        done = await operations.embed_missing(
            pool,
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
    nc = await connect(settings.nats_url, name="noemactl")
    try:
        return await operations.decay_tick(
            pool, EventPublisher(nc, Topology(settings.prefix)), datetime.now(UTC), workspaces
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
    nc = await connect(settings.nats_url, name="noemactl-replay")
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
    """Health of every part: servers, streams, projector lag, worker processes."""
    assert settings.nats_url
    assert settings.database_url
    topology = Topology(settings.prefix)
    checks: list[dict[str, Any]] = []

    def add(name: str, ok: bool, detail: str) -> None:
        checks.append({"name": name, "ok": ok, "detail": detail})

    last_seq = None
    try:
        nc = await asyncio.wait_for(connect(settings.nats_url, name="noemactl-status"), 5)
    except (OSError, TimeoutError, Exception) as exc:
        add("nats", False, f"{settings.nats_url}: {exc}")
    else:
        add("nats", True, settings.nats_url)
        try:
            js = nc.jetstream()
            for stream in (topology.observation_stream, topology.event_stream, topology.dead_letter_stream):
                try:
                    info = await js.stream_info(stream)
                    add(f"stream {stream}", True, f"{info.state.messages} messages")
                except NotFoundError:
                    add(f"stream {stream}", False, "missing")
            with contextlib.suppress(NotFoundError):
                last_seq = await stream_last_seq(js, topology.event_stream)
            try:
                ci = await js.consumer_info(topology.observation_stream, topology.durable("attend"))
                add("attend backlog", True, f"{ci.num_pending} waiting, {ci.num_ack_pending} in flight")
            except NotFoundError:
                add("attend backlog", False, "attend consumer missing (attend worker never started)")
        finally:
            await nc.close()
    try:
        position = await asyncio.wait_for(_live_position(settings), 5)
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        add("postgres", False, f"{exc.__class__.__name__}: {exc}")
    else:
        add("postgres", True, f"schema {settings.db_schema}")
        if last_seq is not None:
            add(
                "projector lag",
                True,
                f"{max(0, last_seq - position)} events behind (at seq {position} of {last_seq})",
            )
    # `settings` already carries the URLs (located); the state file tells whether they are ours.
    state = read_state(settings.data_dir.expanduser().resolve())
    if state is not None and state.get("nats_url") != settings.nats_url:
        state = None
    if state and state.get("api_url"):
        url = f"{state['api_url']}/healthz"
        try:
            code = await asyncio.to_thread(_http_status, url)
            add("api", code == 200, url)
        except OSError as exc:
            add("api", False, f"{url}: {exc}")
    if state:
        for name, pid in state.get("services", {}).items():
            try:
                os.kill(int(pid), 0)
                add(f"service {name}", True, f"pid {pid}")
            except ProcessLookupError:
                add(f"service {name}", False, f"pid {pid} is not running")
    return {"healthy": all(c["ok"] for c in checks), "checks": checks}
