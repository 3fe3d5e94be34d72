"""The audit copy of the stream read by reference, causation, correlation and range, in memory
(:class:`noema.ports.EventReads`), as :class:`noema.adapters.postgres.events.EventQueries` reads the
``events`` table: the same matches, in stream order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import islice

from noema.adapters.memory.projection import Tables
from noema.adapters.memory.records import matching_ids
from noema.adapters.postgres.events import quoted
from noema.adapters.postgres.queries import one_of
from noema.ports import Row, StreamPoint

__all__ = ["InMemoryEvents"]


def _after(point: StreamPoint, e: Row) -> bool:
    return (point.seq is None or e["seq"] > point.seq) and (point.at is None or e["occurred_at"] > point.at)


def _through(point: StreamPoint, e: Row) -> bool:
    return (point.seq is None or e["seq"] <= point.seq) and (point.at is None or e["occurred_at"] <= point.at)


class InMemoryEvents:
    """The :class:`noema.ports.EventReads` half of :class:`~noema.adapters.memory.reads.InMemoryReads`."""

    tables: Tables

    def _oldest_first(self, keep: Callable[[Row], bool], limit: int | None = None) -> list[Row]:
        """The first ``limit`` (all when None) event rows ``keep`` keeps, in stream order."""
        return [dict(e) for e in islice(filter(keep, self.tables.events.values()), limit)]

    async def resolve_reference(self, id_or_prefix: str, workspace: str | None = None) -> str | None:
        """The full id of the memory, policy or event ``id_or_prefix`` names, as PostgreSQL resolves it."""
        t = self.tables
        found: set[str] = set()
        for rows in (t.memories.values(), t.policies.values(), t.events.values()):
            ids = sorted({str(r["id"]) for r in rows if workspace is None or r["workspace"] == workspace})
            matched = matching_ids(ids, id_or_prefix)
            if len(matched) > 1:
                raise LookupError(f"{id_or_prefix} matches several ids; give more of the id")
            found |= set(matched)
        return one_of(found, id_or_prefix)

    async def events_naming(self, workspace: str | None, ref: str, limit: int) -> list[Row]:
        """Events whose id, causation or correlation id is ``ref`` or whose payload holds it."""
        text = quoted(ref)

        def names(e: Row) -> bool:
            return (workspace is None or e["workspace"] == workspace) and (
                ref in (e["id"], e["causation_id"], e["correlation_id"]) or text in e["payload"]
            )

        return self._oldest_first(names, limit)

    async def events_with_ids(self, workspace: str, ids: Sequence[str]) -> list[Row]:
        """The events of ``workspace`` with these ids."""
        wanted = set(ids)
        return self._oldest_first(lambda e: e["workspace"] == workspace and e["id"] in wanted)

    async def correlation_starts(self, workspace: str, ids: Sequence[str]) -> list[Row]:
        """The first event of each of these correlations."""
        firsts: dict[str, Row] = {}
        for e in self.tables.events.values():
            if e["workspace"] == workspace and e["correlation_id"] in ids:
                firsts.setdefault(e["correlation_id"], dict(e))
        return sorted(firsts.values(), key=lambda e: int(e["seq"]))

    async def events_caused_by(self, workspace: str, ids: Sequence[str], limit: int) -> list[Row]:
        """The first ``limit`` events caused by one of ``ids``."""
        causes = set(ids)
        return self._oldest_first(
            lambda e: e["workspace"] == workspace and e["causation_id"] in causes, limit
        )

    async def reference_workspaces(self, ref: str) -> list[str]:
        """The workspaces (at most 2) where ``ref`` is an event's, memory's or policy's reference."""
        found = {
            e["workspace"]
            for e in self.tables.events.values()
            if ref in (e["id"], e["causation_id"], e["correlation_id"])
        }
        found |= {
            row["workspace"] for row in (self.tables.memories.get(ref), self.tables.policies.get(ref)) if row
        }
        return sorted(found)[:2]

    async def events_between(
        self,
        workspace: str | None,
        types: Sequence[str],
        after: StreamPoint,
        through: StreamPoint,
        limit: int,
    ) -> list[Row]:
        """The first ``limit`` events of ``types`` after ``after`` and at or before ``through``."""

        def between(e: Row) -> bool:
            in_scope = workspace is None or e["workspace"] == workspace
            return in_scope and e["type"] in types and _after(after, e) and _through(through, e)

        return self._oldest_first(between, limit)
