"""Read queries over the memory read model (listing, detail with provenance, the audit log and its
questions, and the checks of memory operations): :class:`noema.ports.MemoryReads` over PostgreSQL; search is
``noema.application.search``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

import asyncpg

from noema.adapters.postgres.events import EVENT_FIELDS, EventQueries
from noema.adapters.postgres.keyring import opened_rows
from noema.adapters.postgres.tenancy import ALL_WORKSPACES, workspace_scope
from noema.adapters.postgres.voices import activation_sql, filter_conditions
from noema.ids import id_prefix
from noema.ports import Fading, MemoryOrder, RecallFilters

__all__ = ["EVENT_FIELDS", "MEMORY_FIELDS", "MemoryQueries", "resolve_id", "stored_dimensions"]

MEMORY_FIELDS = (
    "id, workspace, mind, kind, epistemic_kind, content, domain, topic, repo, confidence, importance, "
    "salience, credibility, veracity, memory_type, activation, activation_at, status, superseded_by, "
    "valid_until, recall_count, mention_count, source_observation_ids, origin_event, origin_seq, channel, "
    "source, participants, steps, preconditions, outcomes, session, happened_at, created_at, updated_at, "
    "erased_at"
)
"""The columns of a memory row as reads answer them; ``activation`` is the memory's activation at the
read's time (:func:`activation_sql`), ``activation_at`` the time its stored activation refers to (its
creation or last reinforcement), ``erased_at`` when its content was erased (null if never)."""


def _memory_select(at: str) -> str:
    """:data:`MEMORY_FIELDS` as a select list, with the activation at ``at``."""
    return MEMORY_FIELDS.replace(
        "activation, activation_at", f"{activation_sql(at)} AS activation, activation_at"
    )


_ORDER_BY: dict[MemoryOrder, str] = {
    "newest": "created_at DESC, origin_seq DESC",
    # The memories_recent index serves these.
    "happened_asc": "coalesce(happened_at, created_at) ASC, origin_seq ASC",
    "happened_desc": "coalesce(happened_at, created_at) DESC, origin_seq DESC",
}


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
        f"SELECT DISTINCT id FROM {table} WHERE id LIKE $1{scope} ORDER BY id LIMIT 2", pattern, *args
    )
    if len(rows) > 1:
        raise LookupError(f"{given} matches several {several}; give more of the id")
    return str(rows[0]["id"]) if rows else None


def one_of(found: set[str], given: str) -> str | None:
    """The one id ``given`` names among ``found`` (ids of several kinds), None when none."""
    if len(found) > 1:
        raise LookupError(f"{given} matches several ids; give more of the id")
    return next(iter(found), None)


class MemoryQueries(EventQueries):
    """Queries against one schema's read model through a connection pool (the event reads of ``why``
    and ``audit diff`` are :class:`~noema.adapters.postgres.events.EventQueries`')."""

    def __init__(self, pool: asyncpg.Pool, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._pool = pool
        self._clock = clock
        """The time activations are read at (the application's clock; as of a point, its time)."""

    async def resolve(self, id_or_prefix: str, workspace: str | None = None) -> str | None:
        """The full id of a memory given its id or a unique prefix (at least 6 characters), looked
        for in ``workspace`` only when given (so a scoped caller learns nothing of other workspaces).

        Raises ``LookupError`` when a prefix matches several memories.
        """
        return await resolve_id(self._pool, "memories", id_or_prefix, workspace, several="memories")

    async def resolve_reference(self, id_or_prefix: str, workspace: str | None = None) -> str | None:
        """The full id of the memory, policy or event ``id_or_prefix`` names (``LookupError`` when
        a prefix names several)."""
        found = {
            full
            for table in ("memories", "policies", "events")
            if (full := await resolve_id(self._pool, table, id_or_prefix, workspace, several=table))
        }
        return one_of(found, id_or_prefix)

    async def get(self, full_id: str) -> dict[str, Any] | None:
        """One memory by its full id (:meth:`resolve` turns a prefix into one) with provenance,
        relationships and vectors."""
        row = await self._pool.fetchrow(
            f"SELECT {_memory_select('$2')} FROM memories WHERE id = $1", full_id, self._clock()
        )
        if row is None:
            return None
        memory = dict(row)
        origin = await self._pool.fetchrow(
            f"SELECT {EVENT_FIELDS} FROM events WHERE seq = $1", memory["origin_seq"]
        )
        memory["origin"] = (await opened_rows(self._pool, [origin]))[0] if origin else None
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

    async def page(
        self, filters: RecallFilters, order: MemoryOrder, limit: int, offset: int
    ) -> list[dict[str, Any]]:
        """Memory rows (:data:`MEMORY_FIELDS`) matching ``filters`` in ``order``, one page."""
        args: list[Any] = []
        where = filter_conditions(filters, "m", args)
        rows = await self._pool.fetch(
            f"SELECT {_memory_select(f'${len(args) + 3}')} FROM memories m WHERE {where} "
            f"ORDER BY {_ORDER_BY[order]} LIMIT ${len(args) + 1} OFFSET ${len(args) + 2}",
            *args,
            limit,
            offset,
            self._clock(),
        )
        return [dict(r) for r in rows]

    async def workspace_exists(self, workspace: str) -> bool:
        """Whether any event names ``workspace`` (an index lookup)."""
        return bool(
            await self._pool.fetchval("SELECT EXISTS (SELECT 1 FROM events WHERE workspace = $1)", workspace)
        )

    async def citing_events(self, memory_id: str, workspace: str, limit: int) -> list[dict[str, Any]]:
        """Events (:data:`EVENT_FIELDS`) whose payload names the memory (a string value equal to its
        id), newest first: read by the ``event_citations`` index the projector keeps (migration
        0016). Every event that concerns a memory is published in the memory's workspace."""
        rows = await self._pool.fetch(
            f"SELECT {EVENT_FIELDS} FROM events WHERE seq IN "
            "(SELECT seq FROM event_citations WHERE ref = $2 AND workspace = $1) "
            "ORDER BY seq DESC LIMIT $3",
            workspace,
            memory_id,
            limit,
        )
        return await opened_rows(self._pool, rows)

    async def audit(
        self,
        workspace: str | None,
        types: list[str] | None,
        actor: str | None,
        before: int | None,
        limit: int,
    ) -> list[dict[str, Any]]:
        """Events (:data:`EVENT_FIELDS`) matching the filters, newest first, before seq ``before``."""
        rows = await self._pool.fetch(
            f"SELECT {EVENT_FIELDS} FROM events "
            "WHERE ($1::text IS NULL OR workspace = $1) AND ($2::text[] IS NULL OR type = ANY($2)) "
            "AND ($3::text IS NULL OR actor = $3) AND ($4::bigint IS NULL OR seq < $4) "
            "ORDER BY seq DESC LIMIT $5",
            workspace,
            types,
            actor,
            before,
            limit,
        )
        return await opened_rows(self._pool, rows)

    async def memory(self, memory_id: str) -> dict[str, Any] | None:
        """Every column of one memory."""
        row = await self._pool.fetchrow("SELECT * FROM memories WHERE id = $1", memory_id)
        return None if row is None else dict(row)

    async def scopes(self, ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """id → (workspace, mind) of the memories that exist."""
        rows = await self._pool.fetch(
            "SELECT id, workspace, mind FROM memories WHERE id = ANY($1::text[])", list(ids)
        )
        return {r["id"]: (r["workspace"], r["mind"]) for r in rows}

    async def relationship(self, from_id: str, to_id: str, relation: str) -> str | None:
        """The id of an existing edge."""
        value = await self._pool.fetchval(
            "SELECT id FROM relationships WHERE from_id = $1 AND to_id = $2 AND relation = $3",
            from_id,
            to_id,
            relation,
        )
        return None if value is None else str(value)

    async def memory_workspaces(self) -> list[str]:
        """Every workspace that has memories."""
        return [
            r["workspace"]
            for r in await self._pool.fetch("SELECT DISTINCT workspace FROM memories ORDER BY 1")
        ]

    async def fading(
        self, workspace: str, since: datetime, until: datetime, threshold: float, limit: int
    ) -> Fading:
        """The memories of ``workspace`` that faded below ``threshold`` or expired in (since, until]:
        a read of the workspace's rows (never a write), off the projector."""
        faded = await self._pool.fetch(
            f"""SELECT id, count(*) OVER () AS total FROM memories
                WHERE workspace = $1 AND status = 'active'
                  AND {activation_sql("$3")} < $4
                  AND {activation_sql("greatest($2, activation_at)")} >= $4
                ORDER BY id LIMIT $5""",
            workspace,
            since,
            until,
            threshold,
            limit,
        )
        expired = await self._pool.fetch(
            """SELECT id, count(*) OVER () AS total FROM memories
               WHERE workspace = $1 AND status = 'active' AND valid_until > $2 AND valid_until <= $3
               ORDER BY id LIMIT $4""",
            workspace,
            since,
            until,
            limit,
        )
        return Fading(
            [r["id"] for r in faded],
            faded[0]["total"] if faded else 0,
            [r["id"] for r in expired],
            expired[0]["total"] if expired else 0,
        )

    async def count_unembedded(self, model: str) -> int:
        """How many memories have no vector for ``model``."""
        return int(
            await self._pool.fetchval(
                "SELECT count(*) FROM memories m WHERE NOT EXISTS "
                "(SELECT 1 FROM memory_embeddings e WHERE e.memory_id = m.id AND e.model = $1)",
                model,
            )
        )

    async def unembedded(self, model: str, after: str, limit: int) -> list[dict[str, Any]]:
        """The next memories (by id, after ``after``) without a vector for ``model``: id, workspace,
        mind, content, participants, happened_at, origin_event."""
        rows = await self._pool.fetch(
            "SELECT id, workspace, mind, content, participants, happened_at, origin_event "
            "FROM memories m WHERE id > $2 AND NOT EXISTS "
            "(SELECT 1 FROM memory_embeddings e WHERE e.memory_id = m.id AND e.model = $1) "
            "ORDER BY id LIMIT $3",
            model,
            after,
            limit,
        )
        return [dict(r) for r in rows]

    async def workspace_of(self, table: Literal["memories", "policies"], memory_id: str) -> str | None:
        """The workspace of the row with this exact id."""
        value = await self._pool.fetchval(f"SELECT workspace FROM {table} WHERE id = $1", memory_id)
        return None if value is None else str(value)

    async def workspaces_of(self, table: Literal["memories", "policies"], given: str) -> list[str]:
        """The workspaces (at most 2) holding an id equal to ``given`` or starting with its prefix."""
        rows = await self._pool.fetch(
            f"SELECT DISTINCT workspace FROM {table} WHERE id = $1 OR id LIKE $2 LIMIT 2",
            given,
            id_prefix(given),
        )
        return [r["workspace"] for r in rows]


async def stored_dimensions(pool: asyncpg.Pool, model: str) -> int | None:
    """The dimension count of the vectors stored for ``model`` in every workspace (None: none stored)."""
    with workspace_scope(ALL_WORKSPACES):
        found = await pool.fetchval(
            "SELECT dimensions FROM memory_embeddings WHERE model = $1 LIMIT 1", model
        )
    return None if found is None else int(found)
