"""The projection of ``content.erased``: the erasure's keys are destroyed (in the same transaction)
and every copy of the erased content in the read model is blanked, leaving rows a replay with those
keys gone gives too (docs/privacy.md)."""

from __future__ import annotations

import asyncpg

from noema.adapters.postgres.keyring import destroy_keys
from noema.adapters.postgres.registry import Handlers, Run
from noema_events import ContentErased

__all__ = ["ERASURE_HANDLERS"]

ERASURE_HANDLERS = Handlers()
"""Event type → handler, for erasure."""

# A memory's key is its id (noema.application.sealing): the memories of the destroyed keys are the
# ones whose content a replay can no longer open, and the only ones blanked here.
_BLANK_MEMORIES = """
    UPDATE memories SET content = '', participants = '{}', steps = '{}', preconditions = '{}',
                        outcomes = '{}', erased_at = $3, erasure_id = $4
    WHERE workspace = $1 AND id = ANY($2::text[])
"""

_BLANK_GISTS = """
    UPDATE working_memory w SET items = (
        SELECT coalesce(jsonb_agg(CASE WHEN e->>'memory_id' = ANY($2::text[]) THEN e - 'gist' ELSE e END
                                  ORDER BY n), '[]'::jsonb)
        FROM jsonb_array_elements(w.items) WITH ORDINALITY AS x(e, n))
    WHERE w.workspace = $1
      AND EXISTS (SELECT 1 FROM jsonb_array_elements(w.items) e WHERE e->>'memory_id' = ANY($2::text[]))
"""


@ERASURE_HANDLERS.register(ContentErased)
async def content_erased(conn: asyncpg.Connection, run: Run[ContentErased]) -> None:
    """Destroy the keys; blank the memories' content, drop their vectors and working-memory gists,
    and forget words no memory of the workspace holds any more."""
    for _, ev in run:
        p = ev.payload
        keys = list(p.key_ids)
        await destroy_keys(conn, keys, p.erasure_id, ev.occurred_at)
        await conn.execute(_BLANK_MEMORIES, ev.workspace, keys, ev.occurred_at, p.erasure_id)
        await conn.execute(
            "DELETE FROM memory_embeddings e USING memories m "
            "WHERE e.memory_id = m.id AND m.workspace = $1 AND m.id = ANY($2::text[])",
            ev.workspace,
            keys,
        )
        await conn.execute(_BLANK_GISTS, ev.workspace, keys)
        await conn.execute("DELETE FROM memory_terms WHERE workspace = $1 AND memories <= 0", ev.workspace)
