"""search_memory: keyword, semantic and hybrid recall, every result explained (requirements §8).

Modes:

- ``keyword``: full text only (any term; web-search syntax with ``strict``).
- ``vector``: vector KNN only (for comparison; not a product mode, requirements §8).
- ``semantic``: full text and vector KNN fused by reciprocal rank fusion (k = 60).
- ``hybrid`` (default): lexical, semantic, temporal and graph voices, weighted by the query's intent,
  scaled by Weibull decay, plus activation/importance/credibility priors, diversified with MMR
  (see :mod:`noema.domain.ranking` for the formula). ``profile="weighted"`` selects requirements §8's plain
  weighted fusion instead.

While some memories lack a vector for the current model (an embed backlog), the semantic voice
counts only for the memories it could judge: for the others its weight goes to the text voice, and
its own hits are weighed by how much of the scope it could see (see :mod:`noema.domain.ranking`);
each result's ``semantic_available`` says which case it was.

A search never fails because the embedder does: when the query cannot be embedded (a remote
embedding server down, or slower than its query timeout), the search answers from the other voices,
as without vectors, and the response's ``unavailable`` says the semantic voice was not heard and why.

In every mode and profile, the memories of the current repository (``repo``) rank first, the
others after them (nothing is filtered out); every result's components explain its score.

The temporal voice ranks by recency the memories the other voices found (and, for temporal
queries, the most recent memories of the scope), so recency reorders relevant memories instead of
flooding results with unrelated new ones. When the query names a time ("in May 2023", "last week":
:mod:`noema.domain.timewords`, read against the scope's newest memory), the voice is instead
whether a memory happened then, and the text and semantic voices' best matches within that time
join the pool (intent ``dated``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from noema.domain.ranking import (
    INTENT_WEIGHTS,
    Candidate,
    Scored,
    classify_intent,
    fuse_hybrid,
    fuse_reciprocal,
    fuse_weighted,
    mark_named,
    mmr_select,
    rank_by_voice,
    repo_first,
)
from noema.ports import Embedder, RecallFilters, RecallVoices
from noema.records import dataclass
from noema.threads import in_daemon_thread

if TYPE_CHECKING:  # the time words (a dozen patterns) load with the first hybrid search
    from noema.domain.timewords import TimeWindow

__all__ = ["MODES", "Recall", "RecallFilters", "SearchResponse", "SearchResult"]

MODES = ("keyword", "vector", "semantic", "hybrid")
VOICE_DEPTH = 50
SEEDS_PER_VOICE = 3
WINDOW_DEPTH = 10
"""Hits asked of the text and semantic voices within the time a query names."""


@dataclass
class SearchResult:
    """One recalled memory, its score and every component of the score."""

    id: str
    content: str
    score: float
    components: dict[str, float]
    memory: dict[str, Any] = field(default_factory=dict)


@dataclass
class SearchResponse:
    """Results with how the query was read and what the search cost."""

    query: str
    mode: str
    intent: str | None
    weights: dict[str, float]
    results: list[SearchResult]
    timings_ms: dict[str, float]
    unavailable: dict[str, str] = field(default_factory=dict)
    """Voices that could not be heard, each with why (``semantic``: the query could not be embedded)."""


class Recall:
    """Runs searches against a read model, with an optional embedder for the semantic voice."""

    def __init__(self, store: RecallVoices, embedder: Embedder | None) -> None:
        self.store = store
        self.embedder = embedder

    @property
    def vectors_available(self) -> bool:
        """True when both an embedder and pgvector are there."""
        return self.embedder is not None and self.store.has_vectors

    async def search(
        self,
        query: str,
        filters: RecallFilters,
        *,
        mode: str = "hybrid",
        profile: str = "hybrid",
        limit: int = 10,
        strict: bool = False,
        repo: str | None = None,
        now: datetime | None = None,
        query_vector: Sequence[float] | None = None,
        depth: int = VOICE_DEPTH,
        text_terms: int | None = None,
        details: bool = True,
    ) -> SearchResponse:
        """Search memory; see the module docstring for modes and scoring. ``depth``: hits asked of
        each voice (and candidates MMR diversifies), at least ``limit`` — fewer is cheaper, for a
        caller that wants only the very best few (the retrieve worker). ``text_terms``: the text
        voice matches on at most that many of the query's words, its rarest — for a long query
        (a whole observation) that would otherwise score most of the workspace. ``details=False``:
        each result's ``memory`` holds only what scoring read (importance, credibility, activation),
        one query fewer for a caller that shows nothing."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
        if profile not in ("hybrid", "weighted"):
            raise ValueError("profile must be hybrid or weighted")
        if profile != "hybrid" and mode != "hybrid":
            raise ValueError(f"the {profile} profile applies to hybrid mode only, not {mode}")
        if not query.strip():
            raise ValueError("query must not be empty")
        now = now or datetime.now(UTC)
        timings: dict[str, float] = {}
        unavailable: dict[str, str] = {}
        vector: Sequence[float] | None = query_vector
        model = self.embedder.name if self.embedder else None
        if vector is None and mode != "keyword" and self.vectors_available:
            embedder = self.embedder
            assert embedder is not None
            t = time.perf_counter()
            # Off the event loop: tens of milliseconds of CPU that other requests must not wait for.
            try:
                vector = await in_daemon_thread(lambda: embedder.embed_query(query))
            except OSError as exc:
                # The embedder is away (a remote one raises EmbedderUnavailable, an OSError): answered
                # without the semantic voice, whose weight goes to the text voice.
                unavailable["semantic"] = f"the query could not be embedded: {exc}"
            timings["query_embedding"] = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        ranked, intent, weights = await self._rank(
            query, filters, mode, profile, limit, strict, repo, now, vector, model, depth, text_terms
        )
        shown = await self._shown(ranked, now) if details else {}
        timings["search"] = (time.perf_counter() - t) * 1000
        results = [
            SearchResult(
                s.candidate.id,
                s.candidate.content,
                s.final,
                s.components,
                shown.get(s.candidate.id, {}) if details else _scored_fields(s),
            )
            for s in ranked
        ]
        return SearchResponse(query, mode, intent, weights, results, timings, unavailable)

    async def _rank(
        self,
        query: str,
        f: RecallFilters,
        mode: str,
        profile: str,
        limit: int,
        strict: bool,
        repo: str | None,
        now: datetime,
        vector: Sequence[float] | None,
        model: str | None,
        voice_depth: int,
        text_terms: int | None = None,
    ) -> tuple[list[Scored], str | None, dict[str, float]]:
        depth = max(voice_depth, limit)

        async def none() -> list[tuple[str, float]]:
            return []

        # A query of very common words only ranks text when nothing else can (keyword mode, no vectors).
        text_alone = mode == "keyword" or vector is None or not model

        known: dict[str, Candidate] = {}

        async def text_voice() -> list[tuple[str, float]]:
            hits = await self.store.lexical(query, f, depth, strict, broad=text_alone, max_terms=text_terms)
            if mode == "hybrid" and hits:
                # Its hits' candidate rows are read while the vector voice still scans its index.
                known.update(await self.store.candidates([m for m, _ in hits], model, now))
            return hits

        # The two voices are independent: ask them at once (the pool lends each its connection).
        lexical, semantic = await asyncio.gather(
            text_voice() if mode != "vector" else none(),
            self.store.semantic(vector, model, f, depth)
            if mode != "keyword" and vector is not None and model
            else none(),
        )
        if mode != "hybrid":
            # Semantic mode loads the vectors to know which memories the vector voice could judge.
            fair = mode == "semantic" and bool(semantic)
            cands = await self._candidates(
                {"lexical": lexical, "semantic": semantic}, (), model if fair else None, now
            )
            found = list(cands.values())
            if mode == "semantic":
                ranked = fuse_reciprocal(found, ("lexical", "semantic"), fair=fair)
            else:
                ranked = rank_by_voice(found, "lexical" if mode == "keyword" else "semantic")
            return repo_first(ranked, repo)[:limit], None, {}

        window = await self._named_window(query, f, now) if profile == "hybrid" else None
        intent = "dated" if window is not None else classify_intent(query)
        weights = dict(INTENT_WEIGHTS[intent])
        if not semantic:
            # Without vectors the semantic voice is silent; its weight goes to the text voice.
            weights["lexical"] += weights.pop("semantic")
            weights["semantic"] = 0.0
        seeds: dict[str, float] = {}
        for hits in (lexical, semantic):
            if hits:
                top = hits[0][1]
                low = hits[-1][1]
                for mid, raw in hits[:SEEDS_PER_VOICE]:
                    strength = (raw - low) / (top - low) if top > low else 1.0
                    seeds[mid] = max(seeds.get(mid, 0.0), strength)
        extra = await self.store.recent(f, 10) if intent == "temporal" else []
        if window is not None:
            # The best matches of the time named join the pool, however the whole scope ranks them.
            within = replace(f, since=_later(f.since, window.start), until=_earlier(f.until, window.end))
            extra = [
                *await self.store.lexical(query, within, WINDOW_DEPTH, broad=False),
                *(
                    await self.store.semantic(vector, model, within, WINDOW_DEPTH)
                    if vector is not None and model
                    else []
                ),
            ]
        # The walk reads its memories' candidate rows itself, beside the other voices' candidates.
        (graph, reached), cands = await asyncio.gather(
            self.store.graph(seeds, f, depth, model, now),
            self._candidates(
                {"lexical": lexical, "semantic": semantic}, [m for m, _ in extra], model, now, known
            ),
        )
        for mid, c in reached.items():
            cands.setdefault(mid, c)
        for rank, (mid, raw) in enumerate(graph, start=1):
            cands[mid].ranks["graph"] = rank
            cands[mid].raw["graph"] = raw

        def when(c: Candidate) -> datetime:
            return c.happened_at or c.created_at

        def temporal(c: Candidate) -> float:
            # Whether it happened in the time the query names, else how recently.
            return (1.0 if window.holds(when(c)) else 0.0) if window else when(c).timestamp()

        by_time = sorted(cands.values(), key=lambda c: (temporal(c), when(c), c.id), reverse=True)
        for rank, c in enumerate(by_time, start=1):
            # Time orders what the other voices found; it never brings in memories of its own
            # (except the newest ones for temporal questions, or the best matches of the time a
            # question names, added to the pool above).
            c.ranks["temporal"] = rank
            c.raw["temporal"] = temporal(c)
        candidates: list[Candidate] = list(cands.values())
        if profile == "weighted":
            return repo_first(fuse_weighted(candidates, now, bool(semantic)), repo)[:limit], intent, weights
        mark_named(candidates, query)
        return (
            mmr_select(fuse_hybrid(candidates, now, weights), limit, pool=depth, repo=repo),
            intent,
            weights,
        )

    async def _shown(self, ranked: Sequence[Scored], now: datetime) -> dict[str, dict[str, Any]]:
        """What each result shows of its memory: read with its candidate row where the store did
        (no statement after ranking), else asked of the store."""
        shown = {s.candidate.id: dict(s.candidate.shown) for s in ranked if s.candidate.shown is not None}
        missing = [s.candidate.id for s in ranked if s.candidate.shown is None]
        if missing:
            shown |= await self.store.details(missing, now)
        return shown

    async def _named_window(self, query: str, f: RecallFilters, now: datetime) -> TimeWindow | None:
        """The time the query names (:mod:`noema.domain.timewords`), its relative words read against
        the scope's present: its newest memory's time (the search's time if that is earlier, or
        if the scope is empty)."""
        from noema.domain.timewords import named_window, names_time

        if not names_time(query):
            return None
        newest = await self.store.recent(f, 1)
        anchor = min(now, datetime.fromtimestamp(newest[0][1], UTC)) if newest else now
        return named_window(query, anchor)

    async def _candidates(
        self,
        voices: dict[str, list[tuple[str, float]]],
        extra: Sequence[str],
        model: str | None,
        now: datetime,
        known: dict[str, Candidate] | None = None,
    ) -> dict[str, Candidate]:
        """The memories the voices found (and ``extra`` ones), each with every voice's rank and score;
        ``known``: candidate rows already read (of the same ``model`` and ``now``)."""
        known = known or {}
        ids = dict.fromkeys([m for hits in voices.values() for m, _ in hits] + list(extra))
        missing = [m for m in ids if m not in known]
        read = await self.store.candidates(missing, model, now) if missing else {}
        # In the voices' order, as one read of them all would give them.
        cands = {m: c for m in ids if (c := known.get(m) or read.get(m)) is not None}
        for name, hits in voices.items():
            for rank, (mid, raw) in enumerate(hits, start=1):
                if mid in cands:
                    cands[mid].ranks[name] = rank
                    cands[mid].raw[name] = raw
        return cands


def _later(a: datetime | None, b: datetime) -> datetime:
    return b if a is None else max(a, b)


def _earlier(a: datetime | None, b: datetime) -> datetime:
    return b if a is None else min(a, b)


def _scored_fields(s: Scored) -> dict[str, Any]:
    c = s.candidate
    return {"importance": c.importance, "credibility": c.credibility, "activation": c.activation}
