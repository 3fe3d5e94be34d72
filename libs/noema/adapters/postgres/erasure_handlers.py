"""The projection of ``content.erased``: the erasure's keys are destroyed (in the same transaction)
and every copy of the erased content in the read model is blanked, leaving rows a replay with those
keys gone gives too (docs/privacy.md)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import asyncpg
import structlog

from noema.adapters.postgres.keyring import destroy_keys
from noema.adapters.postgres.registry import Handlers, Run
from noema_events import ContentErased

__all__ = ["ERASURE_HANDLERS", "blank", "blank_copies"]

log = structlog.get_logger("noema.erasure")

ERASURE_HANDLERS = Handlers()
"""Event type → handler, for erasure."""

# A memory's key is its id (noema.domain.sealed_events): the memories of the destroyed keys are the
# ones whose content a replay can no longer open, and the only ones blanked here.
# A fact's participant is the agent that proposed it (the event's actor, not sealed content): it
# stays, as a replay to any point before the erasure shows it, so every version of the history reads
# as that replay does, but for the erasure's mark: every version reads erased (status, erased_at,
# erasure_id), so a read as of a point before the erasure shows the memory as erased.
_BLANK_MEMORIES = """
    UPDATE {table} m SET content = '', steps = '{{}}', preconditions = '{{}}', outcomes = '{{}}',
        participants = CASE WHEN EXISTS (SELECT 1 FROM events e WHERE e.seq = m.origin_seq
                                         AND starts_with(e.type, 'fact.proposed.'))
                            THEN m.participants ELSE '{{}}' END,
        erased_at = $3, erasure_id = $4{status}{seq}
    WHERE m.workspace = $1 AND m.id = ANY($2::text[])
"""

_BLANK_GISTS = """
    UPDATE {table} w SET items = (
        SELECT coalesce(jsonb_agg(CASE WHEN e->>'memory_id' = ANY($2::text[]) THEN e - 'gist' ELSE e END
                                  ORDER BY n), '[]'::jsonb)
        FROM jsonb_array_elements(w.items) WITH ORDINALITY AS x(e, n)){seq}
    WHERE w.workspace = $1
      AND EXISTS (SELECT 1 FROM jsonb_array_elements(w.items) e WHERE e->>'memory_id' = ANY($2::text[]))
"""

_BLANK_NOTES = """
    UPDATE {table} SET notes = ''{seq}
    WHERE workspace = $1 AND (origin_event = ANY($2::text[]) OR agent = $3)
"""

# The live rows change as of the erasure (a new version, from its sequence); every version the
# history holds is blanked in place, so no read as of any point shows the content again.
_AT_ERASURE = ", row_seq = coalesce({n}, row_seq)"


@ERASURE_HANDLERS.register(ContentErased)
async def content_erased(conn: asyncpg.Connection, run: Run[ContentErased]) -> None:
    """Destroy the keys; blank the memories' content, drop their vectors and working-memory gists,
    blank erased notes, and forget words no memory of the workspace holds any more."""
    for item, ev in run:
        p = ev.payload
        await destroy_keys(conn, p.key_ids, p.erasure_id, ev.occurred_at)
        # the agent's notes as they stand here, sealed or (older) plain
        notes_of = p.target if p.scope == "notes" else None
        await blank(conn, ev.workspace, p.key_ids, ev.occurred_at, p.erasure_id, notes_of, item.seq)


async def blank(
    conn: asyncpg.Connection,
    workspace: str,
    keys: Sequence[str],
    at: datetime,
    erasure_id: str,
    notes_of: str | None = None,
    seq: int | None = None,
) -> None:
    """Blank the read model (of ``conn``'s search path) of the memories of ``keys``, and the notes of
    agent ``notes_of`` (sealed or, written before sealing, plain), in every version its history
    holds; ``seq``: the erasure's sequence, from which the live rows' new versions hold (None: a
    frozen copy, whose rows are blanked in place)."""
    ids = list(keys)
    await conn.execute(_BLANK_MEMORIES.format(
            table="memories", status=", status = 'erased'", seq=_AT_ERASURE.format(n="$5::bigint")
        ),
                       workspace, ids, at, erasure_id, seq)  # fmt: skip
    await conn.execute(
        _BLANK_MEMORIES.format(table="memories_history", status=", status = 'erased'", seq=""),
        workspace,
        ids,
        at,
        erasure_id,
    )
    for table in ("memory_embeddings", "memory_embeddings_history"):
        await conn.execute(
            f"DELETE FROM {table} e USING memories m "
            "WHERE e.memory_id = m.id AND m.workspace = $1 AND m.id = ANY($2::text[])",
            workspace,
            ids,
        )
    await conn.execute(
        _BLANK_GISTS.format(table="working_memory", seq=_AT_ERASURE.format(n="$3::bigint")),
        workspace,
        ids,
        seq,
    )
    await conn.execute(_BLANK_GISTS.format(table="working_memory_history", seq=""), workspace, ids)
    # A version of an agent's notes is sealed under its event's id (noema.domain.sealed_events).
    await conn.execute(
        _BLANK_NOTES.format(table="agent_notes", seq=_AT_ERASURE.format(n="$4::bigint")),
        workspace,
        ids,
        notes_of,
        seq,
    )
    await conn.execute(_BLANK_NOTES.format(table="agent_notes_history", seq=""), workspace, ids, notes_of)
    await conn.execute("DELETE FROM memory_terms WHERE workspace = $1 AND memories <= 0", workspace)


async def blank_copies(
    owner_url: str,
    live: str,
    workspace: str,
    keys: Sequence[str],
    at: datetime,
    erasure_id: str,
    notes_of: str | None = None,
) -> list[str]:
    """Blank the frozen copies of ``live``'s read model — its kept replays (``replay_<live>_*``) and
    resting projection versions (``<live>_v<N>``), which no projector updates; returns them. Other
    read models of the database (another instance's) are not touched; a version being rebuilt
    applies the erasure itself when it reaches it."""
    conn = await asyncpg.connect(owner_url)
    try:
        copies = [
            r["nspname"]
            for r in await conn.fetch(
                r"""SELECT n.nspname FROM pg_namespace n JOIN pg_class c ON c.relnamespace = n.oid
                   WHERE c.relname = 'memories' AND c.relkind = 'r'
                     AND (starts_with(n.nspname, 'replay_' || $1 || '_')
                          OR n.nspname ~ ('^' || $1 || '_v[0-9]+$'))
                   ORDER BY 1""",
                live,
            )
        ]
        done = []
        for schema in copies:
            try:
                async with conn.transaction():
                    await conn.execute(f"SET LOCAL search_path = {schema}, public")
                    await blank(conn, workspace, keys, at, erasure_id, notes_of)
                done.append(schema)
            except asyncpg.PostgresError as exc:  # one being dropped or rebuilt meanwhile
                log.warning("copy of the read model not blanked", schema=schema, error=str(exc))
        return done
    finally:
        await conn.close()
