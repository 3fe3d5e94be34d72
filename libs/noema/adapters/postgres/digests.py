"""Digests of a read model: equal for equal rows, and when they differ, which rows do.

A row's digest is the md5 of the row as PostgreSQL writes it as text, each JSON value written as
its hash (``jsonb_hash_extended``, equal for equal values: writing the events' payloads out as text
would cost more than the rest of the digest) and each vector as the md5 of its binary form (equal
for equal vectors: writing 384 floats out as decimals was most of the vectors' digest). A table's
digest is its row count and the sums of the two halves of its rows' digests: order-independent, so
no sort, and no one string of the whole table (which a large ``events`` table would push past
PostgreSQL's 1 GB value limit). Tables are compared by digest; only those whose digests differ are
read row by row, by primary key.

The sums are taken per workspace (a vector's workspace is its memory's) and added up: a table's
digest is the sum of its workspaces' digests, exactly, and so is a partition's
(:func:`noema.application.partition_digests.by_partition`), at the cost of one grouping.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any, NamedTuple

import asyncpg

__all__ = [
    "EMPTY",
    "Digest",
    "checksum",
    "combined",
    "key_columns",
    "row_digests",
    "rows_by_key",
    "snapshot",
    "summed",
    "table_digests",
    "totals",
    "workspace_digests",
]

_WORKSPACE_DIGESTS = """
    SELECT ws, count(*) AS n,
           sum(('x' || substr(h, 1, 16))::bit(64)::bigint::numeric) AS a,
           sum(('x' || substr(h, 17, 16))::bit(64)::bigint::numeric) AS b
    FROM (SELECT coalesce({workspace}, '') AS ws, {row} AS h FROM {table} t {join}) rows
    GROUP BY ws
"""

_WORKSPACE_OF: dict[str, tuple[str, str]] = {
    "memory_embeddings": ("m.workspace", "LEFT JOIN memories m ON m.id = t.memory_id"),
    "memory_embeddings_history": ("m.workspace", "LEFT JOIN memories m ON m.id = t.memory_id"),
}
"""How a row's workspace is found in a table without a ``workspace`` column: (expression, join)."""


class Digest(NamedTuple):
    """The digest of a set of rows: their count and the sums of the two halves of their md5s."""

    n: int
    a: int
    b: int

    def plus(self, other: Digest) -> Digest:
        """The digest of both sets of rows (disjoint)."""
        return Digest(self.n + other.n, self.a + other.a, self.b + other.b)

    def __str__(self) -> str:
        return f"{self.n}:{self.a}:{self.b}"


EMPTY = Digest(0, 0, 0)


async def _row_digest(conn: asyncpg.Connection, table: str) -> str:
    """The SQL expression of a row's digest in ``table`` (aliased ``t``)."""
    columns = await conn.fetch(
        """SELECT a.attname, y.typname, n.nspname FROM pg_attribute a
           JOIN pg_type y ON y.oid = a.atttypid JOIN pg_namespace n ON n.oid = y.typnamespace
           WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum""",
        table,
    )
    return (
        f"md5(ROW({', '.join(_digested(c['attname'], c['typname'], c['nspname']) for c in columns)})::text)"
    )


def _digested(column: str, type_name: str, type_schema: str) -> str:
    """How a column enters a row's digest: a value whose text form is costly to write, by a hash."""
    value = f't."{column}"'
    if type_name == "jsonb":
        return f"jsonb_hash_extended({value}, 0)"
    if type_name == "vector":  # pgvector's, wherever its extension lives
        return f'md5("{type_schema}".vector_send({value}))'
    if type_name in ("_float4", "_float8"):
        return f"md5(array_send({value}))"
    return value


async def workspace_digests(conn: asyncpg.Connection, tables: Sequence[str]) -> dict[str, dict[str, Digest]]:
    """Table → workspace → digest of that workspace's rows (see the module docstring)."""
    out = {}
    async with conn.transaction():
        # A digest reads every row once and sums: the planner's costs would keep all but the largest
        # tables to one process, where parallel workers share the reading.
        for setting in ("parallel_setup_cost", "parallel_tuple_cost", "min_parallel_table_scan_size"):
            await conn.execute(f"SET LOCAL {setting} = 0")
        for table in tables:
            workspace, join = _WORKSPACE_OF.get(table, ("t.workspace", ""))
            row = await _row_digest(conn, table)
            query = _WORKSPACE_DIGESTS.format(table=table, row=row, workspace=workspace, join=join)
            out[table] = {r["ws"]: Digest(r["n"], int(r["a"]), int(r["b"])) for r in await conn.fetch(query)}
    return out


def summed(digests: Iterable[Digest]) -> Digest:
    """The digest of the union of disjoint sets of rows."""
    total = EMPTY
    for digest in digests:
        total = total.plus(digest)
    return total


def totals(by_workspace: dict[str, dict[str, Digest]]) -> dict[str, str]:
    """Table → digest of all its rows, from its workspaces' (:func:`workspace_digests`)."""
    return {table: str(summed(workspaces.values())) for table, workspaces in by_workspace.items()}


async def table_digests(conn: asyncpg.Connection, tables: Sequence[str]) -> dict[str, str]:
    """Table → digest of its rows (see the module docstring)."""
    return totals(await workspace_digests(conn, tables))


def combined(digests: dict[str, str]) -> str:
    """One checksum of every table's digest, in the order given."""
    digest = hashlib.sha256()
    for table, value in digests.items():
        digest.update(f"{table}:{value}\n".encode())
    return digest.hexdigest()


async def checksum(conn: asyncpg.Connection, tables: Sequence[str]) -> str:
    """A digest of every row of ``tables`` (order-independent), equal for equal read models."""
    return combined(await table_digests(conn, tables))


async def key_columns(conn: asyncpg.Connection, table: str) -> list[str]:
    """The primary key's columns of ``table`` (resolved on the search path), in key order."""
    rows = await conn.fetch(
        """SELECT a.attname FROM pg_index i
           JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
           WHERE i.indrelid = $1::regclass AND i.indisprimary
           ORDER BY array_position(i.indkey::int2[], a.attnum)""",
        table,
    )
    return [r["attname"] for r in rows]


async def row_digests(conn: asyncpg.Connection, table: str) -> dict[tuple[str, ...], str]:
    """Primary key (as text) → md5 of the row, for every row of ``table``."""
    keys = await key_columns(conn, table)
    key = ", ".join(f"{column}::text" for column in keys)
    digest = await _row_digest(conn, table)
    rows = await conn.fetch(f"SELECT ARRAY[{key}] AS key, {digest} AS h FROM {table} t")
    return {tuple(r["key"]): r["h"] for r in rows}


async def rows_by_key(
    conn: asyncpg.Connection, table: str, keys: Sequence[tuple[str, ...]]
) -> dict[tuple[str, ...], dict[str, Any]]:
    """The rows of ``table`` with these primary keys (as text), each as a column → JSON value map."""
    columns = await key_columns(conn, table)
    key = ", ".join(f"{column}::text" for column in columns)
    rows = await conn.fetch(
        f"""SELECT ARRAY[{key}] AS key, to_jsonb(t)::text AS row FROM {table} t
            WHERE to_jsonb(ARRAY[{key}]) = ANY ($1::jsonb[])""",
        [json.dumps(list(k)) for k in keys],
    )
    return {tuple(r["key"]): json.loads(r["row"]) for r in rows}


@asynccontextmanager
async def snapshot(conn: asyncpg.Connection) -> AsyncIterator[None]:
    """Every read inside sees the database as of the first one (a read-only, repeatable-read
    transaction): the projector commits its rows and its position together, so a position read
    inside matches the rows read inside, however far the projector goes meanwhile."""
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        yield
