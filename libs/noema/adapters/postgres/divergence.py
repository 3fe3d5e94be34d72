"""Which rows two read models disagree on: what a failed replay comparison reports.

Each table whose digests differ is read on both sides by primary key (a digest per row); a row is
missing on one side, or present on both with different values, and then the columns that differ
are named with both values. Both sides are also digested per partition (the rows of the workspaces
in each, :func:`by_partition`), so a divergence is placed in the partitions it is in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg

from noema.adapters.postgres.digests import Digest, combined, key_columns, row_digests, rows_by_key, summed
from noema.topology import partition_of

__all__ = ["LIMIT", "by_partition", "compare_digests", "divergent_rows", "partitions_compared"]

LIMIT = 20
"""Rows described in full; the count per table covers all of them."""


def compare_digests(
    live: dict[tuple[str, ...], str], replayed: dict[tuple[str, ...], str]
) -> list[tuple[tuple[str, ...], str]]:
    """(key, where) of every row the two sides disagree on, by key: ``live only``, ``replay only``
    or ``both`` (present on both sides with different values)."""
    out = []
    for key in sorted(live.keys() | replayed.keys()):
        if key not in replayed:
            out.append((key, "live only"))
        elif key not in live:
            out.append((key, "replay only"))
        elif live[key] != replayed[key]:
            out.append((key, "both"))
    return out


def by_partition(tables: Mapping[str, Mapping[str, Digest]], partitions: int) -> dict[int, str]:
    """Partition → checksum of its rows: for each of ``tables`` (table → workspace → digest), the
    digest of the rows of the workspaces in that partition (:func:`partition_of`, where the
    observation stream puts them), combined over the tables like the whole read model's checksum.
    Every partition has one, empty or not."""
    rows: dict[int, dict[str, list[Digest]]] = {p: {table: [] for table in tables} for p in range(partitions)}
    for table, workspaces in tables.items():
        for workspace, digest in workspaces.items():
            rows[partition_of(workspace, partitions)][table].append(digest)
    return {
        p: combined({table: str(summed(digests)) for table, digests in by_table.items()})
        for p, by_table in rows.items()
    }


def partitions_compared(live: Mapping[int, str], replayed: Mapping[int, str]) -> list[dict[str, Any]]:
    """A line per partition: its replayed and live checksums and whether they match."""
    out = []
    for p in sorted(live):
        mine = replayed.get(p)
        out.append({"partition": p, "checksum": mine, "live_checksum": live[p], "match": live[p] == mine})
    return out


async def divergent_rows(
    live: asyncpg.Connection, replayed: asyncpg.Connection, tables: Sequence[str], limit: int = LIMIT
) -> dict[str, Any]:
    """The rows of ``tables`` that differ between the two read models: ``count`` per table, and
    the first ``limit`` described in ``rows`` (table, primary key, where the row is, and for a row
    on both sides each differing column with its live and replayed value)."""
    found: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    for table in tables:
        differing = compare_digests(await row_digests(live, table), await row_digests(replayed, table))
        counts[table] = len(differing)
        shown = differing[: max(0, limit - len(found))]
        both = [key for key, where in shown if where == "both"]
        live_rows = await rows_by_key(live, table, both) if both else {}
        replayed_rows = await rows_by_key(replayed, table, both) if both else {}
        columns = await key_columns(live, table)
        for key, where in shown:
            entry: dict[str, Any] = {"table": table, "key": dict(zip(columns, key, strict=True)), "in": where}
            if where == "both":
                before, after = live_rows.get(key, {}), replayed_rows.get(key, {})
                entry["columns"] = {
                    name: {"live": before.get(name), "replay": after.get(name)}
                    for name in sorted(before.keys() | after.keys())
                    if before.get(name) != after.get(name)
                }
            found.append(entry)
    return {"count": counts, "rows": found}
