"""A fresh read model loaded in bulk (replay): the same rows, written with less upkeep.

Replay applies every event with the live projection's own code, so the rows are the live rows. Only
their physical upkeep differs while a scratch ``replay_*`` schema is loaded:

- the tables are unlogged (a scratch schema: a crash of PostgreSQL empties it, and replaying again
  rebuilds it), commits do not wait for the disk, and columns no index reads are stored
  uncompressed;
- indexes that enforce nothing (not unique, not partial, backing no constraint) are dropped and
  built once at the end, in bulk;
- the vector index a model's first vector makes the handler ask for is recorded instead, and at
  the end built (a schema kept for queries) or only checked: its definition is tried on an empty
  stand-in table, and its expression is evaluated on every row it would hold;
- the BM25 postings (``memory_postings``, migration 0009) are not kept by their triggers row set by
  row set but written once at the end from the final memories, in key order: the triggers keep
  them equal to a function of the memories' rows, so the result is the same; the scopes' marks
  (``memory_scope_marks``, migration 0018, an index of the memories' counts by sequence, not
  state) are written once at the end too.

An index can refuse a row (an entry too large, a vector of other dimensions than the model's
index), and the live projection then skips that event. So the end of the load builds or checks each
deferred index on the final rows; if one refuses a row, :class:`DeferredIndexRefused` says so and the
caller replays again with every index maintained as live. The check is exact because a deferred
index's entry depends on its row alone, and the rows of the tables indexed so (events, memories,
relationships, vectors) never change an indexed column once written; partial indexes, whose rows
come and go with a status, are never deferred.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import asyncpg

from noema.adapters.errors import TRANSIENT

__all__ = ["BulkLoad", "DeferredIndexRefused"]

_VECTOR_INDEXES = "replay_vector_indexes"
"""Where the stand-in of ``noema_ensure_vector_index`` records what the handlers asked for."""

_ENSURE = "noema_ensure_vector_index(text, text, integer)"


class DeferredIndexRefused(RuntimeError):
    """A deferred index refuses a row the load accepted: load again with indexes maintained."""


@dataclass
class BulkLoad:
    """What :meth:`prepare` changed in a schema, undone by :meth:`finish`."""

    schema: str
    indexes: list[str] = field(default_factory=list)
    """``CREATE INDEX`` statements of the indexes dropped."""
    uncompressed: list[tuple[str, str]] = field(default_factory=list)
    """(table, column) stored uncompressed meanwhile."""
    ensure_vector_index: str | None = None
    """The definition of ``noema_ensure_vector_index`` before its stand-in replaced it."""
    postings: bool = False
    """Whether the postings' triggers are off meanwhile."""
    scope_marks: bool = False
    """Whether the scopes' marks' triggers are off meanwhile."""

    @classmethod
    async def prepare(cls, conn: asyncpg.Connection, schema: str) -> BulkLoad:
        """Arrange ``schema`` (a fresh, migrated ``replay_*`` schema first on ``conn``'s search
        path) for a bulk load."""
        if not re.fullmatch(r"replay_[a-z0-9_]{1,50}", schema):
            raise ValueError(f"refusing to bulk-load {schema!r}: only replay_* schemas are scratch")
        load = cls(schema)
        await conn.execute("SET synchronous_commit = off")
        for table in await _referencing_first(conn, schema):
            await conn.execute(f'ALTER TABLE "{schema}"."{table}" SET UNLOGGED')
        for row in await conn.fetch(_COMPRESSED_UNINDEXED, schema):
            load.uncompressed.append((row["relname"], row["attname"]))
            await conn.execute(_storage(schema, row["relname"], row["attname"], "EXTERNAL"))
        for row in await conn.fetch(_ENFORCING_NOTHING, schema):
            load.indexes.append(row["definition"])
            await conn.execute(f'DROP INDEX "{schema}"."{row["relname"]}"')
        if await conn.fetchval("SELECT to_regclass('memory_postings') IS NOT NULL"):
            load.postings = True
            await conn.execute(_postings_triggers(schema, "DISABLE"))
        if await conn.fetchval("SELECT to_regclass('memory_scope_marks') IS NOT NULL"):
            load.scope_marks = True
            await conn.execute(_triggers(schema, _SCOPE_TRIGGERS, "DISABLE"))
        if await conn.fetchval("SELECT to_regprocedure($1) IS NOT NULL", _ENSURE):
            load.ensure_vector_index = await conn.fetchval(
                "SELECT pg_get_functiondef(to_regprocedure($1))", _ENSURE
            )
            await conn.execute(
                f"CREATE TABLE {_VECTOR_INDEXES} (index_name text PRIMARY KEY, model text, dims integer)"
            )
            await conn.execute(
                f"""CREATE OR REPLACE FUNCTION noema_ensure_vector_index(index_name text, model text,
                                                                        dims integer) RETURNS void
                    LANGUAGE sql AS $$
                        INSERT INTO {_VECTOR_INDEXES} VALUES (index_name, model, dims) ON CONFLICT DO NOTHING
                    $$"""
            )
        return load

    async def finish(self, conn: asyncpg.Connection, build_indexes: bool) -> None:
        """Put the schema's definition back and build the dropped indexes; build the vector
        indexes asked for meanwhile, or with ``build_indexes=False`` (a schema only compared, then
        dropped) only check them. Raises :class:`DeferredIndexRefused` when an index refuses a row."""
        try:
            async with conn.transaction():
                for table, column in self.uncompressed:
                    await conn.execute(_storage(self.schema, table, column, "EXTENDED"))
                if self.postings:
                    await conn.execute(_postings_triggers(self.schema, "ENABLE"))
                    await conn.execute(_POSTINGS)
                    # The word counts' marks (migration 0017) counted postings not written yet.
                    await conn.execute("SELECT noema_term_marks_rebuilt()")
                if self.scope_marks:
                    await conn.execute(_triggers(self.schema, _SCOPE_TRIGGERS, "ENABLE"))
                    await conn.execute("SELECT noema_scope_marks_rebuilt()")
                for definition in self.indexes:
                    await conn.execute(definition)
                if self.ensure_vector_index is not None:
                    await self._vector_indexes(conn, build_indexes)
        except TRANSIENT:
            raise
        except asyncpg.PostgresError as exc:
            raise DeferredIndexRefused(f"{type(exc).__name__}: {exc}") from exc

    async def _vector_indexes(self, conn: asyncpg.Connection, build: bool) -> None:
        assert self.ensure_vector_index is not None
        wanted = await conn.fetch(f"SELECT index_name, model, dims FROM {_VECTOR_INDEXES} ORDER BY 1")
        await conn.execute(self.ensure_vector_index)
        await conn.execute(f"DROP TABLE {_VECTOR_INDEXES}")
        if not build and wanted:
            # An empty table of the same name shadows the real one in the function (the temporary
            # schema comes first on every search path): its index is made at once, or refused as
            # the real one would be; then its expression is evaluated on every row it would hold.
            await conn.execute(
                f'CREATE TEMP TABLE memory_embeddings (LIKE "{self.schema}".memory_embeddings)'
            )
        for row in wanted:
            await conn.execute(
                "SELECT noema_ensure_vector_index($1, $2, $3)", row["index_name"], row["model"], row["dims"]
            )
        if not build and wanted:
            for probe in await conn.fetch(_STAND_IN_INDEXES):
                await conn.fetchval(
                    f'SELECT count(({probe["expr"]})) FROM "{self.schema}".memory_embeddings '
                    f"WHERE {probe['pred'] or 'true'}"
                )
            await conn.execute("DROP TABLE pg_temp.memory_embeddings")


_POSTINGS_TRIGGERS = ("memory_postings_insert", "memory_postings_delete", "memory_postings_update")
"""The triggers that keep ``memory_postings`` (migration 0009); its TRUNCATE trigger stays on."""

_SCOPE_TRIGGERS = ("memory_scope_insert", "memory_scope_delete", "memory_scope_update")
"""The triggers that keep ``memory_scope_marks`` (migration 0018); its TRUNCATE trigger stays on."""

_POSTINGS = """
    INSERT INTO memory_postings (lexeme, workspace, memory_id, tf, dl, origin_seq)
    SELECT p.lexeme, m.workspace, m.id, p.tf, p.dl, m.origin_seq
    FROM memories m, noema_postings_of(m.search) p
    ORDER BY 1, 2, 3
"""
"""Every memory's postings, as the triggers write them (migration 0009's own backfill, with the
memory's creation sequence of migration 0016)."""

_COMPRESSED_UNINDEXED = """
    SELECT c.relname, a.attname FROM pg_attribute a
    JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = $1 AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped AND a.attstorage = 'x'
      AND NOT EXISTS (SELECT 1 FROM pg_depend d
                      WHERE d.classid = 'pg_class'::regclass AND d.refobjid = c.oid
                        AND d.refobjsubid = a.attnum
                        AND d.objid IN (SELECT indexrelid FROM pg_index WHERE indrelid = c.oid))
"""
"""Compressible columns no index reads (an index entry's size, and so whether it fits, can depend
on its column's compression)."""

_ENFORCING_NOTHING = """
    SELECT c.relname, pg_get_indexdef(i.indexrelid) AS definition
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = $1 AND NOT i.indisunique AND NOT i.indisprimary AND i.indpred IS NULL
      AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)
"""

_STAND_IN_INDEXES = """
    SELECT pg_get_expr(i.indexprs, i.indrelid) AS expr, pg_get_expr(i.indpred, i.indrelid) AS pred
    FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
    WHERE c.relnamespace = pg_my_temp_schema() AND c.relname = 'memory_embeddings' AND i.indexprs IS NOT NULL
"""


def _postings_triggers(schema: str, switch: str) -> str:
    return _triggers(schema, _POSTINGS_TRIGGERS, switch)


def _triggers(schema: str, triggers: tuple[str, ...], switch: str) -> str:
    return f'ALTER TABLE "{schema}".memories ' + ", ".join(f"{switch} TRIGGER {t}" for t in triggers)


def _storage(schema: str, table: str, column: str, storage: str) -> str:
    return f'ALTER TABLE "{schema}"."{table}" ALTER COLUMN "{column}" SET STORAGE {storage}'


async def _referencing_first(conn: asyncpg.Connection, schema: str) -> list[str]:
    """The schema's tables, each after every table whose foreign keys reference it (a logged table
    may not reference an unlogged one, so the referencing tables are made unlogged first)."""
    tables = [
        r["relname"]
        for r in await conn.fetch(
            """SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = $1 AND c.relkind = 'r' AND c.relpersistence = 'p' ORDER BY 1""",
            schema,
        )
    ]
    references = {
        (r["referencing"], r["referenced"])
        for r in await conn.fetch(
            """SELECT a.relname AS referencing, b.relname AS referenced FROM pg_constraint k
               JOIN pg_class a ON a.oid = k.conrelid JOIN pg_class b ON b.oid = k.confrelid
               JOIN pg_namespace n ON n.oid = a.relnamespace
               WHERE n.nspname = $1 AND k.contype = 'f' AND k.conrelid <> k.confrelid""",
            schema,
        )
    }
    ordered: list[str] = []
    while len(ordered) < len(tables):
        ready = [
            table
            for table in tables
            if table not in ordered
            and all(referencing in ordered for referencing, referenced in references if referenced == table)
        ]
        if not ready:
            raise RuntimeError(f"the foreign keys of {schema} form a cycle: {sorted(references)}")
        ordered += ready
    return ordered
