"""Which words a text query matches on: common words left out, and with ``max_terms`` only the
rarest few (retrieve's long observations)."""

from __future__ import annotations

from noema.adapters.postgres.textsearch import COMMON_ROWS, text_query

COUNTS = {"alpha": 40, "beta": 3, "gamma": 0, "delta": 12, "omega": COMMON_ROWS + 1, "zeta": 7}


def test_every_selective_word_is_kept_without_a_limit() -> None:
    query = text_query(COUNTS)
    assert query.lexemes == ("alpha", "beta", "gamma", "delta", "zeta")
    assert not query.broad


def test_a_limit_keeps_the_rarest_words_held_by_some_memory_first() -> None:
    query = text_query(COUNTS, max_terms=3)
    assert query.lexemes == ("beta", "delta", "zeta")  # 3, 12, 7: lexeme order in the query
    assert query.tsquery == "'beta' | 'delta' | 'zeta'"


def test_words_no_memory_holds_are_kept_last_under_a_limit() -> None:
    assert text_query({"rare": 1, "unknown": 0, "often": 90}, max_terms=2).lexemes == ("often", "rare")


def test_a_limit_above_the_word_count_changes_nothing() -> None:
    assert text_query(COUNTS, max_terms=9) == text_query(COUNTS)


def test_common_words_only_still_make_a_broad_query_of_the_rarest() -> None:
    query = text_query({"common": COMMON_ROWS + 5, "commoner": COMMON_ROWS + 50}, max_terms=1)
    assert (query.lexemes, query.broad) == (("common",), True)
