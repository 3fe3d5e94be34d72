"""Replay: rebuild the read model from the event stream into fresh tables (requirements §11).

``verify_replay`` compares the result with the live read model at one stream sequence: it reads the
live model's position and its rows in one snapshot (the projector commits both together), replays
exactly to that position, and compares table by table and partition by partition (the rows of the
workspaces in each partition, :func:`noema.adapters.postgres.divergence.by_partition`); when they differ
it names the rows and the partitions they are in. On a busy system the projector keeps going
meanwhile, which changes nothing of the comparison.

One projector writes the whole read model, partitions or not (docs/architecture.md#partitions): the
event stream is not partitioned, and its one sequence is the read model's one position, so a replay
to that position is exact for every partition at once.
``until`` builds the state as of a sequence, or as of a time (the last sequence the stream had
stored by then), and compares nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg
import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from noema.adapters.errors import TRANSIENT
from noema.adapters.jetstream import last_seq_at, read_stream, stream_last_seq
from noema.adapters.postgres import (
    PROJECTED_TABLES,
    ReadModelProjection,
    connect,
    database,
    history_start,
    migrate,
    prune_history,
)
from noema.adapters.postgres.bulkload import BulkLoad, DeferredIndexRefused
from noema.adapters.postgres.digests import combined, snapshot, totals, workspace_digests
from noema.adapters.postgres.divergence import by_partition, divergent_rows, partitions_compared
from noema.adapters.postgres.projection import Projected
from noema.adapters.postgres.tenancy import ALL_WORKSPACES
from noema.runtime.settings import Located
from noema.stream_points import StreamPoint
from noema.topology import Topology
from noema_events import EventDecodeError

__all__ = [
    "ReplayResult",
    "catch_up",
    "drop_schema",
    "live_position",
    "replay_into",
    "seq_at",
    "verify_replay",
]

log = structlog.get_logger("noema.replay")

_REPLAY_SCHEMA = re.compile(r"^replay_[a-z0-9_]{1,50}$")

REPLAY_BATCH = 2000
"""Events applied per transaction: the projection applies a batch's commuting events in one
statement per type, so larger batches mean fewer statements (and commits)."""


@dataclass(frozen=True)
class ReplayResult:
    """What a replay built."""

    schema: str
    events: int
    last_seq: int
    checksum: str
    digests: dict[str, str] = field(default_factory=dict)
    """Table → digest of its rows (:func:`noema.adapters.postgres.digests.table_digests`)."""
    partitions: dict[int, str] = field(default_factory=dict)
    """Partition → checksum of its workspaces' rows
    (:func:`noema.adapters.postgres.divergence.by_partition`)."""


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
    *,
    indexes: bool = True,
    history_from: int = 0,
) -> ReplayResult:
    """Project the event stream from seq 1 to ``until_seq`` (default: its end) into ``schema``,
    loaded in bulk (:class:`~noema.adapters.postgres.bulkload.BulkLoad`); ``indexes=False`` only
    checks the vector indexes instead of building them, for a schema that is compared and dropped;
    ``history_from``: its history bounded to start there, as the live one's (``NOEMA_HISTORY_DAYS``).

    When an index the bulk load deferred refuses a row (the live projection skipped that event),
    the stream is replayed again with every index maintained, as live."""
    last = await stream_last_seq(nc.jetstream(), topology.event_stream)
    if until_seq is not None:
        last = min(last, until_seq)
    try:
        return await _replay(
            nc, url, topology, schema, last, progress, indexes, bulk=True, history_from=history_from
        )
    except DeferredIndexRefused as exc:
        log.warning("an index refuses a replayed row; replaying with indexes maintained", reason=str(exc))
        return await _replay(
            nc, url, topology, schema, last, progress, indexes, bulk=False, history_from=history_from
        )


async def _replay(
    nc: NATS,
    url: str,
    topology: Topology,
    schema: str,
    last: int,
    progress: Callable[[int, int], None] | None,
    indexes: bool,
    bulk: bool,
    history_from: int = 0,
) -> ReplayResult:
    await drop_schema(url, schema)
    await migrate(url, schema)
    projection = ReadModelProjection()
    conn = await connect(url, schema, app="noema-replay")
    applied = 0
    try:
        load = await BulkLoad.prepare(conn, schema) if bulk else None
        async for batch, through in _decoded(nc, topology, last):
            applied += await _apply(projection, conn, batch, through)
            if progress:
                progress(through, last)
        if load is not None:
            await load.finish(conn, build_indexes=indexes)
        if history_from:
            await prune_history(conn, history_from)
        by_workspace = await workspace_digests(conn, PROJECTED_TABLES)
    finally:
        await conn.close()
    digests = totals(by_workspace)
    return ReplayResult(
        schema=schema,
        events=applied,
        last_seq=last,
        checksum=combined(digests),
        digests=digests,
        partitions=by_partition(by_workspace, topology.partitions),
    )


async def catch_up(nc: NATS, url: str, topology: Topology, schema: str, until_seq: int) -> int:
    """Apply the stream's events after ``schema``'s position up to ``until_seq`` to that (already
    built) read model, as :func:`replay_into` applies them, with every index maintained; returns
    the position reached. A projection version follows the stream this way until it is switched in
    (:mod:`noema.composition.projections`)."""
    projection = ReadModelProjection()
    conn = await connect(url, schema, app="noema-projection")
    try:
        position = await projection.position(conn)
        async for batch, through in _decoded(nc, topology, until_seq, first=position + 1):
            await _apply(projection, conn, batch, through)
        return await projection.position(conn)
    finally:
        await conn.close()


async def _decoded(
    nc: NATS, topology: Topology, last: int, first: int = 1
) -> AsyncIterator[tuple[list[Projected], int]]:
    """The stream's events from ``first`` to ``last`` in batches, each with the last sequence it
    covers; the next batch is read and decoded while the caller applies this one."""
    ready: asyncio.Queue[tuple[list[Projected], int] | Exception | None] = asyncio.Queue(maxsize=1)

    async def read() -> None:
        try:
            subjects = topology.event_subjects
            stream = read_stream(nc, topology.event_stream, subjects, first, last, REPLAY_BATCH)
            async for msgs in stream:
                await ready.put((_decode(topology, msgs), msgs[-1].metadata.sequence.stream))
            await ready.put(None)
        except Exception as exc:  # handed to the caller, who raises it
            await ready.put(exc)

    reader = asyncio.create_task(read(), name="replay-read")
    try:
        while (item := await ready.get()) is not None:
            if isinstance(item, Exception):
                raise item
            yield item
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader


def _decode(topology: Topology, msgs: list[Msg]) -> list[Projected]:
    batch = []
    for msg in msgs:
        try:
            event, recorded = topology.recorded_on_subject(msg.data, msg.subject)
        except EventDecodeError:
            continue  # skipped exactly as the live projector skips (and dead-letters) it
        batch.append(Projected(msg.metadata.sequence.stream, msg.subject, event, recorded))
    return batch


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


async def seq_at(nc: NATS, topology: Topology, point: StreamPoint) -> int:
    """The stream sequence a point names: a sequence itself, a time the last event stored by then."""
    if isinstance(point, datetime):
        return await last_seq_at(nc.jetstream(), topology.event_stream, topology.event_subjects, point)
    return point


async def verify_replay(
    settings: Located,
    nc: NATS,
    until: StreamPoint | None = None,
    keep: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Replay into a fresh schema. Without ``until``, compare it with the live read model at the
    live model's position (see the module docstring): ``match``, and the rows that differ. With
    ``until``, replay to that point only. The schema is dropped afterwards unless ``keep``."""
    schema = f"replay_{settings.db_schema}_{os.getpid()}_{int(time.time())}"
    topology = settings.topology
    try:
        if until is not None:
            seq = await seq_at(nc, topology, until)
            result = await replay_into(
                nc, settings.database_url, topology, schema, seq, progress, indexes=keep
            )
            partitions = [{"partition": p, "checksum": c} for p, c in sorted(result.partitions.items())]
            return {**_summary(result), "partitions": partitions, "until": _point(until, seq)}
        return await _compared(settings, nc, topology, schema, keep, progress)
    finally:
        if not keep:
            await drop_schema(settings.database_url, schema)


async def _compared(
    settings: Located,
    nc: NATS,
    topology: Topology,
    schema: str,
    keep: bool,
    progress: Callable[[int, int], None] | None,
) -> dict[str, Any]:
    live = await connect(
        settings.database_url_for("reader"), settings.db_schema, app="noema-replay", workspace=ALL_WORKSPACES
    )
    try:
        async with snapshot(live):
            position = await ReadModelProjection().position(live)
            by_workspace = await workspace_digests(live, PROJECTED_TABLES)
            result = await replay_into(
                nc,
                settings.database_url,
                topology,
                schema,
                position,
                progress,
                indexes=keep,
                history_from=await history_start(live),  # bounded as the live one (NOEMA_HISTORY_DAYS)
            )
            expected = totals(by_workspace)
            differing = [t for t in PROJECTED_TABLES if expected[t] != result.digests.get(t)]
            rows = await _rows_that_differ(settings, schema, live, differing) if differing else None
    finally:
        await live.close()
    partitions = partitions_compared(by_partition(by_workspace, topology.partitions), result.partitions)
    report = {
        **_summary(result),
        "live_checksum": combined(expected),
        "live_position": position,
        "match": not differing and result.last_seq == position,
        "partitions": partitions,
        "partitions_differing": [p["partition"] for p in partitions if not p["match"]],
        "differences": rows or {"count": {}, "rows": []},
    }
    if result.last_seq != position:
        report["problem"] = (
            f"the event stream ends at seq {result.last_seq}, "
            f"before the live read model's position {position}"
        )
    return report


async def _rows_that_differ(
    settings: Located, schema: str, live: asyncpg.Connection, tables: list[str]
) -> dict[str, Any]:
    replayed = await connect(settings.database_url, schema, app="noema-replay")
    try:
        return await divergent_rows(live, replayed, tables)
    finally:
        await replayed.close()


def _summary(result: ReplayResult) -> dict[str, Any]:
    return {
        "schema": result.schema,
        "events": result.events,
        "last_seq": result.last_seq,
        "checksum": result.checksum,
    }


def _point(point: StreamPoint, seq: int) -> dict[str, Any]:
    """How ``until`` was read: the sequence it names, and the time it was given as (if any)."""
    return {"seq": seq, **({"time": point.isoformat()} if isinstance(point, datetime) else {})}
