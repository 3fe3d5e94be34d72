"""Selective full-text queries: the query's words as lexemes, without the ones most memories share.

An any-term query over a large store is slow when it contains a word that many memories contain
(PostgreSQL ranks every match). How many memories of the workspace contain each lexeme is kept exact
in ``memory_terms`` (maintained by triggers on ``memories``, migration 0007); the query's lexemes
found in more than ``COMMON_ROWS`` (500) of the workspace's memories are dropped from the query (the
rarest is kept if every word found is that common). This bounds the cost; it is not free: in a
large store a word in 500 memories still has a real BM25 weight (about 5.3 of 100,000 memories,
against about 11 for a unique word), which the text voice then gives up (see docs/recall.md,
"Common words").

Every count is taken within the workspace searched (all workspaces only for an operator's search of
all), so what other tenants store never changes which words a workspace matches on. There is no
"share of the workspace" rule beside the count: it only ever bound below 2,500 memories (a fifth of
them is then under 500), where scoring every match costs nothing, and per workspace it would drop the
very words a small workspace is about.

Words are matched both stemmed (``english``, for the content) and as written (``simple``, for the
participants' names, which are indexed unstemmed).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping

import asyncpg

from noema.records import dataclass

__all__ = [
    "BROAD_CANDIDATES",
    "COMMON_ROWS",
    "SCOPE_SQL",
    "TermStats",
    "TextQuery",
    "query_of_counts",
    "quoted_lexeme",
    "selective_query",
    "term_counts",
    "text_query",
]

BROAD_CANDIDATES = 2000
"""A query of common words only ranks this many of its newest matches instead of all of them."""

COMMON_ROWS = 500
"""A lexeme in more than this many of the workspace's memories is left out of any-term queries
(scoring all its matches would cost too much), though in a large store such a word still weighs in
BM25."""


SCOPE_SQL = (
    "SELECT count(*) AS n, coalesce(avg(length(search)), 1) AS avgdl "
    "FROM memories WHERE ($1::text IS NULL OR workspace = $1)"
)
"""A scope's size (:meth:`TermStats.scope`): its memories and their average distinct lexemes."""


class TermStats:
    """The sizes recall plans and scores by, cached for ``ttl`` seconds: each scope's (memories,
    average distinct lexemes per memory), for BM25 and the semantic voice's choice of scan."""

    MAX_SCOPES = 1024
    """The most scopes a cache shared by the points of the past keeps (the oldest go first)."""

    def __init__(
        self,
        ttl: float = 300.0,
        schema: str | None = None,
        *,
        cache: dict[str, tuple[float, tuple[float, float]]] | None = None,
        counted: str = SCOPE_SQL,
    ) -> None:
        self._ttl = ttl
        self._schema = schema
        """The schema every connection given uses (None: asked of each connection)."""
        self._scopes: dict[str, tuple[float, tuple[float, float]]] = {} if cache is None else cache
        """By ``<schema>/<workspace>``; the reads as of each point share one (their schema names
        carry the point: ``<schema>@<seq>``)."""
        self._counted = counted
        """The statement that counts a scope: ``n`` and ``avgdl`` of workspace ``$1`` (NULL: all)."""

    async def _schema_of(self, conn: asyncpg.Connection) -> str:
        return self._schema or str(await conn.fetchval("SELECT current_schema()"))

    async def scope(self, conn: asyncpg.Connection, workspace: str | None) -> tuple[float, float]:
        """(memories, average distinct lexemes per memory) of a workspace (or all), for BM25."""
        schema = await self._schema_of(conn)
        key = f"{schema}/{workspace or '*'}"
        hit = self._scopes.get(key)
        if hit is not None and time.monotonic() - hit[0] < self._ttl:
            return hit[1]
        row = await conn.fetchrow(self._counted, workspace)
        value = (max(1.0, float(row["n"])), max(1.0, float(row["avgdl"])))
        if len(self._scopes) >= self.MAX_SCOPES:
            del self._scopes[next(iter(self._scopes))]
        self._scopes[key] = (time.monotonic(), value)
        return value


def quoted_lexeme(lexeme: str) -> str:
    """``lexeme`` as a tsquery of itself (quoted: taken as it is, not parsed again)."""
    return "'" + lexeme.replace("'", "''") + "'"


_quote = quoted_lexeme


@dataclass(frozen=True)
class TextQuery:
    """A ``to_tsquery('simple', …)`` string, its lexemes, and whether they are common words only."""

    tsquery: str
    broad: bool = False
    lexemes: tuple[str, ...] = ()


async def selective_query(
    conn: asyncpg.Connection, text: str, workspace: str | None = None, max_terms: int | None = None
) -> TextQuery | None:
    """Match any selective word of ``text`` in ``workspace`` (None: all workspaces); None when it has
    no words. ``max_terms``: at most that many of the selective words, the rarest in the scope
    (a long text, such as a whole observation, otherwise matches most of a workspace through its
    many ordinary words, each one scored; its rarest words are the ones BM25 weighs most).

    When every word found in the scope is common, the rarest of them is used and the query is marked
    ``broad``: callers then rank only the newest ``BROAD_CANDIDATES`` matches, so the cost stays
    bounded. Words no memory of the scope holds stay in the query (they cost an empty index lookup)
    but do not make it selective.
    """
    # One round trip: the query's lexemes with their counts in the scope (primary-key lookups).
    counts = await conn.fetchval(f"SELECT {term_counts('$1', '$2')}", text, workspace)
    return query_of_counts(counts, max_terms)


def term_counts(text: str, workspace: str) -> str:
    """A scalar SQL expression: the lexemes of the text parameter ``text`` with how many memories
    of the scope (parameter ``workspace``; NULL: all) hold each, as a JSON object (in lexeme order),
    for :func:`query_of_counts`. An expression, so that a caller can ask it with other parts of a
    read in one statement."""
    return f"""(SELECT coalesce(json_object_agg(q.lexeme, q.memories ORDER BY q.lexeme), '{{}}')::text
                FROM (SELECT q.lexeme,
                             coalesce((SELECT sum(t.memories) FROM memory_terms t
                                       WHERE t.lexeme = q.lexeme
                                         AND ({workspace}::text IS NULL OR t.workspace = {workspace})), 0)
                             AS memories
                      FROM unnest(to_tsvector('english', {text}::text)
                                  || to_tsvector('simple', {text}::text)) q) q)"""


def query_of_counts(counts: str | None, max_terms: int | None = None) -> TextQuery | None:
    """The query of :func:`term_counts`' JSON; None when the text has no words (or was NULL)."""
    decoded: dict[str, int] = json.loads(counts) if counts else {}
    return text_query(decoded, max_terms) if decoded else None


def text_query(counts: Mapping[str, int], max_terms: int | None = None) -> TextQuery:
    """The query :func:`selective_query` makes of a text's lexemes and how many memories of the
    scope hold each (in lexeme order)."""
    selective = [lx for lx, n in counts.items() if n <= COMMON_ROWS]
    if max_terms is not None and len(selective) > max_terms:
        # Rarest first; words no memory holds cost nothing and match nothing: they go last.
        kept = sorted(selective, key=lambda lx: (counts[lx] == 0, counts[lx], lx))[:max_terms]
        selective = sorted(kept)
    found = [lx for lx, n in counts.items() if n > 0]
    if not found or any(counts[lx] > 0 for lx in selective):
        return TextQuery(" | ".join(_quote(lx) for lx in selective), lexemes=tuple(selective))
    rarest = min(found, key=lambda lx: (counts[lx], lx))
    return TextQuery(_quote(rarest), broad=True, lexemes=(rarest,))
