"""search_memory: keyword, semantic and hybrid recall, every result explained (SPEC §8).

Modes:

- ``keyword``: full text only (any term; web-search syntax with ``strict``).
- ``vector``: vector KNN only (for comparison; not a product mode of the spec).
- ``semantic``: full text and vector KNN fused by reciprocal rank fusion (k = 60).
- ``hybrid`` (default): lexical, semantic, temporal and graph voices, weighted by the query's intent,
  scaled by Weibull decay, plus activation/importance/credibility priors, diversified with MMR
  (see :mod:`noema.domain.recall` for the formula). ``profile="weighted"`` selects SPEC §8's plain
  weighted fusion instead.

The temporal voice ranks by recency the memories the other voices found (and, for temporal
queries, the most recent memories of the scope), so recency reorders relevant memories instead of
flooding results with unrelated new ones.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .adapters.embedders import Embedder
from .adapters.postgres.recall import RecallFilters, RecallStore
from .domain.recall import (
    INTENT_WEIGHTS,
    RRF_K,
    Candidate,
    Scored,
    classify_intent,
    fuse_hybrid,
    fuse_weighted,
    mmr_select,
)

__all__ = ["MODES", "Recall", "RecallFilters", "SearchResponse", "SearchResult"]

MODES = ("keyword", "vector", "semantic", "hybrid")
VOICE_DEPTH = 50
SEEDS_PER_VOICE = 3


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


class Recall:
    """Runs searches against a read model, with an optional embedder for the semantic voice."""

    def __init__(self, store: RecallStore, embedder: Embedder | None) -> None:
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
    ) -> SearchResponse:
        """Search memory; see the module docstring for modes and scoring."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
        if profile not in ("hybrid", "weighted"):
            raise ValueError("profile must be hybrid or weighted")
        if not query.strip():
            raise ValueError("query must not be empty")
        now = now or datetime.now(UTC)
        timings: dict[str, float] = {}
        vector: Sequence[float] | None = query_vector
        model = self.embedder.name if self.embedder else None
        if vector is None and mode != "keyword" and self.vectors_available:
            assert self.embedder is not None
            t = time.perf_counter()
            vector = self.embedder.embed_query(query)
            timings["query_embedding"] = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        ranked, intent, weights = await self._rank(
            query, filters, mode, profile, limit, strict, repo, now, vector, model
        )
        details = await self.store.details([s.candidate.id for s in ranked])
        timings["search"] = (time.perf_counter() - t) * 1000
        results = [
            SearchResult(
                s.candidate.id, s.candidate.content, s.final, s.components, details.get(s.candidate.id, {})
            )
            for s in ranked
        ]
        return SearchResponse(query, mode, intent, weights, results, timings)

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
    ) -> tuple[list[Scored], str | None, dict[str, float]]:
        depth = max(VOICE_DEPTH, limit)

        async def none() -> list[tuple[str, float]]:
            return []

        # A query of very common words only ranks text when nothing else can (keyword mode, no vectors).
        text_alone = mode == "keyword" or vector is None or not model

        # The two voices are independent: ask them at once (the pool lends each its connection).
        lexical, semantic = await asyncio.gather(
            self.store.lexical(query, f, depth, strict, broad=text_alone) if mode != "vector" else none(),
            self.store.semantic(vector, model, f, depth)
            if mode != "keyword" and vector is not None and model
            else none(),
        )
        if mode in ("keyword", "vector", "semantic"):
            voices = {"lexical": lexical, "semantic": semantic}
            fused: dict[str, float] = {}
            for hits in voices.values():
                for rank, (mid, _) in enumerate(hits, start=1):
                    fused[mid] = fused.get(mid, 0.0) + 1.0 / (RRF_K + rank)
            cands = await self.store.candidates(list(fused), None)
            out = []
            for mid, score in sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]:
                c = cands.get(mid)
                if c is None:
                    continue
                comp: dict[str, float] = {}
                for name, hits in voices.items():
                    for rank, (hid, raw) in enumerate(hits, start=1):
                        if hid == mid:
                            comp[f"{name}_rank"], comp[f"{name}_score"] = float(rank), raw
                if mode == "keyword":
                    score = comp.get("lexical_score", 0.0)
                elif mode == "vector":
                    score = comp.get("semantic_score", 0.0)
                comp["final"] = score
                out.append(Scored(c, score, comp))
            return out, None, {}

        intent = classify_intent(query)
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
        graph = await self.store.graph(seeds, f, depth)
        pool_ids = dict.fromkeys([m for m, _ in lexical] + [m for m, _ in semantic] + [m for m, _ in graph])
        if intent == "temporal":
            pool_ids.update(dict.fromkeys(m for m, _ in await self.store.recent(f, 10)))
        cands = await self.store.candidates(list(pool_ids), model)
        for name, hits in (("lexical", lexical), ("semantic", semantic), ("graph", graph)):
            for rank, (mid, raw) in enumerate(hits, start=1):
                if mid in cands:
                    cands[mid].ranks[name] = rank
                    cands[mid].raw[name] = raw
        by_recency = sorted(cands.values(), key=lambda c: (c.happened_at or c.created_at, c.id), reverse=True)
        for rank, c in enumerate(by_recency, start=1):
            # Recency orders what the other voices found; it never brings in memories of its own
            # (except the newest ones for temporal questions, added to the pool above).
            c.ranks["temporal"] = rank
            c.raw["temporal"] = (c.happened_at or c.created_at).timestamp()
        candidates: list[Candidate] = list(cands.values())
        if profile == "weighted":
            return fuse_weighted(candidates, now, bool(semantic))[:limit], intent, weights
        return mmr_select(fuse_hybrid(candidates, now, weights, repo), limit), intent, weights
