"""Projection handlers of workspace knowledge: facts, domains, grants, workspace settings, policies,
conflicts, working memory and agent notes (requirements §5, §7).

Like every handler, these only insert rows or set new values from events (values the events
recorded, never a constant of the code); replaying the same events reproduces the same tables.
"""

from __future__ import annotations

import asyncpg
import msgspec

from noema.adapters.postgres.handlers import insert_memories, memory_row
from noema.adapters.postgres.registry import Handlers, Run
from noema_events import (
    ConflictRecorded,
    DomainCreated,
    FactProposed,
    GrantChanged,
    NotesUpdated,
    PolicyProposed,
    PolicySuperseded,
    WorkingMemoryUpdated,
    WorkspaceConfigured,
)

__all__ = ["KNOWLEDGE_HANDLERS"]

_json = msgspec.json.Encoder()

KNOWLEDGE_HANDLERS = Handlers()
"""Event type → handler, for the knowledge tables."""


def proposed_columns(ev: FactProposed) -> dict[str, object]:
    """The columns a ``fact.proposed`` sets beyond the envelope's: a semantic memory of its domain
    and topic, held by the proposing agent (its mind), with the credibility, importance and salience
    decided with it."""
    p = ev.payload
    return {
        "id": p.memory_id,
        "kind": "semantic",
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
        "channel": None,
        "source": p.role or None,
        "participants": [ev.actor],
        "steps": [],
        "preconditions": [],
        "outcomes": [],
        "session": None,
        "happened_at": None,
        "valid_until": p.valid_until,
        "half_life_days": p.half_life_days,
        "activation_floor": p.activation_floor,
    }


@KNOWLEDGE_HANDLERS.register(FactProposed, touches=lambda ev: frozenset({("memory", ev.payload.memory_id)}))
async def fact_proposed(conn: asyncpg.Connection, run: Run[FactProposed]) -> None:
    """A fact is a semantic memory of its domain and topic, held by the proposing agent (its mind)."""
    await insert_memories(conn, [memory_row(item, **proposed_columns(ev)) for item, ev in run])


@KNOWLEDGE_HANDLERS.register(
    DomainCreated, touches=lambda ev: frozenset({("domain", ev.workspace, ev.payload.domain)})
)
async def domain_created(conn: asyncpg.Connection, run: Run[DomainCreated]) -> None:
    """The first use of a domain (a repeated creation changes nothing)."""
    args = []
    for item, ev in run:
        p = ev.payload
        name = p.domain.split("/", 1)[1] if p.repo else p.domain
        args.append((ev.workspace, p.domain, name, p.repo, ev.actor, ev.occurred_at, ev.id, item.seq))
    await conn.executemany(
        """INSERT INTO domains (workspace, domain, name, repo, created_by, created_at, origin_event, row_seq)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING""",
        args,
    )


@KNOWLEDGE_HANDLERS.register(
    GrantChanged, touches=lambda ev: frozenset({("grant", ev.workspace, ev.payload.role, ev.payload.domain)})
)
async def grant_changed(conn: asyncpg.Connection, run: Run[GrantChanged]) -> None:
    """(role, domain) → access; the latest event wins."""
    args = []
    for item, ev in run:
        p = ev.payload
        args.append(
            (ev.workspace, p.role, p.domain, p.access, ev.actor, ev.occurred_at, ev.id, p.seeded, item.seq)
        )
    await conn.executemany(
        """INSERT INTO grants (workspace, role, domain, access, changed_by, updated_at, origin_event, seeded,
                               row_seq)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
           ON CONFLICT (workspace, role, domain) DO UPDATE SET access = $4, changed_by = $5,
               updated_at = $6, origin_event = $7, seeded = $8, row_seq = $9""",
        args,
    )


@KNOWLEDGE_HANDLERS.register(WorkspaceConfigured, touches=lambda ev: frozenset({("workspace", ev.workspace)}))
async def workspace_configured(conn: asyncpg.Connection, run: Run[WorkspaceConfigured]) -> None:
    """A workspace's access mode."""
    for item, ev in run:
        await conn.execute(
            """INSERT INTO workspace_settings (workspace, access_mode, updated_at, origin_event, row_seq)
               VALUES ($1, $2, $3, $4, $5)
               ON CONFLICT (workspace) DO UPDATE SET access_mode = $2, updated_at = $3, origin_event = $4,
                   row_seq = $5""",
            ev.workspace,
            ev.payload.access_mode,
            ev.occurred_at,
            ev.id,
            item.seq,
        )


@KNOWLEDGE_HANDLERS.register(PolicyProposed, touches=lambda ev: frozenset({("policy", ev.payload.policy_id)}))
async def policy_proposed(conn: asyncpg.Connection, run: Run[PolicyProposed]) -> None:
    """A new, active policy."""
    args = []
    for item, ev in run:
        p = ev.payload
        args.append(
            (
                p.policy_id,
                ev.workspace,
                p.domain,
                p.repo,
                p.rule,
                p.required_role,
                list(p.source_fact_ids),
                ev.actor,
                ev.occurred_at,
                ev.id,
                item.seq,
            )
        )
    await conn.executemany(
        """INSERT INTO policies (id, workspace, domain, repo, rule, required_role, source_fact_ids,
                                 proposed_by, created_at, updated_at, origin_event, origin_seq, row_seq)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10, $11, $11) ON CONFLICT (id) DO NOTHING""",
        args,
    )


@KNOWLEDGE_HANDLERS.register(
    PolicySuperseded, touches=lambda ev: frozenset({("policy", ev.payload.policy_id)})
)
async def policy_superseded(conn: asyncpg.Connection, run: Run[PolicySuperseded]) -> None:
    """The old policy stays, inactive, pointing at its replacement (if any)."""
    args = [
        (ev.payload.policy_id, ev.payload.superseded_by, ev.occurred_at, ev.workspace, item.seq)
        for item, ev in run
    ]
    await conn.executemany(
        "UPDATE policies SET active = false, superseded_by = $2, updated_at = $3, row_seq = $5 "
        "WHERE id = $1 AND workspace = $4",
        args,
    )


@KNOWLEDGE_HANDLERS.register(
    ConflictRecorded, touches=lambda ev: frozenset({("conflict", ev.payload.conflict_id)})
)
async def conflict_recorded(conn: asyncpg.Connection, run: Run[ConflictRecorded]) -> None:
    """A conflict row with both sides and the rule that decided."""
    args = []
    for item, ev in run:
        p = ev.payload
        args.append(
            (
                p.conflict_id,
                ev.workspace,
                p.domain,
                p.topic,
                p.winner_id,
                p.loser_id,
                p.rule,
                p.detail,
                ev.actor,
                ev.occurred_at,
                ev.id,
                item.seq,
            )
        )
    await conn.executemany(
        """INSERT INTO conflicts (id, workspace, domain, topic, winner_id, loser_id, rule, detail, decided_by,
                                  created_at, origin_event, origin_seq, row_seq)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12) ON CONFLICT (id) DO NOTHING""",
        args,
    )


_WORKING_MEMORY = """
    INSERT INTO working_memory (workspace, mind, capacity, items, updated_at, origin_event, row_seq)
    SELECT workspace, mind, capacity, items, updated_at, origin_event, row_seq
    FROM unnest($1::text[], $2::text[], $3::integer[], $4::jsonb[], $5::timestamptz[], $6::text[],
                $7::bigint[])
         AS r(workspace, mind, capacity, items, updated_at, origin_event, row_seq)
    ON CONFLICT (workspace, mind) DO UPDATE SET capacity = excluded.capacity, items = excluded.items,
        updated_at = excluded.updated_at, origin_event = excluded.origin_event, row_seq = excluded.row_seq
"""


@KNOWLEDGE_HANDLERS.register(
    WorkingMemoryUpdated, touches=lambda ev: frozenset({("working_memory", ev.workspace, ev.mind)})
)
async def working_memory_updated(conn: asyncpg.Connection, run: Run[WorkingMemoryUpdated]) -> None:
    """A mind's working memory, replaced whole. Each state of the run is a version of its own (the
    history keeps them all), so the run is written in rounds, one statement each: the n-th update
    of each mind in the n-th round (an upsert writes a row once per statement).

    A capacity that the check constraint refuses fails its round; the run is then applied one
    event at a time, and the database refuses exactly the events it refuses then."""
    rows = [
        (
            ev.workspace,
            ev.mind,
            ev.payload.capacity,
            _json.encode(ev.payload.items).decode(),
            ev.occurred_at,
            ev.id,
            item.seq,
        )
        for item, ev in run
    ]
    if not all(row[2] > 0 for row in rows):  # working_memory's CHECK (capacity > 0), migration 0005
        for row in rows:
            await conn.execute(_WORKING_MEMORY, *([value] for value in row))
        return
    rounds: list[list[tuple[object, ...]]] = []
    seen: dict[tuple[str, str], int] = {}
    for row in rows:
        n = seen.get((row[0], row[1]), 0)
        seen[(row[0], row[1])] = n + 1
        if n == len(rounds):
            rounds.append([])
        rounds[n].append(row)
    for batch in rounds:
        await conn.execute(_WORKING_MEMORY, *(list(column) for column in zip(*batch, strict=True)))


@KNOWLEDGE_HANDLERS.register(
    NotesUpdated, touches=lambda ev: frozenset({("notes", ev.workspace, ev.payload.agent)})
)
async def notes_updated(conn: asyncpg.Connection, run: Run[NotesUpdated]) -> None:
    """An agent's notes, replaced whole."""
    for item, ev in run:
        await conn.execute(
            """INSERT INTO agent_notes (workspace, agent, notes, updated_at, origin_event, row_seq)
               VALUES ($1, $2, $3, $4, $5, $6)
               ON CONFLICT (workspace, agent) DO UPDATE SET notes = $3, updated_at = $4, origin_event = $5,
                   row_seq = $6""",
            ev.workspace,
            ev.payload.agent,
            ev.payload.notes,
            ev.occurred_at,
            ev.id,
            item.seq,
        )
