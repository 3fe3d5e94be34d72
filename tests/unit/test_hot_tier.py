"""The hot tier's consolidation as pure functions: grouping equivalent items, and what becomes of each
group (promoted, archived, left)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from noema.domain.hot_tier import HotItem, decide_hot_group, group_equivalent, promotion
from noema.domain.knowledge import equivalent

NOW = datetime(2026, 3, 4, 9, 0, tzinfo=UTC)
DAY = timedelta(days=1)
EIGHT = "alpha bravo charlie delta echo foxtrot golf hotel"
NINE = f"{EIGHT} india"
ELEVEN = f"{NINE} juliet kilo"
"""Each equivalent to the next, but EIGHT is not equivalent to ELEVEN."""


def item(n: int, content: str = "the staging database is rebuilt every Sunday", **kw: object) -> HotItem:
    fields: dict[str, object] = {
        "id": f"hot-{n}",
        "mind": "alice",
        "session": "s1",
        "content": content,
        "domain": None,
        "topic": None,
        "importance": 0.5,
        "mention_count": 1,
        "created_at": NOW - 2 * DAY,
        "source_observation_ids": (f"obs-{n}",),
    }
    return HotItem(**{**fields, **kw})  # type: ignore[arg-type]


def ids(groups: list[list[HotItem]]) -> list[list[str]]:
    return [[i.id for i in g] for g in groups]


def test_equivalent_items_of_one_mind_and_session_form_one_group() -> None:
    items = [
        item(1),
        item(2, "The staging database is rebuilt every sunday."),
        item(3, "I looked at the dashboard"),
    ]
    assert ids(group_equivalent(items)) == [["hot-1", "hot-2"], ["hot-3"]]


def test_the_same_words_in_another_session_or_of_another_mind_are_another_group() -> None:
    items = [item(1), item(2, mind="bob"), item(3, session="s2"), item(4)]
    assert ids(group_equivalent(items)) == [["hot-1", "hot-4"], ["hot-2"], ["hot-3"]]


def test_groups_come_in_the_order_of_their_first_item_whatever_session_they_belong_to() -> None:
    items = [item(1, session="s2"), item(2, "I looked at the dashboard"), item(3), item(4, session="s2")]
    assert ids(group_equivalent(items)) == [["hot-1", "hot-4"], ["hot-2"], ["hot-3"]]


def test_an_item_joins_a_group_by_its_first_item_only() -> None:
    assert equivalent(EIGHT, NINE)
    assert equivalent(NINE, ELEVEN)
    assert not equivalent(EIGHT, ELEVEN)
    assert ids(group_equivalent([item(1, EIGHT), item(2, NINE), item(3, ELEVEN)])) == [
        ["hot-1", "hot-2"],
        ["hot-3"],
    ]
    assert ids(group_equivalent([item(1, NINE), item(2, EIGHT), item(3, ELEVEN)])) == [
        ["hot-1", "hot-2", "hot-3"]
    ]


def group_by_comparing_every_group(items: list[HotItem]) -> list[list[HotItem]]:
    """The reference: each item compared with every earlier group's first item, in order."""
    groups: list[list[HotItem]] = []
    for i in items:
        for g in groups:
            if (g[0].mind, g[0].session) == (i.mind, i.session) and equivalent(g[0].content, i.content):
                g.append(i)
                break
        else:
            groups.append([i])
    return groups


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["alice", "bob"]),
            st.sampled_from(["s1", "s2", None]),
            st.sampled_from([EIGHT, NINE, ELEVEN, "I looked at the dashboard", "the dashboard I looked at"]),
        ),
        max_size=12,
    )
)
def test_grouping_by_session_first_groups_as_comparing_every_group_does(
    rows: list[tuple[str, str | None, str]],
) -> None:
    items = [item(n, content, mind=mind, session=session) for n, (mind, session, content) in enumerate(rows)]
    assert group_equivalent(items) == group_by_comparing_every_group(items)


def test_an_important_item_promotes_its_group_even_when_stale() -> None:
    verdict = decide_hot_group([item(1), item(2, importance=0.6)], NOW, DAY)
    assert (verdict.action, verdict.reason) == ("promote", "importance 0.6 reaches 0.6")


def test_a_group_mentioned_twice_in_all_is_promoted() -> None:
    assert decide_hot_group([item(1), item(2)], NOW, DAY).reason == "mentioned 2 times"
    assert decide_hot_group([item(1, mention_count=3)], NOW, DAY).reason == "mentioned 3 times"


def test_a_group_not_worth_a_fact_is_archived_once_its_latest_item_is_stale() -> None:
    old, recent = item(1, importance=0.59), item(2, "I looked at the dashboard", created_at=NOW - DAY)
    assert decide_hot_group([old], NOW, DAY).action == "archive"
    assert decide_hot_group([recent], NOW, DAY).action == "leave", "exactly stale_after old is not stale yet"
    assert decide_hot_group([recent], NOW + timedelta(seconds=1), DAY).action == "archive"


def test_a_promoted_group_becomes_the_fact_of_its_first_item_in_the_first_domain_and_topic_named() -> None:
    group = [item(1), item(2, topic="staging"), item(3, domain="ops", topic="rebuilds")]
    fact = promotion(group)
    assert (fact.mind, fact.domain, fact.topic, fact.content) == (
        "alice",
        "ops",
        "staging",
        "the staging database is rebuilt every Sunday",
    )
    assert fact.source_observation_ids == ["obs-1", "obs-2", "obs-3", "hot-1", "hot-2", "hot-3"]


def test_a_group_naming_no_domain_or_topic_becomes_a_general_fact_of_its_session() -> None:
    fact = promotion([item(1, session="s7", source_observation_ids=())])
    assert (fact.domain, fact.topic, fact.source_observation_ids) == ("general", "session s7", ["hot-1"])
