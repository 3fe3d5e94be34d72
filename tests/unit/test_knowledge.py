"""Workspace knowledge as pure functions: domains, access, comparing statements, conflict rules,
working memory, near-duplicate clusters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from noema.client import build_observation
from noema.domain.attention import AttentionConfig, decide_cycle
from noema.domain.knowledge import (
    DomainRef,
    FactView,
    WorkingMemory,
    WorkingMemoryEntry,
    clusters,
    compare,
    context_relevance,
    decide_conflict,
    effective_access,
    equivalent,
    keeper,
    slot_relation,
)
from noema_events import AttentionDecided, WorkingMemoryUpdated

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_a_domain_in_repository_scope_is_another_store_than_the_workspace_one() -> None:
    ws = DomainRef.parse("Architecture")
    repo = DomainRef.parse("architecture", repo="billing")
    assert ws.key == "architecture"
    assert repo.key == "repo:billing/architecture"
    assert DomainRef.parse("repo:billing/architecture") == repo
    assert ws.key != repo.key
    for bad in ("", "repo:billing", "a/b", "x" * 101):
        with pytest.raises(ValueError, match=r"domain|repository"):
            DomainRef.parse(bad)
    with pytest.raises(ValueError, match="names repository"):
        DomainRef.parse("repo:billing/architecture", repo="payments")


def test_access_falls_back_from_role_to_every_role_to_the_mode_default() -> None:
    grants = {("*", "ops"): "write", ("reviewer", "ops"): "read", ("agent", "hr"): "none"}
    assert effective_access(grants, "reviewer", "ops", strict=False) == "read"
    assert effective_access(grants, "anyone", "ops", strict=True) == "write"
    assert effective_access(grants, "agent", "hr", strict=False) == "none"
    assert effective_access(grants, "agent", "secret", strict=False) == "read"
    assert effective_access(grants, "agent", "secret", strict=True) == "none"


def test_restatements_are_equivalent_but_other_values_and_negations_are_not() -> None:
    base = "The deploy key rotates on Fridays"
    assert equivalent(base, "the deploy keys rotate on Fridays.")
    assert not equivalent(base, "The deploy key rotates on Tuesdays")
    assert not equivalent(base, "The deploy key does not rotate on Fridays")
    assert compare("Billing uses PostgreSQL 15", "Billing uses PostgreSQL 16") == "contradicts"
    assert (
        compare("Deploys happen on Fridays after the standup", "deploys happen Fridays after standup")
        == "same"
    )
    assert compare("Billing uses PostgreSQL 15", "The office cat is called Miso") == "unrelated"
    long = "The billing service runs PostgreSQL 15 in the eu-west region with nightly backups to S3"
    assert not equivalent(long, long.replace("15", "16")), "a changed value is no restatement"
    assert compare("Deploys happen on Fridays", "Backups happen on Fridays") == "unrelated"
    assert compare("Deploys happen on Fridays", "Backups happen on Fridays", same_topic=True) == "contradicts"


def test_in_one_topic_only_a_contradiction_is_a_conflict_and_other_points_coexist() -> None:
    assert slot_relation("backups run nightly at 02:00.", "Backups run nightly at 02:00") == "mention"
    assert slot_relation("Backups run nightly at 03:00", "Backups run nightly at 02:00") == "conflict"
    assert slot_relation("Backups do not run nightly at 02:00", "Backups run nightly at 02:00") == "conflict"
    assert slot_relation("Backups are stored in S3", "Backups run nightly at 02:00") == "coexist"
    assert (
        slot_relation("Deploys happen on Fridays after the standup", "Deploys happen on Fridays") == "coexist"
    ), "a refinement is neither a restatement nor a contradiction"


def fact(id: str, seq: int, veracity: str = "stated", confidence: float = 0.9, **kw: object) -> FactView:
    return FactView(id, f"content {id}", veracity, confidence, NOW, seq, **kw)  # type: ignore[arg-type]


def test_conflict_rules_apply_in_order_explicit_veracity_confidence_recency() -> None:
    old, new = fact("old", 1), fact("new", 2, veracity="inferred", confidence=0.5)
    assert decide_conflict(new, old, explicit=True).rule == "explicit"
    v = decide_conflict(new, old)
    assert (v.winner.id, v.rule) == ("old", "veracity")
    v = decide_conflict(fact("new", 2, confidence=0.6), fact("old", 1, confidence=0.95))
    assert (v.winner.id, v.rule) == ("old", "confidence")
    v = decide_conflict(fact("new", 2), fact("old", 1))
    assert (v.winner.id, v.loser.id, v.rule) == ("new", "old", "recency")


def entry(i: int, weight: float, at: datetime = NOW) -> WorkingMemoryEntry:
    return WorkingMemoryEntry(f"m{i}", weight, at, f"item {i}")


@given(st.lists(st.lists(st.floats(0.05, 1.0), max_size=20), max_size=10), st.integers(1, 12))
def test_working_memory_never_exceeds_its_capacity(cycles: list[list[float]], capacity: int) -> None:
    wm, n = WorkingMemory(capacity=capacity), 0
    for k, weights in enumerate(cycles):
        entries = []
        for w in weights:
            entries.append(entry(n, w))
            n += 1
        wm = wm.admit(entries, NOW + timedelta(minutes=k))
        assert len(wm.items) <= capacity
        assert [i.weight for i in wm.items] == sorted((i.weight for i in wm.items), reverse=True)


def test_working_memory_decays_and_drops_what_fades() -> None:
    wm = WorkingMemory(capacity=9).admit([entry(1, 1.0), entry(2, 0.08)], NOW)
    later = wm.decayed(NOW + timedelta(minutes=30))
    assert [i.memory_id for i in later.items] == ["m1"]
    assert later.items[0].weight == pytest.approx(0.5)
    refreshed = later.admit([entry(1, 0.9, NOW + timedelta(minutes=30))], NOW + timedelta(minutes=30))
    assert refreshed.items[0].weight == 0.9
    assert refreshed.items[0].entered_at == NOW, "a refreshed item keeps when it first entered"


def test_a_candidate_about_what_the_mind_holds_scores_higher() -> None:
    wm = WorkingMemory(capacity=9).admit(
        [WorkingMemoryEntry("m", 1.0, NOW, "billing database migration plan")], NOW
    )
    assert context_relevance("the billing database migration starts tonight", wm) > 0.5
    assert context_relevance("lunch is at noon", wm) == 0.0
    memories = {("acme", "ops"): wm}
    on_topic = build_observation(
        "the billing database migration starts tonight", workspace="acme", mind="ops"
    )
    off_topic = build_observation("the office coffee machine is broken again", workspace="acme", mind="ops")
    decided = decide_cycle([on_topic, off_topic], NOW, AttentionConfig(threshold=0.0), memories=memories)[0]
    assert isinstance(decided, AttentionDecided)
    by_id = {d.candidate_id: d for d in decided.payload.decisions}
    assert by_id[on_topic.id].components["context"] > 0
    assert by_id[off_topic.id].components["context"] == 0


def test_admissions_enter_working_memory_which_is_published_whole_and_bounded() -> None:
    batch = [
        build_observation(f"observation number {i} about the rollout", workspace="acme", mind="ops")
        for i in range(15)
    ]
    memories: dict[tuple[str, str], WorkingMemory] = {}
    events = decide_cycle(batch, NOW, AttentionConfig(threshold=0.0), memories=memories)
    updates = [e for e in events if isinstance(e, WorkingMemoryUpdated)]
    assert len(updates) == 1
    assert len(updates[0].payload.items) == 9
    assert len(memories[("acme", "ops")].items) == 9


def test_near_duplicates_cluster_and_the_most_confident_is_kept() -> None:
    a = FactView("a", "Deploys happen on Fridays after the standup", "stated", 0.9, NOW, 1)
    b = FactView("b", "deploys happen on fridays after standup", "stated", 0.95, NOW, 2)
    c = FactView("c", "The office cat is called Miso", "stated", 0.9, NOW, 3)
    d = FactView("d", "Deploys do not happen on Fridays after the standup", "stated", 0.9, NOW, 4)
    e = FactView("e", "Deploys happen on Mondays after the standup", "stated", 0.9, NOW, 5)
    groups = clusters([a, b, c, d, e])
    assert [[f.id for f in g] for g in groups] == [["a", "b"]]
    assert keeper(groups[0]).id == "b"
