"""An event stream as earlier releases recorded it, the read model their projector built from it,
events as today's producers decide them, and the changes a release could make to the constants of
the memory dynamics: what the replay and upgrade tests feed the projections.

``golden/stream.v1.jsonl`` holds the events recorded by the producers at 7505727 (before any event
had a second version) and ``golden/stream.v1.rows.json`` every row, as text, of the tables the
projector at 7505727 built from them — both frozen, like the golden samples of each event version.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import msgspec
import pytest

from noema.adapters.memory import InMemoryEventStream, InMemoryKnowledge, InMemoryRecords
from noema.adapters.memory import projection as memory_projection
from noema.adapters.postgres import database, handlers, knowledge_handlers
from noema.application import upkeep
from noema.application.access import Caller
from noema.application.knowledge import Knowledge
from noema.domain import dynamics
from noema_conflicts.service import ConflictsHandler
from noema_events import Event, FactProposed, decode_event, encode_event
from noema_events.vocabulary import VERACITY_WEIGHT
from tests.conftest import Harness
from tests.support import memory_created

__all__ = [
    "CONSTANT_CHANGES",
    "V1_ROWS",
    "V1_STREAM",
    "Rows",
    "fresh_events",
    "publish_recorded",
    "sorted_rows",
    "table_rows",
]

GOLDEN = Path(__file__).parent / "golden"
V1_STREAM = [line for line in (GOLDEN / "stream.v1.jsonl").read_bytes().splitlines() if line]
"""The events, as stored on the stream, in stream order (sequence = index + 1)."""


class Rows(msgspec.Struct, frozen=True):
    """One table's rows: each a list of its columns' values as PostgreSQL prints them (UTC)."""

    columns: list[str]
    rows: list[list[str | None]]


V1_ROWS = msgspec.json.decode((GOLDEN / "stream.v1.rows.json").read_bytes(), type=dict[str, Rows])
"""Table → the rows the projector at 7505727 built from :data:`V1_STREAM` (``events`` without its
``subject``, which names the test's stream prefix)."""

T0 = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)


async def publish_recorded(h: Harness, data: Sequence[bytes]) -> None:
    """Store events on the harness's event stream exactly as given (bytes untouched), each on its
    own subject with ``Nats-Msg-Id`` = its id, as the publishers of their time stored them."""
    for raw in data:
        event = decode_event(raw)
        await h.js.publish(h.topology.event_subject(event), raw, headers={"Nats-Msg-Id": event.id})


async def fresh_events() -> list[bytes]:
    """Events as today's producers decide them (facts proposed, mentioned and in conflict, a recall,
    a decay tick), made in memory by the application's own operations and encoded for the stream."""
    reads = InMemoryKnowledge()
    stream = InMemoryEventStream(reads)
    now = [T0]
    conflicts = ConflictsHandler(None, stream, clock=lambda: now[0], facts=reads)

    async def settle(ev: Event) -> Sequence[Event]:
        return await conflicts.decide(ev) if isinstance(ev, FactProposed) else ()

    stream.reactions.append(settle)
    knowledge = Knowledge(reads, stream, lambda: now[0])
    alice, bob = Caller("acme", "alice", "engineer"), Caller("acme", "bob", "engineer")
    await knowledge.propose_fact(alice, "ops", "backups", "Backups run at 02:00", veracity="inferred")
    now[0] += timedelta(hours=1)
    await knowledge.propose_fact(bob, "ops", "backups", "backups run at 02:00.", veracity="tool")
    await knowledge.propose_fact(bob, "ops", "backups", "Backups run at 03:00", veracity="stated")
    await knowledge.propose_fact(alice, "ops", "region", "The cluster is in Dublin", veracity="imported")
    memory = memory_created("the release train leaves on Thursdays", at=T0, importance=0.3)
    await stream.publish([memory])
    records = InMemoryRecords(reads.tables)
    await upkeep.record_retrieval(records, stream, memory.payload.memory_id, now=T0 + timedelta(days=2))
    await upkeep.decay_tick(records, stream, T0 + timedelta(days=5), ["acme"])
    return [encode_event(ev) for ev in stream.events]


async def table_rows(conn: asyncpg.Connection, like: dict[str, Rows]) -> dict[str, Rows]:
    """The rows of each table of ``like``, with its columns, as text in UTC, sorted."""
    await conn.execute("SET TimeZone = 'UTC'")
    out = {}
    for table, shape in like.items():
        select = ", ".join(f"{column}::text" for column in shape.columns)
        rows = [list(r) for r in await conn.fetch(f"SELECT {select} FROM {table}")]
        out[table] = Rows(shape.columns, sorted(rows, key=_sort_key))
    return out


def sorted_rows(rows: dict[str, Rows]) -> dict[str, Rows]:
    """``rows`` with each table's rows in the order :func:`table_rows` gives."""
    return {table: Rows(r.columns, sorted(r.rows, key=_sort_key)) for table, r in rows.items()}


def _sort_key(row: list[str | None]) -> list[str]:
    return ["" if v is None else v for v in row]


PROJECTION_MODULES = (dynamics, handlers, knowledge_handlers, memory_projection)
"""Where the projection path could read a constant (a module that imported it holds its own name)."""


def _constant(mp: pytest.MonkeyPatch, name: str, value: float) -> None:
    for module in PROJECTION_MODULES:
        if hasattr(module, name):
            mp.setattr(module, name, value)


def _sql_decay_floor(mp: pytest.MonkeyPatch, floor: float) -> None:
    """The decay functions a migration defines, redefined with another floor after the migrations
    (as a release that changed the SQL would)."""
    defined = database.migrations()
    sql = f"""
        CREATE OR REPLACE FUNCTION noema_decay(activation float8, dt_days float8, importance float8,
                                               half_life_days float8)
        RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
            SELECT CASE WHEN dt_days <= 0 THEN activation
                        ELSE greatest({floor}::float8, activation * power(2::float8,
                                 greatest(-1000::float8, -dt_days / (half_life_days * (1 + importance)))))
                   END
        $$;"""
    mp.setattr(database, "migrations", lambda: [*defined, (9999, "another_floor", sql)])


def _veracity_weights(mp: pytest.MonkeyPatch) -> None:
    for veracity, weight in list(VERACITY_WEIGHT.items()):
        mp.setitem(VERACITY_WEIGHT, veracity, weight / 2)


def _activation_floor(mp: pytest.MonkeyPatch) -> None:
    _constant(mp, "ACTIVATION_FLOOR", 0.05)
    _sql_decay_floor(mp, 0.05)


def _fact_weighting(mp: pytest.MonkeyPatch) -> None:
    _constant(mp, "FACT_IMPORTANCE", 0.9)
    _constant(mp, "FACT_SALIENCE", 0.1)


CONSTANT_CHANGES: dict[str, Callable[[pytest.MonkeyPatch], None]] = {
    "recall boost": lambda mp: _constant(mp, "RECALL_BOOST", 0.6),
    "half-life": lambda mp: _constant(mp, "HALF_LIFE_DAYS", 3.0),
    "activation floor": _activation_floor,
    "mention rate": lambda mp: _constant(mp, "MENTION_RATE", 0.5),
    "confidence cap": lambda mp: _constant(mp, "CONFIDENCE_CAP", 0.8),
    "veracity weights": _veracity_weights,
    "fact importance and salience": _fact_weighting,
}
"""Each change a release could make to the dynamics, made where the projection path would read it."""
