"""Read queries over the memory read model (listing, detail with provenance); search is ``noema.recall``."""

from __future__ import annotations

from typing import Any

import asyncpg

from ...ids import id_prefix

__all__ = ["MemoryQueries", "resolve_id"]

MEMORY_FIELDS = (
    "id, workspace, mind, kind, epistemic_kind, content, domain, topic, repo, confidence, importance, "
    "salience, credibility, veracity, memory_type, activation, activation_at, status, superseded_by, "
    "valid_until, recall_count, mention_count, source_observation_ids, origin_event, origin_seq, channel, "
    "source, participants, steps, preconditions, outcomes, session, happened_at, created_at, updated_at"
)


async def resolve_id(
    pool: asyncpg.Pool,
    table: str,
    given: str,
    workspace: str | None = None,
    *,
    where: str = "",
    several: str,
) -> str | None:
    """The full id of the row of ``table`` (memories, policies) that ``given`` names: ``given``
    itself when such an id exists, else the one id ``given`` is a prefix of (:func:`noema.ids.id_prefix`),
    among the rows of ``workspace`` when given and those ``where`` (an SQL condition, from code only)
    keeps. None when nothing matches.

    The exact id is looked up first, on the primary key, so resolving a full id again costs little.
    Raises ``LookupError`` ("... matches several <several>; ...") when a prefix matches several rows.
    """
    scope = f"{' AND workspace = $2' if workspace is not None else ''}{where}"
    args = (workspace,) if workspace is not None else ()
    if await pool.fetchval(f"SELECT 1 FROM {table} WHERE id = $1{scope}", given, *args):
        return given
    pattern = id_prefix(given)
    if pattern is None:
        return None
    rows = await pool.fetch(
        f"SELECT id FROM {table} WHERE id LIKE $1{scope} ORDER BY id LIMIT 2", pattern, *args
    )
    if len(rows) > 1:
        raise LookupError(f"{given} matches several {several}; give more of the id")
    return str(rows[0]["id"]) if rows else None


class MemoryQueries:
    """Queries against one schema's read model through a connection pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def resolve(self, id_or_prefix: str, workspace: str | None = None) -> str | None:
        """The full id of a memory given its id or a unique prefix (at least 6 characters), looked
        for in ``workspace`` only when given (so a scoped caller learns nothing of other workspaces).

        Raises ``LookupError`` when a prefix matches several memories.
        """
        return await resolve_id(self._pool, "memories", id_or_prefix, workspace, several="memories")

    async def get(self, full_id: str) -> dict[str, Any] | None:
        """One memory by its full id (:meth:`resolve` turns a prefix into one) with provenance,
        relationships and vectors."""
        row = await self._pool.fetchrow(f"SELECT {MEMORY_FIELDS} FROM memories WHERE id = $1", full_id)
        if row is None:
            return None
        memory = dict(row)
        origin = await self._pool.fetchrow(
            "SELECT seq, id, type, workspace, mind, occurred_at, causation_id, correlation_id, actor, "
            "subject, payload::text AS payload FROM events WHERE seq = $1",
            memory["origin_seq"],
        )
        memory["origin"] = dict(origin) if origin else None
        memory["relationships"] = [
            dict(r)
            for r in await self._pool.fetch(
                """SELECT r.id, r.relation, r.from_id, r.to_id, r.confidence, r.source, r.created_at,
                          CASE WHEN r.from_id = $1 THEN 'out' ELSE 'in' END AS direction,
                          o.content AS other_content
                   FROM relationships r
                   JOIN memories o ON o.id = CASE WHEN r.from_id = $1 THEN r.to_id ELSE r.from_id END
                   WHERE r.from_id = $1 OR r.to_id = $1 ORDER BY r.created_at, r.id""",
                full_id,
            )
        ]
        memory["embeddings"] = [
            dict(r)
            for r in await self._pool.fetch(
                "SELECT model, dimensions, created_at FROM memory_embeddings "
                "WHERE memory_id = $1 ORDER BY model",
                full_id,
            )
        ]
        return memory

    async def count(self, workspace: str | None = None) -> int:
        """How many memory rows (any status)."""
        return int(
            await self._pool.fetchval(
                "SELECT count(*) FROM memories WHERE ($1::text IS NULL OR workspace = $1)", workspace
            )
        )
