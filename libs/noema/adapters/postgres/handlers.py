"""Projection handlers: how each event type changes the read model.

Each handler registers for one event type (:mod:`noema.adapters.postgres.registry`) and gets a run
of consecutive events of that type, in stream order, inside the projector's transaction. Formulas
are those of :mod:`noema.domain.dynamics` (SQL functions from migrations 0002 and 0010), applied to
the values each event recorded — a boost, a half-life, a floor, a confidence rate and cap — and to
no constant of the code, so replaying the same events reproduces every value exactly, whatever the
release that replays them. A handler never deletes a memory: status changes are new values with the
old record kept.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Hashable, Sequence
from datetime import datetime

import asyncpg
import msgspec
import structlog

from noema.adapters.postgres.registry import ANYTHING, Handler, Handlers, Projected, Run
from noema_events import (
    ActivationDecayed,
    Event,
    FactMentioned,
    MemoryCreated,
    MemoryEmbedded,
    MemoryReinforced,
    MemoryRetrieved,
    MemorySuperseded,
    OperatorAction,
    RelationshipAdded,
)

__all__ = [
    "HANDLERS",
    "MEMORY_COLUMNS",
    "Handler",
    "Projected",
    "created_columns",
    "insert_memories",
    "memory_columns",
    "memory_row",
]

log = structlog.get_logger("noema.projector")
_json = msgspec.json.Encoder()


HANDLERS = Handlers()
"""Event type → handler of the read-model projection."""

MEMORY_COLUMNS = (
    "id",
    "workspace",
    "mind",
    "kind",
    "epistemic_kind",
    "content",
    "domain",
    "topic",
    "repo",
    "confidence",
    "importance",
    "salience",
    "credibility",
    "veracity",
    "memory_type",
    "activation",
    "activation_at",
    "half_life_days",
    "activation_floor",
    "status",
    "recall_count",
    "mention_count",
    "source_observation_ids",
    "origin_event",
    "origin_seq",
    "channel",
    "source",
    "participants",
    "steps",
    "preconditions",
    "outcomes",
    "session",
    "happened_at",
    "valid_until",
    "created_at",
    "updated_at",
    "tier",
    "row_seq",
)


def memory_row(item: Projected, **fields: object) -> tuple[object, ...]:
    """A ``memories`` row in ``MEMORY_COLUMNS`` order (see :func:`memory_columns`; a column missing
    from both raises ``KeyError``)."""
    row = memory_columns(item.event, item.seq, **fields) | {"row_seq": item.seq}
    return tuple(row[c] for c in MEMORY_COLUMNS)


def memory_columns(ev: Event, seq: int, **fields: object) -> dict[str, object]:
    """A new ``memories`` row by column: the event's envelope gives workspace, mind, provenance and
    times; a new memory starts active, at activation 1, mentioned once; ``fields`` give the rest.
    The in-memory adapter builds its rows with it too, so both read models hold the same values."""
    return {
        "workspace": ev.workspace,
        "mind": ev.mind,
        "activation": 1.0,
        "activation_at": ev.occurred_at,
        "status": "active",
        "recall_count": 0,
        "mention_count": 1,
        "origin_event": ev.id,
        "origin_seq": seq,
        "created_at": ev.occurred_at,
        "updated_at": ev.occurred_at,
        "tier": "long",
        **fields,
    }


def created_columns(ev: MemoryCreated) -> dict[str, object]:
    """The columns a ``memory.created`` sets beyond the envelope's."""
    p = ev.payload
    return {
        "id": p.memory_id,
        "kind": p.kind,
        "epistemic_kind": p.epistemic_kind,
        "content": p.content,
        "domain": p.domain,
        "topic": p.topic,
        "repo": p.repo,
        "confidence": p.confidence,
        "importance": p.importance,
        "salience": p.salience,
        "credibility": p.credibility,
        "veracity": p.veracity,
        "memory_type": p.memory_type,
        "source_observation_ids": list(p.source_observation_ids),
        "channel": p.channel,
        "source": p.source,
        "participants": list(p.participants),
        "steps": list(p.steps),
        "preconditions": list(p.preconditions),
        "outcomes": list(p.outcomes),
        "session": p.session,
        "happened_at": p.happened_at,
        "valid_until": p.valid_until,
        "tier": p.tier,
        "half_life_days": p.half_life_days,
        "activation_floor": p.activation_floor,
    }


def _memory(*memory_ids: str) -> frozenset[Hashable]:
    """Memories' rows (and what hangs off each: its vectors, the edges whose ends it is)."""
    return frozenset(("memory", memory_id) for memory_id in memory_ids)


@HANDLERS.register(MemoryCreated, touches=lambda ev: _memory(ev.payload.memory_id))
async def memory_created(conn: asyncpg.Connection, run: Run[MemoryCreated]) -> None:
    """Insert new memory records (activation 1 at creation)."""
    await insert_memories(conn, [memory_row(item, **created_columns(ev)) for item, ev in run])


async def insert_memories(conn: asyncpg.Connection, rows: Sequence[tuple[object, ...]]) -> None:
    """COPY memory rows (``MEMORY_COLUMNS`` order), skipping ids that already exist."""
    # A memory_created re-published after the duplicate window (same memory id, new event) must
    # not create a second row: skip ids that exist (the projector holds the position lock, so no
    # concurrent writer can slip in between) and duplicates within the run, then COPY the rest.
    existing = {
        r["id"]
        for r in await conn.fetch("SELECT id FROM memories WHERE id = ANY($1::text[])", [r[0] for r in rows])
    }
    fresh = []
    for row in rows:
        if row[0] not in existing:
            existing.add(row[0])
            fresh.append(row)
    if fresh:
        await conn.copy_records_to_table("memories", records=fresh, columns=MEMORY_COLUMNS)


_REINFORCE = """
    UPDATE memories m SET
        activation = noema_decay(m.activation, noema_days(r.at, m.activation_at), m.importance, r.half_life,
                                 r.floor)
                     + r.amount * (1 - noema_decay(m.activation, noema_days(r.at, m.activation_at),
                                                   m.importance, r.half_life, r.floor)),
        activation_at = greatest(m.activation_at, r.at),
        half_life_days = r.half_life,
        activation_floor = r.floor,
        recall_count = m.recall_count + r.recalls,
        updated_at = greatest(m.updated_at, r.at),
        row_seq = r.seq
    FROM unnest($1::text[], $2::timestamptz[], $3::float8[], $4::float8[], $5::integer[], $6::float8[],
                $7::text[], $8::bigint[])
         AS r(id, at, amount, half_life, recalls, floor, workspace, seq)
    WHERE m.id = r.id AND m.workspace = r.workspace
"""
# Every change to a memory names its workspace too: an event of another workspace that names the
# same id (an agent there chose a colliding observation id) changes nothing here.


Reinforcement = tuple[str, datetime, float, float, int, float, str, int]
"""(memory id, time, amount, half-life in days, recalls it counts as, activation floor, workspace,
stream sequence)."""


async def _reinforce(conn: asyncpg.Connection, rows: Sequence[Reinforcement]) -> None:
    """Apply reinforcements in order, set-based: one statement per round, the n-th reinforcement of
    each memory in the n-th round (an UPDATE changes a row once), which gives each memory the values
    of applying its reinforcements one by one."""
    rounds: list[list[Reinforcement]] = []
    seen: dict[str, int] = {}
    for row in rows:
        n = seen.get(row[0], 0)
        seen[row[0]] = n + 1
        if n == len(rounds):
            rounds.append([])
        rounds[n].append(row)
    for batch in rounds:
        await conn.execute(_REINFORCE, *(list(column) for column in zip(*batch, strict=True)))


@HANDLERS.register(MemoryRetrieved, touches=lambda ev: _memory(ev.payload.memory_id))
async def memory_retrieved(conn: asyncpg.Connection, run: Run[MemoryRetrieved]) -> None:
    """A recall: decay to the recall time, then the recorded boost; recall_count + 1."""
    args = []
    for item, ev in run:
        p = ev.payload
        args.append(
            (
                p.memory_id,
                ev.occurred_at,
                p.boost,
                p.half_life_days,
                1,
                p.activation_floor,
                ev.workspace,
                item.seq,
            )
        )
    await _reinforce(conn, args)


@HANDLERS.register(MemoryReinforced, touches=lambda ev: _memory(ev.payload.memory_id))
async def memory_reinforced(conn: asyncpg.Connection, run: Run[MemoryReinforced]) -> None:
    """An explicit reinforcement: like a recall, without counting as one."""
    args = []
    for item, ev in run:
        p = ev.payload
        boost = min(1.0, max(0.0, p.amount))
        args.append(
            (
                p.memory_id,
                ev.occurred_at,
                boost,
                p.half_life_days,
                0,
                p.activation_floor,
                ev.workspace,
                item.seq,
            )
        )
    await _reinforce(conn, args)


# An earlier release's tick (v1, ``rewrite``) rewrites a whole workspace; a tick now only lists what
# faded (activation is computed where it is read): no row changes.
@HANDLERS.register(ActivationDecayed, touches=lambda ev: ANYTHING if ev.payload.rewrite else frozenset())
async def activation_decayed(conn: asyncpg.Connection, run: Run[ActivationDecayed]) -> None:
    """A tick changes no row: activation is computed where it is read. Only a tick of an earlier
    release (``rewrite``, an upcast v1) is applied as its projector did — every memory of the
    workspace decayed up to the tick time, in one statement, which then decays from there with the
    tick's half-life and floor — so replay reproduces the read models those ticks built."""
    for item, ev in run:
        if not ev.payload.rewrite:
            continue
        await conn.execute(
            """UPDATE memories SET
                   activation = noema_decay(activation, noema_days($2, activation_at), importance, $3, $4),
                   activation_at = $2,
                   half_life_days = $3,
                   activation_floor = $4,
                   row_seq = $5
               WHERE workspace = $1 AND activation_at < $2""",
            ev.workspace,
            ev.payload.tick_at,
            ev.payload.half_life_days,
            ev.payload.activation_floor,
            item.seq,
        )


@HANDLERS.register(MemorySuperseded, touches=lambda ev: _memory(ev.payload.memory_id))
async def memory_superseded(conn: asyncpg.Connection, run: Run[MemorySuperseded]) -> None:
    """The old version stays, marked superseded and pointing at its replacement."""
    args = [
        (ev.payload.memory_id, ev.payload.superseded_by, ev.occurred_at, ev.workspace, item.seq)
        for item, ev in run
    ]
    await conn.executemany(
        "UPDATE memories SET status = 'superseded', superseded_by = $2, updated_at = $3, row_seq = $5 "
        "WHERE id = $1 AND workspace = $4 AND status <> 'erased'",  # erased stays erased
        args,
    )


_STATUS_BY_ACTION = {"retract": "retracted", "archive": "archived", "restore": "active"}


@HANDLERS.register(
    OperatorAction, touches=lambda ev: _memory(ev.payload.target_id) if ev.payload.target_id else frozenset()
)
async def operator_action(conn: asyncpg.Connection, run: Run[OperatorAction]) -> None:
    """Retract / archive / restore change the target's status; the action itself is in ``events``."""
    for item, ev in run:
        status = _STATUS_BY_ACTION.get(ev.payload.action)
        if status is not None and ev.payload.target_id:
            await conn.execute(
                "UPDATE memories SET status = $2, updated_at = $3, row_seq = $5 "
                "WHERE id = $1 AND workspace = $4 AND status NOT IN ('superseded', 'erased')",
                ev.payload.target_id,
                status,
                ev.occurred_at,
                ev.workspace,
                item.seq,
            )


@HANDLERS.register(FactMentioned, touches=lambda ev: _memory(ev.payload.memory_id))
async def fact_mentioned(conn: asyncpg.Connection, run: Run[FactMentioned]) -> None:
    """A repeated mention raises confidence by the recorded rate, up to the recorded cap, and
    mention_count by the mentions the event stands for (a merge: one per merged fact)."""
    args = []
    for item, ev in run:
        p = ev.payload
        sources = list(p.source_observation_ids)
        args.append(
            (
                p.memory_id,
                p.rate,
                p.confidence_cap,
                sources,
                ev.occurred_at,
                p.mentions,
                ev.workspace,
                item.seq,
            )
        )
    await conn.executemany(
        """UPDATE memories SET
               confidence = least($3, confidence + $2 * (1 - confidence)),
               mention_count = mention_count + $6,
               source_observation_ids = source_observation_ids || $4::text[],
               updated_at = greatest(updated_at, $5),
               row_seq = $8
           WHERE id = $1 AND workspace = $7""",
        args,
    )


@HANDLERS.register(
    RelationshipAdded,
    touches=lambda ev: (
        _memory(ev.payload.from_id, ev.payload.to_id) | {("relationship", ev.payload.relationship_id)}
    ),
)
async def relationship_added(conn: asyncpg.Connection, run: Run[RelationshipAdded]) -> None:
    """Insert edges. One whose ends are in another mind/workspace (or do not exist) is refused by
    the foreign keys; the projection then skips that event and dead-letters it with the reason
    (the same way on every replay)."""
    for item, ev in run:
        p = ev.payload
        await conn.execute(
            """INSERT INTO relationships (id, workspace, mind, from_id, to_id, relation, confidence,
                                          source, origin_event, origin_seq, created_at, row_seq)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $10) ON CONFLICT (id) DO NOTHING""",
            p.relationship_id,
            ev.workspace,
            ev.mind,
            p.from_id,
            p.to_id,
            p.relation,
            p.confidence,
            p.source,
            ev.id,
            item.seq,
            ev.occurred_at,
        )


def _index_name(model: str) -> str:
    return "memory_embeddings_hnsw_" + hashlib.sha1(model.encode()).hexdigest()[:10]


@HANDLERS.register(MemoryEmbedded, touches=lambda ev: _memory(ev.payload.memory_id))
async def memory_embedded(conn: asyncpg.Connection, run: Run[MemoryEmbedded]) -> None:
    """Store vectors; the first vector of a model creates that model's HNSW index (with pgvector)."""
    has_vector = await conn.fetchval(
        "SELECT format_type(atttypid, atttypmod) = 'vector' FROM pg_attribute "
        "WHERE attrelid = 'memory_embeddings'::regclass AND attname = 'embedding'"
    )
    rows = []
    for item, ev in run:
        p = ev.payload
        if not p.vector and p.sealed_vector is None:
            continue  # sealed under a key that is destroyed: the vector was erased with its memory
        if len(p.vector) != p.dimensions:
            log.warning("embedding has the wrong dimensions; skipped", seq=item.seq, memory_id=p.memory_id)
            continue
        # msgspec writes each float with the digits repr() gives (shortest round trip), so the
        # server parses the same values, at a fraction of the cost of joining reprs.
        text = _json.encode(p.vector).decode()
        rows.append((p.memory_id, p.model, p.dimensions, text, ev.id, item.seq, ev.occurred_at, ev.workspace))
    cast = "::vector" if has_vector else "::real[]"
    if not has_vector:
        rows = [(*r[:3], "{" + r[3][1:-1] + "}", *r[4:]) for r in rows]
    await conn.executemany(
        f"""INSERT INTO memory_embeddings (memory_id, model, dimensions, embedding, origin_event, origin_seq,
                                          created_at, row_seq)
            SELECT $1, $2, $3, $4{cast}, $5, $6, $7, $6
            WHERE EXISTS (SELECT 1 FROM memories WHERE id = $1 AND workspace = $8)
            ON CONFLICT (memory_id, model) DO NOTHING""",
        rows,
    )
    if has_vector:
        for model, dims in {(r[1], r[2]) for r in rows}:
            if not re.fullmatch(r"[\w./:-]{1,200}", model):
                continue  # no index for odd model names; recall still works by scan
            # CREATE INDEX needs the table's owner; the function runs with the owner's rights
            # (migration 0006), so the projector's role needs no DDL right of its own.
            await conn.execute(
                "SELECT noema_ensure_vector_index($1, $2, $3)", _index_name(model), model, int(dims)
            )
