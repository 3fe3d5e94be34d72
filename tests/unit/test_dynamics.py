"""Properties of memory dynamics: decay never deletes, importance slows it, Weibull is ordered."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from noema.domain.dynamics import (
    ACTIVATION_FLOOR,
    CONFIDENCE_CAP,
    MENTION_RATE,
    decay_activation,
    initial_confidence,
    mention_confidence,
    mention_rate,
    reinforce_activation,
    weibull_survival,
)
from noema_events.vocabulary import MEMORY_TYPE_NAMES, MEMORY_TYPES, VERACITIES, VERACITY_WEIGHT

activation = st.floats(min_value=ACTIVATION_FLOOR, max_value=1.0)
importance = st.floats(min_value=0.0, max_value=1.0)
days = st.floats(min_value=0.0, max_value=100_000.0)


@given(activation, importance, days, days)
def test_activation_never_increases_between_retrievals(a: float, imp: float, t1: float, t2: float) -> None:
    early, late = sorted((t1, t2))
    assert decay_activation(a, late, imp) <= decay_activation(a, early, imp) <= a


@given(activation, importance, days)
def test_activation_stays_strictly_positive_however_long(a: float, imp: float, t: float) -> None:
    assert decay_activation(a, t, imp) >= ACTIVATION_FLOOR > 0


@given(activation, importance, importance, st.floats(min_value=0.01, max_value=1000.0))
def test_more_important_memories_decay_slower(a: float, i1: float, i2: float, t: float) -> None:
    low, high = sorted((i1, i2))
    assert decay_activation(a, t, high) >= decay_activation(a, t, low)


def test_the_half_life_is_fourteen_days_for_unimportant_memories() -> None:
    assert math.isclose(decay_activation(1.0, 14.0, 0.0), 0.5)
    assert math.isclose(decay_activation(1.0, 28.0, 1.0), 0.5)  # importance 1 doubles the half-life


@given(activation)
def test_retrieval_raises_activation_within_bounds(a: float) -> None:
    assert a <= reinforce_activation(a) <= 1.0


@given(st.sampled_from(MEMORY_TYPE_NAMES), st.floats(min_value=0.0, max_value=10_000.0))
def test_weibull_factors_are_in_the_unit_interval(memory_type: str, age: float) -> None:
    assert 0.0 < weibull_survival(memory_type, age) <= 1.0


@given(st.sampled_from(MEMORY_TYPE_NAMES), days, days)
def test_weibull_factors_never_grow_with_age(memory_type: str, t1: float, t2: float) -> None:
    early, late = sorted((t1, t2))
    assert weibull_survival(memory_type, late) <= weibull_survival(memory_type, early)


def test_memory_types_are_ordered_as_the_type_table_says_at_thirty_days() -> None:
    factors = [weibull_survival(t, 30.0) for t in MEMORY_TYPES]
    assert factors == sorted(factors, reverse=True)
    assert weibull_survival("profile", 10_000.0) == 1.0
    assert weibull_survival("commitment", 30.0) < 0.01 < weibull_survival("fact", 30.0)
    assert set(MEMORY_TYPES) == set(MEMORY_TYPE_NAMES)


@given(st.sampled_from(VERACITIES), st.lists(st.sampled_from(VERACITIES), max_size=200))
def test_confidence_bumps_are_bounded_below_one_and_monotone(first: str, mentions: list[str]) -> None:
    c = initial_confidence(first)
    for veracity in mentions:
        bumped = mention_confidence(c, veracity)
        assert c <= bumped <= CONFIDENCE_CAP < 1.0
        c = bumped


def test_a_stated_mention_raises_confidence_more_than_a_tool_output() -> None:
    assert (
        mention_confidence(0.5, "stated")
        > mention_confidence(0.5, "inferred")
        > mention_confidence(0.5, "tool")
    )
    assert initial_confidence("inferred") == 0.7


@given(st.floats(0.0, 0.99), st.sampled_from(VERACITIES), st.integers(1, 20))
def test_n_mentions_at_once_raise_confidence_as_n_single_mentions_do(c: float, veracity: str, n: int) -> None:
    one_by_one = c
    for _ in range(n):
        one_by_one = mention_confidence(one_by_one, veracity)
    assert math.isclose(mention_confidence(c, veracity, n), one_by_one, abs_tol=1e-9)


def test_a_single_mention_uses_exactly_the_rate_stored_events_were_projected_with() -> None:
    for veracity in VERACITIES:
        assert mention_rate(veracity) == MENTION_RATE * VERACITY_WEIGHT[veracity]
