"""Selective full-text queries: the query's words as lexemes, without the ones most memories share.

An any-term query over a large store is slow when it contains a word that many memories contain
(PostgreSQL ranks every match). PostgreSQL's own statistics (``pg_stats.most_common_elems`` of the
tsvector, refreshed by ANALYZE/autovacuum) say which lexemes are that common; they are dropped from
the query (the rarest is kept if every word is common). "Common" means in more than a fifth of the
memories, or in more than 500 of them. This bounds the cost; it is not free: in a large store a word
in 500 memories still has a real BM25 weight (about 5.3 of 100,000 memories, against about 11 for a
unique word), which the text voice then gives up (see docs/recall.md, "Common words").

Words are matched both stemmed (``english``, for the content) and as written (``simple``, for the
participants' names, which are indexed unstemmed).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import asyncpg

__all__ = ["BROAD_CANDIDATES", "COMMON_FREQUENCY", "COMMON_ROWS", "TermStats", "TextQuery", "selective_query"]

BROAD_CANDIDATES = 2000
"""A query of common words only ranks this many of its newest matches instead of all of them."""

COMMON_FREQUENCY = 0.2
"""A lexeme in more than this share of memories is left out of any-term queries (it weighs little)."""
COMMON_ROWS = 500
"""…and so is one in more than this many memories (scoring all its matches would cost too much), though
in a large store such a word still weighs in BM25."""


class TermStats:
    """Frequencies of the most common lexemes of ``memories.search`` and the size of each scope (for
    BM25), cached for ``ttl`` seconds."""

    def __init__(self, ttl: float = 300.0, schema: str | None = None) -> None:
        self._ttl = ttl
        self._schema = schema
        """The schema every connection given uses (None: asked of each connection)."""
        self._cache: dict[str, tuple[float, dict[str, float]]] = {}
        self._scopes: dict[str, tuple[float, tuple[float, float]]] = {}

    async def _schema_of(self, conn: asyncpg.Connection) -> str:
        return self._schema or str(await conn.fetchval("SELECT current_schema()"))

    async def common(self, conn: asyncpg.Connection) -> dict[str, float]:
        """Lexeme → share of memories containing it, for the lexemes too common to query by."""
        schema = await self._schema_of(conn)
        hit = self._cache.get(schema)
        if hit is not None and time.monotonic() - hit[0] < self._ttl:
            return hit[1]
        # pg_stats hides them from a role under row security; the function reads them with the
        # owner's rights (migration 0006).
        row = await conn.fetchrow("SELECT elems, freqs, rows FROM noema_search_stats()")
        freqs: dict[str, float] = {}
        if row is not None and row["elems"]:
            rows = max(1.0, float(row["rows"] or 1.0))
            # freqs carries three extra summary values at its end; zip stops at the lexemes.
            freqs = {
                lx: f
                for lx, f in zip(row["elems"], row["freqs"], strict=False)
                if f > COMMON_FREQUENCY or f * rows > COMMON_ROWS
            }
        self._cache[schema] = (time.monotonic(), freqs)
        return freqs

    async def scope(self, conn: asyncpg.Connection, workspace: str | None) -> tuple[float, float]:
        """(memories, average distinct lexemes per memory) of a workspace (or all), for BM25."""
        schema = await self._schema_of(conn)
        key = f"{schema}/{workspace or '*'}"
        hit = self._scopes.get(key)
        if hit is not None and time.monotonic() - hit[0] < self._ttl:
            return hit[1]
        row = await conn.fetchrow(
            "SELECT count(*) AS n, coalesce(avg(length(search)), 1) AS avgdl FROM memories "
            "WHERE $1::text IS NULL OR workspace = $1",
            workspace,
        )
        value = (max(1.0, float(row["n"])), max(1.0, float(row["avgdl"])))
        self._scopes[key] = (time.monotonic(), value)
        return value


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("'", "''") + "'"


@dataclass(frozen=True)
class TextQuery:
    """A ``to_tsquery('simple', …)`` string, its lexemes, and whether they are common words only."""

    tsquery: str
    broad: bool = False
    lexemes: tuple[str, ...] = ()


async def selective_query(
    conn: asyncpg.Connection, text: str, stats: TermStats | None = None
) -> TextQuery | None:
    """Match any selective word of ``text`` (None when it has no words).

    When every word is common the rarest one is used and the query is marked ``broad``: callers
    then rank only the newest ``BROAD_CANDIDATES`` matches, so the cost stays bounded.
    """
    lexemes: list[str] = await conn.fetchval(
        "SELECT coalesce(array_agg(DISTINCT lexeme ORDER BY lexeme), '{}') "
        "FROM unnest(to_tsvector('english', $1) || to_tsvector('simple', $1))",
        text,
    )
    if not lexemes:
        return None
    common = await (stats or TermStats()).common(conn)
    selective = [lx for lx in lexemes if lx not in common]
    if selective:
        return TextQuery(" | ".join(_quote(lx) for lx in selective), lexemes=tuple(selective))
    rarest = min(lexemes, key=lambda lx: (common.get(lx, 0.0), lx))
    return TextQuery(_quote(rarest), broad=True, lexemes=(rarest,))
