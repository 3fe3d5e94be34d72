"""Recall scoring as pure functions: voices fused by intent, decay and priors, MMR diversity.

Hybrid score of a candidate (every term is returned as a component, and they sum to ``final``):

    voice_v   = w_v(intent) · s_v · weibull            for v in lexical, semantic, temporal, graph
                s_lexical: BM25 score divided by the best hit's (0 when the voice missed it)
                s_semantic: cosine similarity, min-max normalised over the voice's hits
                s_graph: strength of the walk — seed strength × edge weight (× ½ on the second hop),
                    a seed's strength being its normalised lexical/semantic score, an edge's weight
                    its confidence (× how likely a reply the next turn of a session is:
                    noema.adapters.postgres.voices.REPLY_WEIGHT)
                s_temporal: recency of when it happened, min-max normalised over the candidates;
                    or, when the query names a time, 1 if it happened then (else 0)
    prior_a   = 0.06 · activation
    prior_i   = 0.04 · importance
    prior_c   = 0.03 · credibility
    prior_n   = 0.15 · named           (1 when a participant of the memory is named by the query)
    relevance = Σ voice_v + priors
    mmr       = −0.5 · (max similarity)² to the results already chosen, where similarity is cosine
                rescaled so the median pair of candidates is 0 and identical is 1 (embedding spaces put
                unrelated texts at cosine 0.8), or token overlap (Jaccard) without vectors
    final     = relevance + mmr

Fair while vectors are missing (an embed backlog): the semantic voice can only judge memories that
have a vector for the current model. For a memory without one the voice is *unavailable*, not a
zero: its weight goes to the lexical voice for that result (as when no memory has vectors at all),
and the component ``semantic_available`` is 0. And the voice's own hits are judged against the
share of the scope it could see (``semantic_coverage``, estimated as the share of the lexical
voice's hits that have a vector — the text voice finds memories whether or not they have one): the
vector hit ranked r among memories with vectors stands for about rank r / coverage among all, so
only the hits that would still be within the voice's depth at full coverage keep a positive
strength (min-max over those), and a few poorly matching memories that happen to have vectors are
not promoted to the top of the voice. At full coverage both rules are inactive: the scores are the
ones without them.

Placement, in every mode and profile (:func:`repo_first`): when a search names the current
repository, the memories of that repository come first, each group in its own score order; the
others still follow. The component ``repo_first`` (1 or 0) records the placement — it orders, it
is not a term of ``final``. MMR honours it (:func:`mmr_select`), so diversity never pushes a
repository memory behind another one.

The plain weighted fusion (``profile="weighted"``) is requirements §8's: text 0.40 (0.65 without vectors),
vector 0.25, recency 0.10·exp(−age/30 days), activation 0.10, importance 0.10, credibility 0.05, with
text and vector scores min-max normalised over the candidates; each term is a component.

The other modes explain themselves the same way: ``semantic`` fuses the lexical and vector ranks
by reciprocal rank fusion (:func:`fuse_reciprocal`: components ``lexical`` and ``semantic`` are each
voice's ``1/(60 + rank)``), ``keyword`` and ``vector`` rank by one voice's own score
(:func:`rank_by_voice`: BM25 or cosine). In every mode the score terms sum to ``final``; the other
components are details (``*_rank``, ``*_score``, ``decay``, ``max_similarity``), the subtotal
``relevance`` and the placement ``repo_first``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from noema.domain.dynamics import weibull_survival
from noema.records import dataclass

if TYPE_CHECKING:  # NumPy is imported by the diversity step that uses it: a keyword search needs none
    import numpy as np

__all__ = [
    "DEFAULT_WEIGHTS",
    "INTENT_WEIGHTS",
    "Candidate",
    "Scored",
    "classify_intent",
    "fuse_hybrid",
    "fuse_reciprocal",
    "fuse_weighted",
    "mark_named",
    "mmr_select",
    "normalized",
    "rank_by_voice",
    "ratio_to_best",
    "repo_first",
    "semantic_coverage",
    "semantic_strengths",
]

RRF_K = 60
VOICES = ("lexical", "semantic", "temporal", "graph")
PRIORS = {"activation": 0.06, "importance": 0.04, "credibility": 0.03, "named": 0.15}
MMR_PENALTY = 0.5
MMR_POWER = 2.0
DEFAULT_WEIGHTS: dict[str, float] = {"semantic": 0.37, "lexical": 0.36, "graph": 0.22, "temporal": 0.05}
"""Text (BM25) and vectors weigh alike — two voices of comparable strength, as in a plain min-max
fusion — then the graph walk, then recency (requirements §8): for a plain lookup, recency only breaks
near-ties; we keep the voice for agents' own recent work."""

INTENT_WEIGHTS: dict[str, dict[str, float]] = {
    "lookup": DEFAULT_WEIGHTS,
    # "latest…", "recently…": recency and exact words matter more. ("When did…" alone is a lookup:
    # it asks when a past event happened, and the event's memory is not the newest one.)
    "temporal": {"semantic": 0.32, "lexical": 0.38, "graph": 0.18, "temporal": 0.12},
    # "why…", "what led to…", "the service X depends on": the answer is often connected to the
    # question's words, not made of them — so the graph walk weighs more, and the voice that reads
    # meaning rather than words takes recency's share. How things connect (a cause, a dependency, an
    # owner) is stated once, whenever it was: recency says nothing about it, and in a busy workspace
    # it favours the newest chatter over the facts asked about (docs/benchmarks.md, *Recall v3, session
    # 21*). A question asking why something happened *recently* is a temporal one (classify_intent).
    "relational": {"semantic": 0.39, "lexical": 0.31, "graph": 0.30, "temporal": 0.0},
    # "in May 2023", "on 8 May, 2023", "last week": whether a memory happened then is a voice of its
    # own (the temporal voice reads the time named instead of recency; see application.search).
    "dated": {"semantic": 0.30, "lexical": 0.30, "graph": 0.15, "temporal": 0.25},
    # quoted phrases, identifiers, error codes: the literal words are the best evidence.
    "exact": {"semantic": 0.25, "lexical": 0.53, "graph": 0.15, "temporal": 0.07},
}
"""Voice weights per query intent."""

_TEMPORAL = re.compile(
    r"\b(recent(ly)?|latest|last|newest|yesterday|today|ago|since|lately|currently|now)\b",
    re.IGNORECASE,
)
_RELATIONAL = re.compile(
    r"\b(why|because|cause[sd]?|led to|reason|related|depends?|impact|affect(ed|s)?)\b", re.I
)
_EXACT = re.compile(r"\"[^\"]+\"|`[^`]+`|\b[A-Z]{2,}-?\d+\b|\b\w+[_./]\w+\b")


def classify_intent(query: str) -> str:
    """lookup, temporal, relational or exact — picks the voice weights (``dated``, a question naming
    a time, is read apart: :mod:`noema.domain.timewords`). Recency words win over relational ones:
    "why did the deploy fail lately?" asks about the newest failures, and a relational question
    weighs no recency."""
    if _EXACT.search(query):
        return "exact"
    if _TEMPORAL.search(query):
        return "temporal"
    if _RELATIONAL.search(query):
        return "relational"
    return "lookup"


@dataclass
class Candidate:
    """A memory some voice proposed, with what scoring needs to know about it."""

    id: str
    content: str
    memory_type: str
    activation: float
    importance: float
    credibility: float
    created_at: datetime
    repo: str | None = None
    happened_at: datetime | None = None
    participants: Sequence[str] = ()
    named: float = 0.0
    """1 when one of its participants is named by the query (:func:`mark_named`), else 0."""
    ranks: dict[str, int] = field(default_factory=dict)
    """Voice → 1-based rank."""
    raw: dict[str, float] = field(default_factory=dict)
    """Voice → its own score (ts_rank, cosine similarity, recency, graph weight)."""
    vector: Sequence[float] | None = None
    shown: Mapping[str, Any] | None = None
    """What a result shows of the memory, when the adapter read it with the candidate (None: the
    search asks the store for it once ranked)."""


@dataclass
class Scored:
    """A candidate with its final score and every component of it."""

    candidate: Candidate
    relevance: float
    components: dict[str, float]

    @property
    def final(self) -> float:
        """The score the result is ranked by."""
        return self.components["final"]


def _age_days(created_at: datetime, now: datetime) -> float:
    return max(0.0, (now - created_at).total_seconds() / 86400)


def mark_named(candidates: Sequence[Candidate], query: str) -> None:
    """Mark the candidates that one of the people or agents the query names took part in: a name
    is any participant of the candidates that the query holds as a word."""
    words = {w.lower() for w in _TOKEN.findall(query)}
    names = {p for c in candidates for p in c.participants if p.lower() in words}
    for c in candidates:
        c.named = 1.0 if names.intersection(c.participants) else 0.0


def normalized(candidates: Sequence[Candidate], voice: str) -> dict[str, float]:
    """Min-max normalised raw scores of one voice over the candidates it found."""
    values = {c.id: c.raw[voice] for c in candidates if voice in c.raw}
    if not values:
        return {}
    lo, hi = min(values.values()), max(values.values())
    return {k: (v - lo) / (hi - lo) if hi > lo else 1.0 for k, v in values.items()}


def ratio_to_best(candidates: Sequence[Candidate], voice: str) -> dict[str, float]:
    """Raw scores of one voice divided by its best (for scores whose zero means "no evidence")."""
    values = {c.id: c.raw[voice] for c in candidates if voice in c.raw}
    hi = max(values.values(), default=0.0)
    return {k: v / hi for k, v in values.items()} if hi > 0 else {}


def semantic_coverage(candidates: Sequence[Candidate]) -> float:
    """Share of the lexical voice's hits that have a vector for the current model, as (with + 1) /
    (hits + 1): exactly 1 when all have one (or the text voice found nothing, so there is nothing to
    compare the vector hits with), never 0."""
    text = [c for c in candidates if "lexical" in c.ranks]
    return (sum(c.vector is not None for c in text) + 1) / (len(text) + 1)


def semantic_strengths(candidates: Sequence[Candidate], coverage: float) -> dict[str, float]:
    """Min-max normalised cosine of the semantic voice's hits that stay within its depth once their rank
    is scaled by ``coverage`` (rank r among memories with vectors ≈ rank r / coverage among all).

    At full coverage every hit is kept: plain min-max over the voice's hits.
    """
    hits = sorted((c for c in candidates if "semantic" in c.raw), key=lambda c: (c.ranks["semantic"], c.id))
    if not hits:
        return {}
    keep = hits[: max(1, math.ceil(len(hits) * min(1.0, coverage) - 1e-9))]
    # min/max rather than the ends: an iterative HNSW scan may return neighbours slightly out of order.
    lo, hi = min(c.raw["semantic"] for c in keep), max(c.raw["semantic"] for c in keep)
    out = {c.id: 0.0 for c in hits}
    for c in keep:
        out[c.id] = (c.raw["semantic"] - lo) / (hi - lo) if hi > lo else 1.0
    return out


def fuse_hybrid(
    candidates: Sequence[Candidate],
    now: datetime,
    weights: Mapping[str, float] = DEFAULT_WEIGHTS,
) -> list[Scored]:
    """Relevance of every candidate (before MMR), best first."""
    coverage = semantic_coverage(candidates)
    norms = {
        "temporal": normalized(candidates, "temporal"),
        "semantic": semantic_strengths(candidates, coverage),
    }
    # Text rank has a true zero (no match), so it is scaled by the best hit rather than min-max:
    # a weaker match still counts, even among few hits.
    norms["lexical"] = ratio_to_best(candidates, "lexical")
    norms["graph"] = {c.id: c.raw["graph"] for c in candidates if "graph" in c.raw}
    out = []
    for c in candidates:
        decay = weibull_survival(c.memory_type, _age_days(c.created_at, now))
        available = c.vector is not None
        comp: dict[str, float] = {
            "decay": decay,
            "semantic_available": 1.0 if available else 0.0,
            "semantic_coverage": coverage,
        }
        # The voice could not judge a memory without a vector: its weight goes to the text voice.
        own = dict(weights)
        if not available:
            own["lexical"] = own.get("lexical", 0.0) + own.get("semantic", 0.0)
            own["semantic"] = 0.0
        relevance = 0.0
        for voice in VOICES:
            strength = norms[voice].get(c.id, 0.0)
            part = own.get(voice, 0.0) * strength * decay
            comp[f"{voice}_rank"] = float(c.ranks.get(voice, 0))
            comp[f"{voice}_score"] = c.raw.get(voice, 0.0)
            comp[voice] = part
            relevance += part
        for prior, w in PRIORS.items():
            value = float(getattr(c, prior))
            comp[prior] = w * value
            relevance += w * value
        comp["relevance"] = relevance
        out.append(Scored(c, relevance, comp))
    out.sort(key=lambda s: (-s.relevance, s.candidate.id))
    return out


_TOKEN = re.compile(r"\w+")


def _tokens(text: str) -> frozenset[str]:
    return frozenset(_TOKEN.findall(text.lower()))


def _overlap(ta: frozenset[str], tb: frozenset[str]) -> float:
    return len(ta & tb) / len(ta | tb) if ta and tb else 0.0


def _similarities(items: Sequence[Scored]) -> np.ndarray:
    """Pairwise similarity: cosine where both have vectors, token overlap otherwise."""
    import numpy as np

    n = len(items)
    sims = np.zeros((n, n))
    vectors = [s.candidate.vector for s in items]
    with_vec = [i for i, v in enumerate(vectors) if v is not None]
    if with_vec:
        m = np.asarray([vectors[i] for i in with_vec], dtype=np.float64)
        norms = np.linalg.norm(m, axis=1)
        norms[norms == 0] = 1.0
        m = m / norms[:, None]
        cos = m @ m.T
        if len(with_vec) > 2:
            # Rescale: the median pair is "unrelated" (0), identical is 1.
            med = float(np.median(cos[np.triu_indices(len(with_vec), k=1)]))
            cos = np.clip((cos - med) / max(1e-9, 1.0 - med), 0.0, 1.0)
        sims[np.ix_(with_vec, with_vec)] = cos
    have = set(with_vec)
    if len(have) < n:
        # Each text split once, not once per pair (50 candidates make 1,225 pairs).
        tokens = [_tokens(s.candidate.content) for s in items]
        for i in range(n):
            for j in range(i + 1, n):
                if i not in have or j not in have:
                    sims[i, j] = sims[j, i] = _overlap(tokens[i], tokens[j])
    return sims


def mmr_select(
    scored: Sequence[Scored],
    limit: int,
    penalty: float = MMR_PENALTY,
    pool: int = 50,
    power: float = MMR_POWER,
    repo: str | None = None,
) -> list[Scored]:
    """Greedy maximal marginal relevance over the best ``pool`` (at least ``limit``): near-duplicates
    make room for others.

    The penalty grows with the square of the similarity (``power``), so it falls on redundancy —
    restatements of a result already chosen — far more than on results that are merely about the
    same thing (several turns of one conversation can each hold part of an answer).

    With ``repo``, that repository's memories are chosen first (see :func:`repo_first`) — from beyond
    the pool too, since they rank first — and diversity applies within each group.
    """
    head = list(scored[: max(pool, limit)])
    items = head + [s for s in scored[len(head) :] if _in_repo(s.candidate, repo)]
    if not items:
        return []
    import numpy as np

    sims = _similarities(items)
    relevance = np.asarray([s.relevance for s in items])
    ours = np.asarray([_in_repo(s.candidate, repo) for s in items], dtype=bool)
    max_sim = np.zeros(len(items))
    free = np.ones(len(items), dtype=bool)
    chosen: list[Scored] = []
    while free.any() and len(chosen) < limit:
        eligible = free & ours if (free & ours).any() else free
        value = np.where(eligible, relevance - penalty * np.maximum(max_sim, 0.0) ** power, -np.inf)
        i = int(np.argmax(value))
        s = items[i]
        s.components["max_similarity"] = float(max_sim[i])
        s.components["mmr"] = -penalty * max(0.0, float(max_sim[i])) ** power
        s.components["final"] = s.relevance + s.components["mmr"]
        chosen.append(s)
        free[i] = False
        max_sim = np.maximum(max_sim, sims[i])
    return repo_first(chosen, repo)


def _in_repo(c: Candidate, repo: str | None) -> bool:
    return repo is not None and c.repo == repo


def repo_first(ranked: Sequence[Scored], repo: str | None) -> list[Scored]:
    """The memories of the current repository first, then the others, each group in its given order.

    Repository scope ranks without filtering: nothing is dropped. The placement is recorded in each
    result as the component ``repo_first`` (1 or 0); it is not a term of ``final``, so within each
    group the order is the score order and across groups the placement explains it.
    """
    for s in ranked:
        s.components["repo_first"] = 1.0 if _in_repo(s.candidate, repo) else 0.0
    return sorted(ranked, key=lambda s: -s.components["repo_first"])  # stable


def fuse_reciprocal(
    candidates: Sequence[Candidate], voices: Sequence[str], k: int = RRF_K, fair: bool = False
) -> list[Scored]:
    """Reciprocal rank fusion, best first: each voice that found a candidate adds ``1 / (k + rank)``.

    Each voice's share is its component (0 when it missed the candidate), so they sum to ``final``;
    every voice's rank and own score are kept beside it. With ``fair`` (the candidates carry their
    vectors), a memory without a vector has its lexical term count for the semantic voice too, and a
    vector hit's rank is scaled by the coverage (see the module docstring).
    """
    coverage = semantic_coverage(candidates) if fair else 1.0
    out = []
    for c in candidates:
        comp: dict[str, float] = {}
        available = not fair or c.vector is not None
        for voice in voices:
            rank = c.ranks.get(voice, 0)
            comp[f"{voice}_rank"] = float(rank)
            comp[f"{voice}_score"] = c.raw.get(voice, 0.0)
            scaled = rank / coverage if voice == "semantic" else rank
            comp[voice] = 1.0 / (k + scaled) if rank else 0.0
        if fair and "semantic" in voices:
            comp["semantic_available"] = 1.0 if available else 0.0
            comp["semantic_coverage"] = coverage
            if not available and "lexical" in voices:
                comp["lexical"] *= 2.0
        total = sum(comp[voice] for voice in voices)
        comp.update(relevance=total, final=total)
        out.append(Scored(c, total, comp))
    out.sort(key=lambda s: (-s.relevance, s.candidate.id))
    return out


def rank_by_voice(candidates: Sequence[Candidate], voice: str) -> list[Scored]:
    """One voice alone, in its own order: its score (BM25, cosine) is the component and ``final``."""
    out = []
    for c in candidates:
        if voice not in c.ranks:
            continue
        raw = c.raw[voice]
        comp = {f"{voice}_rank": float(c.ranks[voice]), f"{voice}_score": raw, voice: raw}
        comp.update(relevance=raw, final=raw)
        out.append(Scored(c, raw, comp))
    out.sort(key=lambda s: s.candidate.ranks[voice])
    return out


def fuse_weighted(candidates: Sequence[Candidate], now: datetime, has_vectors: bool) -> list[Scored]:
    """requirements §8's plain weighted fusion, best first (no MMR)."""

    coverage = semantic_coverage(candidates) if has_vectors else 1.0
    text, vector = normalized(candidates, "lexical"), semantic_strengths(candidates, coverage)
    out = []
    for c in candidates:
        # A memory without a vector is weighed as if no memory had one (text 0.65), not given a zero.
        available = has_vectors and c.vector is not None
        comp = {
            "text": (0.40 if available else 0.65) * text.get(c.id, 0.0),
            "vector": 0.25 * vector.get(c.id, 0.0) if available else 0.0,
            "recency": 0.10 * math.exp(-_age_days(c.created_at, now) / 30.0),
            "activation": 0.10 * c.activation,
            "importance": 0.10 * c.importance,
            "credibility": 0.05 * c.credibility,
        }
        total = sum(comp.values())
        comp.update(
            relevance=total,
            final=total,
            lexical_score=c.raw.get("lexical", 0.0),
            semantic_score=c.raw.get("semantic", 0.0),
            semantic_available=1.0 if available else 0.0,
            semantic_coverage=coverage,
        )
        out.append(Scored(c, total, comp))
    out.sort(key=lambda s: (-s.relevance, s.candidate.id))
    return out
