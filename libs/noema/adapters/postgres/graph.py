"""A memory's neighbourhood in the relationship graph, in one answer (the explorer's graph view)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

__all__ = ["MAX_NODES", "neighbourhood"]

MAX_NODES = 40
"""Enough for a readable drawing; a hub's neighbourhood is cut there (nearest and oldest first)."""

_EDGES = """SELECT r.id, r.relation, r.from_id, r.to_id, r.confidence, r.source, r.created_at
            FROM relationships r
            WHERE r.from_id = ANY($1::text[]) OR r.to_id = ANY($1::text[])
            ORDER BY r.created_at, r.id"""


async def neighbourhood(pool: asyncpg.Pool, root: str, max_nodes: int = MAX_NODES) -> dict[str, Any]:
    """The memories within two relationship hops of ``root`` (a full id) and the edges between them.

    Nodes carry their ``depth`` (0 for the root, 1, 2); at most ``max_nodes`` of them, the nearer
    hop and the older edge first, as a breadth-first walk finds them. Every edge returned joins two
    returned nodes; ``truncated`` says whether the limit left memories out. Row-level security
    keeps the walk inside the caller's workspace (relationships never cross one).
    """
    depth: dict[str, int] = {root: 0}
    edges: dict[str, dict[str, Any]] = {}
    frontier: Sequence[str] = [root]
    truncated = False
    for hop in (1, 2):
        found: list[str] = []
        for row in await pool.fetch(_EDGES, list(frontier)):
            edges[row["id"]] = dict(row)
            for end in (row["from_id"], row["to_id"]):
                if end in depth:
                    continue
                if len(depth) >= max_nodes:
                    truncated = True
                    continue
                depth[end] = hop
                found.append(end)
        frontier = found
        if not frontier:
            break
    rows = await pool.fetch(
        "SELECT id, content, status, kind, epistemic_kind FROM memories WHERE id = ANY($1::text[])",
        list(depth),
    )
    nodes = sorted(({**dict(r), "depth": depth[r["id"]]} for r in rows), key=lambda n: (n["depth"], n["id"]))
    present = {n["id"] for n in nodes}
    return {
        "root": root,
        "nodes": nodes,
        "edges": [e for e in edges.values() if e["from_id"] in present and e["to_id"] in present],
        "truncated": truncated,
    }
