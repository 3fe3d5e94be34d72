"""Versioned projections (requirements §11): a read-model change ships as a new version of the read
model, rebuilt from the event stream into a schema of its own and switched in once it has caught up
(``noemactl projection rebuild|status|switch|drop``); no migration has to backfill derived data.

- :func:`rebuild` replays the whole stream into a fresh schema, in bulk and with the live projection's
  own code (:func:`noema.composition.replay.replay_into`), makes it durable, gives it the live read
  model's grants and row security (the same migrations made it), then catches it up with the live
  read model's position; it is then ``ready``, resting in ``<schema>_v<N>``.
- :func:`switch` catches a ready (or retired) version up again, then holds the projector off for a
  moment, applies the last events and swaps the schemas' names in one transaction
  (:mod:`noema.adapters.postgres.versions` says why the running processes need no restart). The
  version switched out is ``retired``, kept until dropped, and can be switched back in the same way.
- :func:`status` lists the versions, each with its position and lag; :func:`drop` removes one that
  is not active.

Only one rebuild, switch or drop runs at a time per read model (a second one is refused as a
conflict); ``status`` reads beside them (a rebuild's progress shows as its version's position).
They connect as the schema owner, as replay does.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import asyncpg
from nats.aio.client import Client as NATS

from noema.adapters.jetstream import stream_last_seq
from noema.adapters.postgres import versions as pv
from noema.composition.replay import catch_up, replay_into
from noema.errors import Conflict, NotFound
from noema.runtime.settings import Located

__all__ = ["SWITCH_LOCK_TIMEOUT_S", "NatsWork", "drop", "rebuild", "status", "switch"]

T = TypeVar("T")
NatsWork = Callable[[Located, NATS], Awaitable[T]]
"""A projection command's work over the settings and a NATS connection (``noemactl projection``
opens the connection and runs it)."""

SWITCH_LOCK_TIMEOUT_S = 30.0
"""How long a switch waits for the projector's transaction in hand before giving up."""

_CLOSE_ENOUGH = 500
"""A catch-up pass that applied fewer events than this is the last before the switch's own."""
_PASSES = 20


@contextlib.asynccontextmanager
async def _owner(settings: Located, exclusive: bool = True) -> AsyncIterator[asyncpg.Connection]:
    """The schema owner's connection; ``exclusive``: holding the lock that lets one projection
    command that changes something run at a time (``status`` reads beside them)."""
    conn = await asyncpg.connect(settings.database_url)
    try:
        if exclusive and not await pv.try_lock_versions(conn, settings.db_schema):
            raise Conflict(
                f"another `noemactl projection` rebuild, switch or drop of {settings.db_schema} is "
                "running; wait for it (or stop it) and try again"
            )
        await pv.ensure_registry(conn, settings.db_schema)
        yield conn
    finally:
        await conn.close()


async def _live_position(conn: asyncpg.Connection, live: str) -> int:
    return await pv.position_of(conn, live) or 0


async def _follow(settings: Located, nc: NATS, conn: asyncpg.Connection, schema: str) -> tuple[int, int]:
    """Catch ``schema`` up with the live read model, pass after pass, until a pass has little left
    to do; returns (its position, the live position the last pass aimed at)."""
    topology = settings.topology
    position = await pv.position_of(conn, schema) or 0
    target = position
    for _ in range(_PASSES):
        target = await _live_position(conn, settings.db_schema)
        before = position
        position = await catch_up(nc, settings.database_url, topology, schema, target)
        if position - before < _CLOSE_ENOUGH:
            break
    return position, target


async def rebuild(
    settings: Located, nc: NATS, progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    """Build the next version of the read model from the event stream and catch it up (see the
    module docstring); returns what was built."""
    live = settings.db_schema
    async with _owner(settings) as conn:
        version = await pv.next_version(conn, live)
        if version > pv.MAX_VERSION:
            raise Conflict(
                f"{pv.MAX_VERSION} version numbers were given: no more can be built for this read model"
            )
        scratch = f"replay_pv{version}_{os.getpid()}_{secrets.token_hex(3)}"
        await pv.add_version(conn, live, version, scratch)
        result = await replay_into(
            nc, settings.database_url, settings.topology, scratch, None, progress, indexes=True
        )
        schema = await pv.promote(conn, live, version, scratch)
        position, live_position = await _follow(settings, nc, conn, schema)
        await pv.set_state(conn, live, version, "ready")
        last = await stream_last_seq(nc.jetstream(), settings.topology.event_stream)
    return {
        "version": version,
        "schema": schema,
        "state": "ready",
        "events": result.events,
        "replayed_through": result.last_seq,
        "position": position,
        "live_position": live_position,
        "lag": max(0, last - position),
    }


async def status(settings: Located, nc: NATS) -> dict[str, Any]:
    """Every version with its state, schema, position and lag (events the stream holds beyond it)."""
    live = settings.db_schema
    last = await stream_last_seq(nc.jetstream(), settings.topology.event_stream)
    async with _owner(settings, exclusive=False) as conn:
        rows = []
        for v in await pv.versions(conn, live):
            position = await pv.position_of(conn, v.schema)
            rows.append(
                {
                    "version": v.version,
                    "schema": v.schema,
                    "state": v.state,
                    "position": position,
                    "lag": None if position is None else max(0, last - position),
                    "created_at": v.created_at.isoformat(),
                    "ready_at": v.ready_at.isoformat() if v.ready_at else None,
                    "switched_in_at": v.switched_in_at.isoformat() if v.switched_in_at else None,
                    "switched_out_at": v.switched_out_at.isoformat() if v.switched_out_at else None,
                }
            )
    active = next(r["version"] for r in rows if r["state"] == "active")
    return {"schema": live, "active": active, "stream_last_seq": last, "versions": rows}


async def _version(conn: asyncpg.Connection, live: str, version: int) -> pv.ProjectionVersion:
    known = await pv.versions(conn, live)
    found = next((v for v in known if v.version == version), None)
    if found is None:
        listed = ", ".join(str(v.version) for v in known)
        raise NotFound(
            f"no projection version {version} (the versions are {listed}; see `noemactl projection status`)"
        )
    return found


async def switch(settings: Located, nc: NATS, version: int) -> dict[str, Any]:
    """Make ``version`` the live read model once it has caught up (see the module docstring)."""
    live = settings.db_schema
    async with _owner(settings) as conn:
        target = await _version(conn, live, version)
        if target.state == "active":
            raise Conflict(f"projection version {version} is already the active one")
        if target.state == "building":
            position = await pv.position_of(conn, target.schema)
            raise Conflict(
                f"projection version {version} has not caught up: its rebuild has not finished (it is "
                f"at seq {position or 0}, the live read model at "
                f"{await _live_position(conn, live)}); wait for it, or drop it and rebuild"
            )
        missing = await pv.pending_migrations(conn, target.schema)
        if missing:
            raise Conflict(
                f"projection version {version} lacks this release's migrations {missing}: "
                "rebuild a new version instead"
            )
        [current] = [v for v in await pv.versions(conn, live) if v.state == "active"]
        await _follow(settings, nc, conn, target.schema)
        try:
            position = await _swap(settings, nc, conn, target, current.version)
        except asyncpg.LockNotAvailableError:
            raise Conflict(
                f"the live read model's position stayed locked for {SWITCH_LOCK_TIMEOUT_S:g} s "
                "(a projector transaction that long?): nothing was switched; try again"
            ) from None
    return {
        "version": version,
        "schema": live,
        "position": position,
        "previous": {"version": current.version, "schema": pv.resting_schema(live, current.version)},
    }


async def _swap(
    settings: Located, nc: NATS, conn: asyncpg.Connection, target: pv.ProjectionVersion, current: int
) -> int:
    """The switch proper: the projector held off, the last events applied, the names swapped."""
    live, version = settings.db_schema, target.version
    async with conn.transaction():
        position = await pv.lock_live_position(conn, live, SWITCH_LOCK_TIMEOUT_S)
        topology = settings.topology
        reached = await catch_up(nc, settings.database_url, topology, target.schema, position)
        # Ahead is fine (rebuilt to the stream's end while the projector lagged): the projector
        # skips what the position row says is applied.
        if reached < position:
            raise Conflict(
                f"projection version {version} has not caught up: it reached seq {reached}, "
                f"the live read model is at {position}"
            )
        await pv.activate(conn, live, current, version)
    return position


async def drop(settings: Located, version: int) -> dict[str, Any]:
    """Drop a version that is not active, schema and all."""
    live = settings.db_schema
    async with _owner(settings) as conn:
        target = await _version(conn, live, version)
        if target.state == "active":
            raise Conflict(
                f"projection version {version} is the active one: switch to another before dropping it"
            )
        schema = await pv.drop_version(conn, live, version)
    return {"version": version, "schema": schema, "dropped": True}
