"""Reads as of a past point of the event stream (``--as-of TIME|SEQ``, ``as_of``).

The state at a sequence is materialised once by replay into an as-of schema
(:mod:`noema.adapters.postgres.asof_schemas`), and every read then runs the same application code
over it that reads the live read model, with the clock pinned to the point's time: the answer is
what a live read at that moment would have answered, by construction (the oracle is
``replay --until-seq N --keep`` and the same query there). A point is a sequence, whose time is
the time the stream stored that event, or a time, whose sequence is the last event the stream had
stored by then and whose time is the time asked: activation decays with time, so a search as of
10:32 ranks with 10:32 as its "now".

The schemas are kept (the last ``NOEMA_ASOF_KEEP``, oldest build dropped first) so that the next
read of the same point answers at once; ``noemactl asof list|drop`` shows and drops them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog
from nats.aio.client import Client as NATS
from nats.js.errors import NotFoundError

from noema.adapters.jetstream import last_seq_at, stream_last_seq
from noema.adapters.postgres import asof_schemas
from noema.adapters.postgres.database import MigrationsPending
from noema.composition.replay import replay_into
from noema.errors import Kind, NoemaError
from noema.runtime.settings import Located
from noema.stream_points import StreamPoint
from noema.topology import Topology

__all__ = ["AsOf", "AsOfNotBuilt", "AsOfSchemas", "PointNotInStream", "resolve"]

log = structlog.get_logger("noema.asof")


class AsOfNotBuilt(NoemaError):
    """The state at this point is not built yet and this process may not build it: it signs in as
    the read-only role (as ``noemactl up`` runs the API and the agent service); the operator's
    ``noemactl asof build`` builds it."""

    kind = Kind.CONFLICT


class PointNotInStream(NoemaError, LookupError):
    """The point names no state the stream holds (before its first event, beyond its end, in the
    future): ``not_found``, as a well-formed id that names nothing is; the message says what to
    write. (A point that is no sequence or zoned time at all is
    :class:`~noema.stream_points.InvalidStreamPoint`, ``invalid``.)"""

    kind = Kind.NOT_FOUND


@dataclass(frozen=True)
class AsOf:
    """The point an answer reflects: the state after stream sequence ``seq``, read at ``time``."""

    seq: int
    time: datetime
    """The answer's "now": the time asked, or the time the stream stored event ``seq``."""

    def describe(self) -> dict[str, Any]:
        """How every surface says it: ``{"seq": N, "time": "…"}``."""
        return {"seq": self.seq, "time": self.time.isoformat()}


async def resolve(nc: NATS, topology: Topology, point: StreamPoint, now: datetime) -> AsOf:
    """The sequence and time ``point`` names (:class:`PointNotInStream` when it names none)."""
    js = nc.jetstream()
    last = await stream_last_seq(js, topology.event_stream)
    if isinstance(point, datetime):
        if point > now:
            raise PointNotInStream(
                f"as of {point.isoformat()}: that is in the future (now is {now.isoformat()}); "
                f"write a past time or a sequence up to {last}"
            )
        seq = await last_seq_at(js, topology.event_stream, topology.event_subjects, point)
        if seq == 0:
            raise PointNotInStream(
                f"as of {point.isoformat()}: the event stream had stored nothing by then; "
                f"write a later time or a sequence from 1 to {last}"
            )
        return AsOf(seq, point)
    if point > last:
        raise PointNotInStream(
            f"as of seq {point}: the event stream ends at seq {last}; write a sequence from 1 to "
            f"{last}, or a past time with its zone (e.g. 2026-03-02T10:32:00Z)"
        )
    try:
        msg = await js.get_msg(topology.event_stream, seq=point)
    except NotFoundError:
        raise PointNotInStream(f"as of seq {point}: the event stream no longer holds it") from None
    assert msg.time is not None
    return AsOf(point, msg.time)


class AsOfSchemas:
    """The as-of schemas of one live read model: built on demand (once per point, whoever asks),
    the last ``settings.asof_keep`` kept. Building needs the schema owner's database URL."""

    def __init__(self, settings: Located, nc: NATS) -> None:
        self.settings = settings
        self.nc = nc
        self.topology = settings.topology
        self._one_build = asyncio.Semaphore(1)

    @property
    def _owner(self) -> str:
        return self.settings.database_url

    def name(self, seq: int) -> str:
        """The schema that holds the state at ``seq``."""
        return asof_schemas.schema_name(self.settings.db_schema, seq)

    async def ensure(self, seq: int, now: datetime) -> str:
        """The name of the as-of schema at ``seq``, built now unless it exists."""
        schema = self.name(seq)
        if await asof_schemas.exists(self._owner, schema):
            return schema
        # One build at a time per application (a process has one): each is a replay to its point
        # (minutes at a hundred thousand memories), so requests for many points queue instead of
        # taking every core.
        async with self._one_build, asof_schemas.build_lock(self._owner, schema):
            if await asof_schemas.exists(self._owner, schema):
                return schema  # another request built it while this one waited
            building = f"{schema}_b"
            try:
                result = await replay_into(self.nc, self._owner, self.topology, building, seq, indexes=False)
                await asof_schemas.publish(self._owner, building, schema, result.last_seq, now)
            except MigrationsPending:
                raise AsOfNotBuilt(
                    f"the state as of seq {seq} is not built yet and this process reads as the "
                    f"read-only role, which may not build it: run `noemactl asof build {seq}`, then ask again"
                ) from None
            except BaseException:
                await asof_schemas.drop(self._owner, building)
                raise
            log.info("as-of schema built", schema=schema, seq=seq, events=result.events)
        await self.evict(keep=schema)
        return schema

    async def evict(self, keep: str | None = None) -> list[str]:
        """Drop the oldest builds beyond ``settings.asof_keep`` (never ``keep``); returns them."""
        found = await asof_schemas.kept(self._owner, self.settings.db_schema)
        extra = len(found) - self.settings.asof_keep
        dropped = []
        for k in found:
            if extra <= 0:
                break
            if k.schema != keep:
                await asof_schemas.drop(self._owner, k.schema)
                dropped.append(k.schema)
                extra -= 1
        return dropped

    async def kept(self) -> list[dict[str, Any]]:
        """The kept as-of schemas, oldest build first."""
        return [
            {"schema": k.schema, "seq": k.seq, "built_at": k.built_at.isoformat()}
            for k in await asof_schemas.kept(self._owner, self.settings.db_schema)
        ]

    async def drop(self, seq: int | None = None) -> list[str]:
        """Drop the as-of schema at ``seq``, or every one; returns the schemas dropped."""
        dropped = []
        for k in await asof_schemas.kept(self._owner, self.settings.db_schema):
            if seq is None or k.seq == seq:
                await asof_schemas.drop(self._owner, k.schema)
                dropped.append(k.schema)
        return dropped
