"""The recall voices in memory (:class:`noema.ports.RecallVoices`) over the in-memory read model's
tables: a word-match text voice and a recency voice (no vectors, no relationship walk), enough for
the pipeline and the surfaces to recall in the fast tier; ranking and fusion are the domain's, as
over PostgreSQL (:class:`noema.adapters.postgres.voices.RecallStore`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from noema.adapters.memory.projection import Tables
from noema.adapters.memory.readmodel import terms
from noema.adapters.memory.reads import admits
from noema.domain.dynamics import current_activation
from noema.domain.ranking import Candidate
from noema.ports import RESULT_FIELDS, RecallFilters, Row

__all__ = ["InMemoryVoices"]


class InMemoryVoices:
    """Recall voices over ``tables`` (``clock``: the time filters are read at, for expiry)."""

    has_vectors = False

    def __init__(self, tables: Tables, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.tables = tables
        self._clock = clock

    def _admitted(self, f: RecallFilters) -> list[Row]:
        now = self._clock()
        return [m for m in self.tables.memories.values() if admits(f, m, now)]

    async def lexical(
        self,
        query: str,
        f: RecallFilters,
        limit: int,
        strict: bool = False,
        broad: bool = True,
        max_terms: int | None = None,
    ) -> list[tuple[str, float]]:
        """Memories sharing words with ``query``, scored by the share of its words they have."""
        wanted = terms(query)
        if not wanted:
            return []
        scored = []
        for m in self._admitted(f):
            shared = len(wanted & terms(m["content"]))
            if shared and (not strict or shared == len(wanted)):
                scored.append((m["id"], shared / len(wanted)))
        return sorted(scored, key=lambda s: (-s[1], s[0]))[:limit]

    async def semantic(
        self, vector: Sequence[float], model: str, f: RecallFilters, limit: int
    ) -> list[tuple[str, float]]:
        return []  # no vectors compared in memory (has_vectors is False)

    async def recent(self, f: RecallFilters, limit: int) -> list[tuple[str, float]]:
        def when(m: Row) -> datetime:
            value: datetime = m["happened_at"] or m["created_at"]
            return value

        newest = sorted(self._admitted(f), key=lambda m: (when(m), m["id"]), reverse=True)[:limit]
        return [(m["id"], when(m).timestamp()) for m in newest]

    async def graph(
        self, seeds: Mapping[str, float], f: RecallFilters, limit: int, model: str | None, now: datetime
    ) -> tuple[list[tuple[str, float]], dict[str, Candidate]]:
        return [], {}  # no relationship walk in memory

    def _activation(self, m: Row, now: datetime) -> float:
        return float(
            current_activation(
                m["activation"],
                m["activation_at"],
                m["importance"],
                m["half_life_days"],
                m["activation_floor"],
                now,
            )
        )

    async def candidates(self, ids: Sequence[str], model: str | None, now: datetime) -> dict[str, Candidate]:
        out = {}
        for memory_id in ids:
            m = self.tables.memories.get(memory_id)
            if m is not None:
                out[memory_id] = Candidate(
                    id=m["id"],
                    content=m["content"],
                    memory_type=m["memory_type"],
                    activation=self._activation(m, now),
                    importance=m["importance"],
                    credibility=m["credibility"],
                    created_at=m["created_at"],
                    repo=m["repo"],
                    happened_at=m["happened_at"],
                    participants=tuple(m["participants"] or ()),
                )
        return out

    async def details(self, ids: Sequence[str], now: datetime) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for memory_id in ids:
            m = self.tables.memories.get(memory_id)
            if m is not None:
                # Erasure is PostgreSQL's alone (its keyring): a memory held here is never erased.
                known = {"activation": self._activation(m, now), "erased_at": None}
                out[memory_id] = {k: known[k] if k in known else m.get(k) for k in RESULT_FIELDS}
        return out
