"""Replay: rebuild the read model from the event stream into fresh tables (requirements §11).

The result is compared with the live read model by checksum; ``until_seq`` gives the state as of a
stream sequence (point-in-time).
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
from nats.aio.client import Client as NATS

from noema.adapters.errors import TRANSIENT
from noema.adapters.jetstream import read_stream, stream_last_seq
from noema.adapters.postgres import ReadModelProjection, checksum, connect, database, migrate
from noema.adapters.postgres.projection import Projected
from noema.adapters.postgres.tenancy import ALL_WORKSPACES
from noema.runtime.settings import Located
from noema.runtime.topology import Topology
from noema_events import EventDecodeError

__all__ = ["ReplayResult", "drop_schema", "live_position", "replay_into", "verify_replay"]

_REPLAY_SCHEMA = re.compile(r"^replay_[a-z0-9_]{1,50}$")


@dataclass(frozen=True)
class ReplayResult:
    """What a replay built."""

    schema: str
    events: int
    last_seq: int
    checksum: str


async def drop_schema(url: str, schema: str) -> None:
    """Drop a replay schema (only ``replay_*`` schemas can be dropped this way)."""
    if not _REPLAY_SCHEMA.match(schema):
        raise ValueError(f"refusing to drop {schema!r}: only replay_* schemas are disposable")
    await database.drop_schema(url, schema)


async def replay_into(
    nc: NATS,
    url: str,
    topology: Topology,
    schema: str,
    until_seq: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ReplayResult:
    """Project the event stream from seq 1 to ``until_seq`` (default: its end) into ``schema``."""
    await drop_schema(url, schema)
    await migrate(url, schema)
    last = await stream_last_seq(nc.jetstream(), topology.event_stream)
    if until_seq is not None:
        last = min(last, until_seq)
    projection = ReadModelProjection()
    conn = await connect(url, schema, app="noema-replay")
    applied = 0
    try:
        async for msgs in read_stream(nc, topology.event_stream, topology.event_subjects, 1, last):
            batch = []
            for msg in msgs:
                try:
                    event, recorded = topology.recorded_on_subject(msg.data, msg.subject)
                    batch.append(Projected(msg.metadata.sequence.stream, msg.subject, event, recorded))
                except EventDecodeError:
                    continue  # skipped exactly as the live projector skips (and dead-letters) it
            applied += await _apply(projection, conn, batch, msgs[-1].metadata.sequence.stream)
            if progress:
                progress(msgs[-1].metadata.sequence.stream, last)
        digest = await checksum(conn)
    finally:
        await conn.close()
    return ReplayResult(schema=schema, events=applied, last_seq=last, checksum=digest)


async def _apply(
    projection: ReadModelProjection, conn: asyncpg.Connection, batch: list[Projected], through: int
) -> int:
    """Apply like the live projector: an event the database refuses is skipped inside ``apply``; an
    event whose handler fails for another reason is skipped too, as the live projector does once its
    retries are spent (it dead-letters it as ``failed``). Transient failures abort the replay."""
    try:
        return await projection.apply(conn, batch, through_seq=through)
    except TRANSIENT:
        raise
    except Exception:
        if len(batch) <= 1:
            await projection.apply(conn, [], through_seq=through)
            return 0
    applied = 0
    for p in batch:
        applied += await _apply(projection, conn, [p], p.seq)
    await projection.apply(conn, [], through_seq=through)
    return applied


async def live_position(settings: Located) -> int:
    """The stream sequence the live read model has applied."""
    conn = await connect(settings.database_url_for("reader"), settings.db_schema, app="noema-replay")
    try:
        return await ReadModelProjection().position(conn)
    finally:
        await conn.close()


async def verify_replay(
    settings: Located,
    nc: NATS,
    until_seq: int | None = None,
    keep: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Replay into a fresh schema; without ``until_seq``, compare its checksum with the live read
    model's once that reached the same sequence (waiting up to 30 s for the projector). The schema
    is dropped afterwards unless ``keep``."""
    schema = f"replay_{settings.db_schema}_{os.getpid()}_{int(time.time())}"
    result = await replay_into(
        nc, settings.database_url, Topology(settings.prefix), schema, until_seq=until_seq, progress=progress
    )
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
            position = await live_position(settings)
            while position < result.last_seq and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
                position = await live_position(settings)
            conn = await connect(
                settings.database_url_for("reader"),
                settings.db_schema,
                app="noema-replay",
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
