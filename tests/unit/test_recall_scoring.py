"""Recall scoring as pure functions: placement of the current repository, MMR's reach, explanations."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

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
    normalized,
    rank_by_voice,
    repo_first,
    semantic_coverage,
    semantic_strengths,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def candidate(i: int, repo: str | None = None, content: str | None = None) -> Candidate:
    return Candidate(
        id=f"m{i:03}",
        content=content or f"memory number {i} about topic{i}",
        memory_type="fact",
        activation=0.5,
        importance=0.5,
        credibility=0.8,
        created_at=NOW,
        repo=repo,
    )


def scored(candidates: list[Candidate]) -> list[Scored]:
    """Best first: relevance falls with the position."""
    n = len(candidates)
    return [Scored(c, (n - i) / n, {"relevance": (n - i) / n}) for i, c in enumerate(candidates)]


def test_mmr_returns_as_many_results_as_asked_beyond_its_default_pool() -> None:
    chosen = mmr_select(scored([candidate(i) for i in range(80)]), limit=100)
    assert len(chosen) == 80
    assert len({s.candidate.id for s in chosen}) == 80


def test_the_current_repository_ranks_first_even_when_it_matches_worst() -> None:
    items = scored([candidate(i) for i in range(59)] + [candidate(59, repo="web")])
    chosen = mmr_select(items, limit=5, repo="web")
    assert [s.candidate.id for s in chosen] == ["m059", "m000", "m001", "m002", "m003"]
    assert [s.components["repo_first"] for s in chosen] == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert chosen[0].final < chosen[1].final  # placed first, not scored higher
    for s in chosen:
        assert math.isclose(s.components["relevance"] + s.components["mmr"], s.final)


def test_diversity_never_pushes_a_repository_memory_behind_another() -> None:
    same = "the release train leaves every Tuesday at noon"
    items = scored([candidate(0, repo="web", content=same), candidate(1, repo="web", content=same)])
    items += scored([candidate(2, content="on-call changes on Sundays")])
    items[2].relevance = items[2].components["relevance"] = 0.99
    chosen = mmr_select(items, limit=3, repo="web")
    assert [s.candidate.id for s in chosen] == ["m000", "m001", "m002"]
    assert chosen[1].components["mmr"] < 0  # the restatement is still penalised within its group


def test_repository_placement_is_stable_and_drops_nothing() -> None:
    items = scored([candidate(0), candidate(1, repo="web"), candidate(2), candidate(3, repo="web")])
    placed = repo_first(items, "web")
    assert [s.candidate.id for s in placed] == ["m001", "m003", "m000", "m002"]
    assert [s.candidate.id for s in repo_first(items, None)] == ["m000", "m001", "m002", "m003"]
    assert all(s.components["repo_first"] == 0.0 for s in repo_first(items, None))


def test_reciprocal_rank_fusion_explains_each_voices_share() -> None:
    both, text_only = candidate(0), candidate(1)
    both.ranks, both.raw = {"lexical": 2, "semantic": 1}, {"lexical": 3.5, "semantic": 0.9}
    text_only.ranks, text_only.raw = {"lexical": 1}, {"lexical": 4.0}
    first, second = fuse_reciprocal([text_only, both], ("lexical", "semantic"))
    assert first.candidate is both
    assert first.components["lexical"] == 1 / 62
    assert first.components["semantic"] == 1 / 61
    assert first.components["lexical"] + first.components["semantic"] == first.final
    assert second.components["semantic"] == 0.0
    assert second.components["semantic_rank"] == 0.0
    assert second.components["lexical"] == second.final == 1 / 61


def test_one_voice_alone_ranks_in_its_own_order_with_its_own_score() -> None:
    a, b, missed = candidate(0), candidate(1), candidate(2)
    a.ranks, a.raw = {"lexical": 2}, {"lexical": 1.5}
    b.ranks, b.raw = {"lexical": 1}, {"lexical": 2.5}
    ranked = rank_by_voice([a, missed, b], "lexical")
    assert [s.candidate.id for s in ranked] == ["m001", "m000"]
    assert ranked[0].components["lexical"] == ranked[0].final == 2.5


def voiced(i: int, lexical: float | None, semantic: float | None, vector: bool) -> Candidate:
    """A candidate with the given voice scores (ranks follow the scores) and maybe a vector."""
    c = candidate(i)
    if lexical is not None:
        c.raw["lexical"] = lexical
    if semantic is not None:
        c.raw["semantic"] = semantic
    c.vector = [1.0, float(i)] if vector else None
    return c


def ranked(cands: list[Candidate]) -> list[Candidate]:
    for voice in ("lexical", "semantic"):
        hits = sorted((c for c in cands if voice in c.raw), key=lambda c: -c.raw[voice])
        for rank, c in enumerate(hits, start=1):
            c.ranks[voice] = rank
    return cands


def test_at_full_vector_coverage_the_semantic_voice_is_plain_min_max_over_its_hits() -> None:
    cands = ranked([voiced(i, 1.0 / (i + 1), 0.9 - i / 100, vector=True) for i in range(10)])
    assert semantic_coverage(cands) == 1.0
    assert semantic_strengths(cands, 1.0) == normalized(cands, "semantic")
    for s in fuse_hybrid(cands, NOW):
        assert s.components["semantic_available"] == 1.0
        assert s.components["semantic"] > 0 or s.components["semantic_rank"] == 10


def test_a_memory_without_a_vector_gets_the_semantic_weight_on_its_text_match() -> None:
    without = voiced(0, 2.0, None, vector=False)
    poor = voiced(1, None, 0.70, vector=True)  # the best of the few vectors, matching no word
    cands = ranked([without, poor, voiced(2, 1.0, 0.69, vector=True), voiced(3, None, 0.5, vector=True)])
    weights = {"lexical": 0.36, "semantic": 0.37, "graph": 0.22, "temporal": 0.05}
    scored = {s.candidate.id: s.components for s in fuse_hybrid(cands, NOW, weights)}
    assert scored[without.id]["semantic_available"] == 0.0
    assert math.isclose(scored[without.id]["lexical"], 0.73 * scored[without.id]["decay"])
    assert scored[without.id]["relevance"] > scored[poor.id]["relevance"]
    # One of the two lexical hits has a vector: (1 + 1) / (2 + 1).
    assert math.isclose(scored[poor.id]["semantic_coverage"], 2 / 3)


def test_at_partial_coverage_only_the_vector_hits_within_reach_keep_a_strength() -> None:
    cands = ranked([voiced(i, None, 0.9 - i / 100, vector=True) for i in range(10)])
    strengths = semantic_strengths(cands, 0.3)
    kept = [c.id for c in cands if strengths[c.id] > 0]
    assert kept == ["m000", "m001"]  # the top three, min-max: the third is the zero
    assert strengths["m000"] == 1.0
    assert all(v == 0.0 for k, v in strengths.items() if k not in kept)


def test_reciprocal_fusion_counts_the_text_rank_for_the_vector_voice_it_could_not_hear() -> None:
    without = voiced(0, 2.0, None, vector=False)
    both = voiced(1, 1.0, 0.8, vector=True)
    cands = ranked([without, both])
    fused = {s.candidate.id: s.components for s in fuse_reciprocal(cands, ("lexical", "semantic"), fair=True)}
    assert fused[without.id]["lexical"] == 2 / 61
    assert fused[without.id]["semantic_available"] == 0.0
    plain = {
        s.candidate.id: s.components
        for s in fuse_reciprocal(ranked([voiced(0, 2.0, 0.8, True)]), ("lexical", "semantic"), fair=True)
    }
    assert plain["m000"]["final"] == 2 / 61  # full coverage: plain RRF


def test_the_weighted_profile_weighs_a_memory_without_a_vector_as_without_vectors() -> None:
    cands = ranked(
        [
            voiced(0, 2.0, None, vector=False),
            voiced(1, 1.0, 0.8, vector=True),
            voiced(2, 0.5, 0.7, vector=True),
        ]
    )
    out = {s.candidate.id: s.components for s in fuse_weighted(cands, NOW, has_vectors=True)}
    assert out["m000"]["text"] == 0.65
    assert out["m000"]["vector"] == 0.0
    assert out["m000"]["semantic_available"] == 0.0


def test_a_participant_the_query_names_is_a_prior_of_their_memories() -> None:
    said, mentioned, other = candidate(1), candidate(2, content="Wow, Caroline, that is great"), candidate(3)
    said.participants, mentioned.participants, other.participants = ("Caroline",), ("Melanie",), ()
    for c in (said, mentioned, other):
        c.raw["lexical"], c.ranks["lexical"] = 1.0, 1
    mark_named([said, mentioned, other], "What career has caroline chosen?")
    assert [c.named for c in (said, mentioned, other)] == [1.0, 0.0, 0.0]
    ranked = fuse_hybrid([said, mentioned, other], NOW)
    assert ranked[0].candidate is said
    assert ranked[0].components["named"] > 0 == ranked[1].components["named"]
    mark_named([said, mentioned, other], "What career has the team chosen?")
    assert [c.named for c in (said, mentioned, other)] == [0.0, 0.0, 0.0]


def test_a_relational_question_weighs_no_recency() -> None:
    """How things connect is stated once, whenever it was: for "Who owns the service that billing
    depends on?" the older fact that matches a little better ranks above newer chatter."""
    # The text and the vector voice each prefer one of the two; a third memory sets the vectors' floor.
    fact, chatter, far = voiced(1, 0.95, 0.80, True), voiced(2, 1.0, 0.78, True), voiced(3, None, 0.50, True)
    for c, day in ((fact, 5), (chatter, 57), (far, 1)):
        c.happened_at = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=day)
        c.raw["temporal"] = c.happened_at.timestamp()
    query = "Who owns the service that billing depends on?"
    assert classify_intent(query) == "relational"
    out = fuse_hybrid(ranked([fact, chatter, far]), NOW, INTENT_WEIGHTS[classify_intent(query)])
    assert [s.candidate for s in out[:2]] == [fact, chatter]
    assert all(s.components["temporal"] == 0.0 for s in out)


def test_recency_words_make_a_why_question_temporal() -> None:
    assert classify_intent("Why did the deploy fail lately?") == "temporal"
    assert classify_intent("Why did the deploy fail?") == "relational"
    assert INTENT_WEIGHTS["temporal"]["temporal"] > INTENT_WEIGHTS["lookup"]["temporal"] > 0
