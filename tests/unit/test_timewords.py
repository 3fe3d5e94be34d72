"""The time a question names, read against the timeline's present."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from noema.domain.timewords import named_window, names_time

ANCHOR = datetime(2023, 11, 20, 15, 0, tzinfo=UTC)  # a Monday


def day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


@pytest.mark.parametrize(
    ("query", "inside", "outside"),
    [
        ("What did Nate cook on 25 May, 2022?", day(2022, 5, 25), day(2022, 5, 27)),
        ("Which book on 8th December, 2023?", day(2023, 12, 8), day(2023, 12, 10)),
        ("What game on November 7, 2022?", day(2022, 11, 7), day(2022, 11, 9)),
        ("the photo shared on December 1,2023", day(2023, 12, 1), day(2023, 11, 29)),
        ("What event is planned in June 2022?", day(2022, 6, 15), day(2022, 7, 15)),
        ("achievements in January, 2024", day(2024, 1, 31), day(2023, 1, 15)),
        # A month alone: the present's, or the last one before it.
        ("What deal did John get in December?", day(2022, 12, 5), day(2023, 12, 5)),
        ("Where did they go camping in June?", day(2023, 6, 20), day(2022, 6, 20)),
        ("What did the team ship in 2023?", day(2023, 3, 1), day(2024, 1, 2)),
        ("What broke yesterday?", day(2023, 11, 19), day(2023, 11, 17)),
        ("Who deployed last week?", day(2023, 11, 14), day(2023, 11, 21)),
        ("the decision taken last month", day(2023, 10, 10), day(2023, 11, 2)),
    ],
)
def test_a_named_time_is_a_window_around_it(query: str, inside: datetime, outside: datetime) -> None:
    window = named_window(query, ANCHOR)
    assert window is not None
    assert names_time(query)
    assert window.holds(inside.replace(hour=10))
    assert not window.holds(outside.replace(hour=10))


@pytest.mark.parametrize(
    "query",
    ["When did Caroline go to the support group?", "what may happen to the cache", "the 2023 roadmap", ""],
)
def test_no_time_named_no_window(query: str) -> None:
    assert named_window(query, ANCHOR) is None
    assert not names_time(query)


def test_an_impossible_date_names_no_window() -> None:
    assert named_window("on 31 February, 2023", ANCHOR) is None
