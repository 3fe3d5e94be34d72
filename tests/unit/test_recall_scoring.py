"""Recall scoring as pure functions: placement of the current repository, MMR's reach, explanations."""

from __future__ import annotations

import math
from datetime import UTC, datetime

from noema.domain.recall import Candidate, Scored, fuse_reciprocal, mmr_select, rank_by_voice, repo_first

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
