"""The memory-operation port in memory (:class:`noema.ports.MemoryRecords`), over the same
:class:`~.projection.Tables` as :class:`~.readmodel.InMemoryKnowledge`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from noema.adapters.memory.projection import Tables
from noema.domain.dynamics import current_activation
from noema.ids import id_prefix
from noema.ports import Fading, Row

__all__ = ["InMemoryRecords", "matching_ids"]


def matching_ids(ids: Sequence[str], given: str) -> list[str]:
    """``given`` when it is one of ``ids``, else the ids (sorted, at most 2) it is a prefix of, as
    :func:`noema.adapters.postgres.queries.resolve_id` matches them."""
    if given in ids:
        return [given]
    pattern = id_prefix(given)
    if pattern is None:
        return []
    start = pattern[:-1]  # a LIKE 'prefix%' pattern
    return sorted(i for i in ids if i.startswith(start))[:2]


class InMemoryRecords:
    """Single memories, their scope and edges, held in memory."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables

    async def resolve(self, id_or_prefix: str, workspace: str | None = None) -> str | None:
        """The full id a memory id or unique prefix names (``LookupError`` when several)."""
        ids = [
            m["id"] for m in self.tables.memories.values() if workspace is None or m["workspace"] == workspace
        ]
        found = matching_ids(ids, id_or_prefix)
        if len(found) > 1:
            raise LookupError(f"{id_or_prefix} matches several memories; give more of the id")
        return found[0] if found else None

    async def memory(self, memory_id: str) -> Row | None:
        """Every column of one memory."""
        m = self.tables.memories.get(memory_id)
        return None if m is None else dict(m)

    async def scopes(self, ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """id → (workspace, mind)."""
        found = (self.tables.memories.get(i) for i in ids)
        return {m["id"]: (m["workspace"], m["mind"]) for m in found if m is not None}

    async def relationship(self, from_id: str, to_id: str, relation: str) -> str | None:
        """The id of an existing edge."""
        for r in self.tables.relationships.values():
            if (r["from_id"], r["to_id"], r["relation"]) == (from_id, to_id, relation):
                return str(r["id"])
        return None

    async def memory_workspaces(self) -> list[str]:
        """Every workspace that has memories."""
        return sorted({m["workspace"] for m in self.tables.memories.values()})

    async def fading(
        self, workspace: str, since: datetime, until: datetime, threshold: float, limit: int
    ) -> Fading:
        """The memories of ``workspace`` that faded below ``threshold`` or expired in (since, until]."""

        def at(m: Row, when: datetime) -> float:
            return current_activation(
                m["activation"],
                m["activation_at"],
                m["importance"],
                m["half_life_days"],
                m["activation_floor"],
                when,
            )

        active = [
            m
            for m in self.tables.memories.values()
            if m["workspace"] == workspace and m["status"] == "active"
        ]
        faded = sorted(
            m["id"] for m in active if at(m, until) < threshold <= at(m, max(since, m["activation_at"]))
        )
        expired = sorted(
            m["id"] for m in active if m["valid_until"] is not None and since < m["valid_until"] <= until
        )
        return Fading(faded[:limit], len(faded), expired[:limit], len(expired))

    def _unembedded(self, model: str) -> list[Row]:
        rows = [m for m in self.tables.memories.values() if (m["id"], model) not in self.tables.embeddings]
        return sorted(rows, key=lambda m: m["id"])

    async def count_unembedded(self, model: str) -> int:
        """How many memories have no vector for ``model``."""
        return len(self._unembedded(model))

    async def unembedded(self, model: str, after: str, limit: int) -> list[Row]:
        """The next memories by id after ``after`` without a vector for ``model``."""
        keys = ("id", "workspace", "mind", "content", "participants", "happened_at", "origin_event")
        rows = [m for m in self._unembedded(model) if m["id"] > after][:limit]
        return [{k: m[k] for k in keys} for m in rows]

    def _table(self, table: Literal["memories", "policies"]) -> dict[str, Row]:
        return self.tables.memories if table == "memories" else self.tables.policies

    async def workspace_of(self, table: Literal["memories", "policies"], memory_id: str) -> str | None:
        """The workspace of the row with this exact id."""
        row = self._table(table).get(memory_id)
        return None if row is None else str(row["workspace"])

    async def workspaces_of(self, table: Literal["memories", "policies"], given: str) -> list[str]:
        """The workspaces (at most 2) holding an id equal to ``given`` or starting with its prefix."""
        pattern = id_prefix(given)
        start = pattern[:-1] if pattern else None
        rows = self._table(table).values()
        found = {r["workspace"] for r in rows if r["id"] == given or (start and r["id"].startswith(start))}
        return sorted(found)[:2]
