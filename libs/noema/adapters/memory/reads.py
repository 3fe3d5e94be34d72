"""The operators' reads in memory (:class:`noema.ports.MemoryReads`): listings, the timeline, one
memory's detail with its provenance, and the audit log and its questions, answered from
:class:`~.projection.Tables` as :class:`noema.adapters.postgres.queries.MemoryQueries` answers them
from the tables: the same filters (:func:`admits` holds a memory to every condition of
:meth:`~noema.adapters.postgres.voices.RecallFilters.where`), the same orders, the same columns."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from itertools import islice
from typing import Any

from noema.adapters.memory.events import InMemoryEvents
from noema.adapters.memory.projection import Tables
from noema.adapters.memory.records import InMemoryRecords
from noema.adapters.postgres.queries import MEMORY_FIELDS
from noema.domain.dynamics import current_activation
from noema.ports import MemoryOrder, RecallFilters, Row

__all__ = ["MEMORY_KEYS", "InMemoryReads", "admits"]

MEMORY_KEYS = tuple(MEMORY_FIELDS.split(", "))
"""The columns of a memory row, as the PostgreSQL adapter selects them."""


def _row(m: Row, now: datetime) -> Row:
    """A memory row as reads answer it: its activation at ``now`` (``noema_activation``)."""
    # Erasure is PostgreSQL's alone (its keyring): a memory held here is never erased.
    row = {k: m.get(k) if k == "erased_at" else m[k] for k in MEMORY_KEYS}
    row["activation"] = current_activation(
        m["activation"], m["activation_at"], m["importance"], m["half_life_days"], m["activation_floor"], now
    )
    return row


def _when(m: Row) -> datetime:
    """When it happened, else when it was recorded (``coalesce(happened_at, created_at)``)."""
    when: datetime = m["happened_at"] or m["created_at"]
    return when


def admits(f: RecallFilters, m: Row, now: datetime) -> bool:
    """Whether the memory row ``m`` meets every condition of ``f`` (``now`` for expiry)."""
    domain = m["domain"]
    conditions = (
        f.workspace is None or m["workspace"] == f.workspace,
        f.mind is None or m["mind"] == f.mind,
        not f.kinds or m["kind"] in f.kinds,
        not f.epistemic_kinds or m["epistemic_kind"] in f.epistemic_kinds,
        not f.domains or domain in f.domains,
        domain is None or domain not in f.hidden_domains,
        f.readable_domains is None or domain is None or domain in f.readable_domains,
        m["id"] not in f.exclude_ids,
        not f.statuses or m["status"] in f.statuses,
        f.since is None or _when(m) >= f.since,
        f.until is None or _when(m) < f.until,
        f.include_expired or m["valid_until"] is None or m["valid_until"] > now,
    )
    return all(conditions)


_ORDER: dict[MemoryOrder, tuple[Callable[[Row], tuple[Any, ...]], bool]] = {
    "newest": (lambda m: (m["created_at"], m["origin_seq"]), True),
    "happened_asc": (lambda m: (_when(m), m["origin_seq"]), False),
    "happened_desc": (lambda m: (_when(m), m["origin_seq"]), True),
}
"""Each order's sort key, and whether it is descending."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


class InMemoryReads(InMemoryRecords, InMemoryEvents):
    """The operators' reads held in memory, over the tables of the memory records (the event reads
    of ``why`` and ``audit diff`` are :class:`~noema.adapters.memory.events.InMemoryEvents`').

    ``clock`` stands for PostgreSQL's ``now()``: what "expired" is judged against when a filter
    leaves expired memories out, and the time activations are read at.
    """

    def __init__(self, tables: Tables, clock: Callable[[], datetime] = _utcnow) -> None:
        super().__init__(tables)
        self._clock = clock

    def as_of(self, seq: int, clock: Callable[[], datetime] | None = None) -> InMemoryReads:
        """The same reads as of stream sequence ``seq`` (``clock``: that moment's, by default this one's)."""
        return InMemoryReads(self.tables.as_of(seq), clock or self._clock)

    async def get(self, full_id: str) -> Row | None:
        """One memory by its full id with its origin event, relationships and vectors."""
        m = self.tables.memories.get(full_id)
        if m is None:
            return None
        origin = self.tables.events.get(m["origin_seq"])
        return {
            **_row(m, self._clock()),
            "origin": None if origin is None else dict(origin),
            "relationships": self._relationships(full_id),
            "embeddings": [
                dict(e) for (mid, _), e in sorted(self.tables.embeddings.items()) if mid == full_id
            ],
        }

    def _relationships(self, memory_id: str) -> list[Row]:
        """The memory's edges either way, with the other end's content, by created_at and id."""
        out = []
        for r in self.tables.relationships.values():
            if memory_id not in (r["from_id"], r["to_id"]):
                continue
            outgoing = r["from_id"] == memory_id
            other = self.tables.memories[r["to_id"] if outgoing else r["from_id"]]
            out.append({**r, "direction": "out" if outgoing else "in", "other_content": other["content"]})
        return sorted(out, key=lambda r: (r["created_at"], r["id"]))

    async def page(self, filters: RecallFilters, order: MemoryOrder, limit: int, offset: int) -> list[Row]:
        """Memory rows matching ``filters`` in ``order``, one page."""
        now = self._clock()
        key, descending = _ORDER[order]
        rows = [m for m in self.tables.memories.values() if admits(filters, m, now)]
        rows.sort(key=key, reverse=descending)
        return [_row(m, now) for m in rows[offset : offset + limit]]

    async def workspace_exists(self, workspace: str) -> bool:
        """Whether any event names ``workspace``."""
        return any(e["workspace"] == workspace for e in self.tables.events.values())

    def _newest_first(self, keep: Callable[[Row], bool], limit: int) -> list[Row]:
        """The first ``limit`` event rows ``keep`` keeps, newest first."""
        return [dict(e) for e in islice(filter(keep, reversed(self.tables.events.values())), limit)]

    async def citing_events(self, memory_id: str, workspace: str, limit: int) -> list[Row]:
        """Events of ``workspace`` whose payload names the memory (its quoted id), newest first."""
        quoted = f'"{memory_id}"'
        return self._newest_first(lambda e: e["workspace"] == workspace and quoted in e["payload"], limit)

    async def audit(
        self,
        workspace: str | None,
        types: list[str] | None,
        actor: str | None,
        before: int | None,
        limit: int,
    ) -> list[Row]:
        """Events matching the filters, newest first, before seq ``before``."""

        def keep(e: Row) -> bool:
            return (
                (workspace is None or e["workspace"] == workspace)
                and (types is None or e["type"] in types)
                and (actor is None or e["actor"] == actor)
                and (before is None or e["seq"] < before)
            )

        return self._newest_first(keep, limit)
