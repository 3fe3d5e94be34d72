"""The text voice scores BM25 from ``memory_postings`` (migration 0009), kept by triggers on ``memories``.

Two things must hold: the postings are exactly the memories' words (through inserts, edits, moves
between workspaces and deletes), and the voice's ranking is BM25 of the memories' own text — the
oracle below unnests each matching memory's search column, as the voice did before the postings.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import msgspec
import pytest

from noema.adapters.postgres import textsearch, voices
from noema.adapters.postgres.knowledge import PostgresKnowledge
from noema.adapters.postgres.textsearch import BROAD_CANDIDATES, selective_query
from noema.adapters.postgres.voices import RecallStore, filter_conditions
from noema.application.preamble import build_preamble
from noema.ports import RecallFilters
from noema_events import MemoryCreated
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.integration.test_recall import NOW, given, memory

pytestmark = pytest.mark.integration

REPOST = """SELECT u.lexeme, m.workspace, m.id AS memory_id,
                   coalesce(array_length(u.positions, 1), 1)
                   * CASE WHEN 'A' = ANY(u.weights) THEN 1.0 ELSE 0.4 END::float8 AS tf,
                   length(m.search) AS dl
            FROM memories m, unnest(m.search) u ORDER BY 1, 2, 3"""
POSTINGS = "SELECT lexeme, workspace, memory_id, tf, dl FROM memory_postings ORDER BY 1, 2, 3"


async def test_postings_stay_exact_through_inserts_edits_moves_and_deletes(harness: Harness) -> None:
    await harness.start(build_projector)
    first, second, third = await given(
        harness,
        memory("the deploy key rotates on Fridays, deploy deploy", participants=["Alice"]),
        memory("billing deploys need a change ticket"),
        memory("the vault holds the deploy key"),
    )

    async def rows(sql: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in await harness.pool.fetch(sql)]

    assert await rows(POSTINGS) == await rows(REPOST)
    assert any(r[0] == "alice" and r[3] == pytest.approx(0.4) for r in await rows(POSTINGS)), (
        "a participant's name counts 0.4 of a content word"
    )
    await harness.pool.execute("UPDATE memories SET content = 'the vault was resealed' WHERE id = $1", first)
    await harness.pool.execute("UPDATE memories SET workspace = 'globex' WHERE id = $1", second)
    await harness.pool.execute("UPDATE memories SET activation = 0.5 WHERE id = $1", third)  # no word change
    assert await rows(POSTINGS) == await rows(REPOST)
    await harness.pool.execute("DELETE FROM memories WHERE id = $1", third)
    assert await rows(POSTINGS) == await rows(REPOST)
    await harness.pool.execute("UPDATE memories SET participants = ARRAY['Bob'] WHERE id = $1", first)
    await harness.pool.execute(  # a multi-row INSERT … SELECT (one statement, many memories)
        """INSERT INTO memories (id, workspace, mind, kind, epistemic_kind, content, memory_type,
                                 confidence, importance, salience, credibility, activation, activation_at,
                                 status, origin_event, origin_seq, created_at, updated_at)
           SELECT id || '-copy', 'initech', mind, kind, epistemic_kind, content || ' again', memory_type,
                  confidence, importance, salience, credibility, activation, activation_at, status,
                  origin_event, origin_seq, created_at, updated_at FROM memories"""
    )
    assert await rows(POSTINGS) == await rows(REPOST)
    await harness.pool.execute("TRUNCATE memories CASCADE")
    assert await rows(POSTINGS) == []


def oracle(
    query: str,
    broad: bool,
    lexemes: list[str],
    f: RecallFilters,
    n: float,
    avgdl: float,
    candidates: int = BROAD_CANDIDATES,
) -> Any:
    """BM25 from each matching memory's own search column (the voice's statement before 0009)."""
    args: list[Any] = [query]
    where = filter_conditions(f, "m", args)
    source = "memories"
    if broad:
        source = f"""(SELECT m.* FROM memories m, to_tsquery('simple', $1) q WHERE m.search @@ q AND {where}
                     ORDER BY coalesce(m.happened_at, m.created_at) DESC LIMIT {candidates})"""
    args += [lexemes, n, avgdl]
    k = len(args)
    sql = f"""WITH hits AS (SELECT m.id, m.search FROM {source} m, to_tsquery('simple', $1) q
                            WHERE m.search @@ q AND {where}),
        terms AS (SELECT h.id, u.lexeme, length(h.search) AS dl,
                         coalesce(array_length(u.positions, 1), 1)
                         * CASE WHEN 'A' = ANY(u.weights) THEN 1.0 ELSE 0.4 END AS tf
                  FROM hits h, unnest(h.search) u WHERE u.lexeme = ANY(${k - 2}::text[])),
        df AS (SELECT lexeme, count(DISTINCT id) AS n FROM terms GROUP BY lexeme)
        SELECT t.id, sum(ln(1 + (greatest(${k - 1}, df.n) - df.n + 0.5) / (df.n + 0.5)) * t.tf * 2.2
                         / (t.tf + 1.2 * (0.25 + 0.75 * t.dl / ${k}))) AS score
        FROM terms t JOIN df USING (lexeme) GROUP BY t.id ORDER BY score DESC, t.id"""
    return sql, args


def other(workspace: str, text: str) -> MemoryCreated:
    return msgspec.structs.replace(memory(text), workspace=workspace)


async def test_the_text_voice_ranks_by_bm25_of_the_memories_own_words(harness: Harness) -> None:
    await harness.start(build_projector)
    texts = [
        "Deploys happen on Tuesdays after the change review",
        "the deploy key rotates on Fridays; the deploy key lives in the vault",
        "billing deploys need a change ticket and a second reviewer",
        "the staging database is refreshed nightly",
        "Alice owns the billing service and reviews its deploys",
        "Bob rotated the vault key after the incident",
    ]
    events = [memory(t, participants=["Alice"] if i % 2 else []) for i, t in enumerate(texts)]
    events += [memory(f"deploy note {i}: the deploy went out", domain="ops") for i in range(30)]
    events += [other("globex", f"deploy key {i} of another tenant") for i in range(20)]
    ids = await given(harness, *events)
    await harness.pool.execute("UPDATE memories SET status = 'archived' WHERE id = $1", ids[1])
    store = await RecallStore.open(harness.pool)
    cases = [
        ("deploy key vault", RecallFilters(workspace="acme")),
        ("Alice billing deploys", RecallFilters(workspace="acme")),
        ("deploy key vault", RecallFilters(workspace="acme", statuses=("active", "archived"))),
        ("deploy notes", RecallFilters(workspace="acme", domains=("ops",))),
        ("deploy key", RecallFilters(workspace=None)),
        ("staging refresh incident", RecallFilters(workspace="acme", mind="ops")),
    ]
    for query, f in cases:
        async with harness.pool.acquire() as conn:
            text_query = await selective_query(conn, query, f.workspace)
            assert text_query is not None
            n, avgdl = await store.term_stats.scope(conn, f.workspace)
            sql, args = oracle(text_query.tsquery, text_query.broad, list(text_query.lexemes), f, n, avgdl)
            expected = [(r["id"], float(r["score"])) for r in await conn.fetch(sql, *args)]
        got = await store.lexical(query, f, limit=len(expected) + 5)
        assert expected, f"the scenario matches {query!r}"
        assert [i for i, _ in got] == [i for i, _ in expected], query
        assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-12), query


async def test_a_query_of_common_words_only_ranks_the_newest_matches_from_postings(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    await harness.start(build_projector)
    # 'deploy' is in more memories than the common-word cut-off, so the query is broad; only the
    # newest matches (fewer here than the real bound, to keep the test small) are ranked.
    monkeypatch.setattr(voices, "BROAD_CANDIDATES", 100)
    events = [
        memory(f"deploy {i}" + " deploy" * (i % 3), happened_at=NOW - timedelta(minutes=i))
        for i in range(520)
    ]
    ids = await given(harness, *events)
    store = await RecallStore.open(harness.pool)
    f = RecallFilters(workspace="acme")
    async with harness.pool.acquire() as conn:
        text_query = await selective_query(conn, "deploy", "acme")
        assert text_query is not None
        assert text_query.broad
        n, avgdl = await store.term_stats.scope(conn, "acme")
        sql, args = oracle(text_query.tsquery, True, list(text_query.lexemes), f, n, avgdl, candidates=100)
        expected = [(r["id"], float(r["score"])) for r in await conn.fetch(sql, *args)]
    got = await store.lexical("deploy", f, limit=600)
    assert len(got) == 100
    assert {i for i, _ in got} <= set(ids[:100])
    assert [i for i, _ in got] == [i for i, _ in expected]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-12)


async def test_a_compound_word_matches_as_the_lexeme_it_is_indexed_as(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "on-call" is indexed as the lexeme 'on-cal' (with 'call'); parsed again by to_tsquery it
    # became a phrase of its parts that no stemmed content holds, so it matched nothing.
    await harness.start(build_projector)
    on_call = await given(harness, *(memory(f"the on-call rota {i} is in the wiki") for i in range(4)))
    await given(harness, *(memory(f"call the vendor about invoice {i}") for i in range(3)))
    store = await RecallStore.open(harness.pool)
    f = RecallFilters(workspace="acme")
    assert {i for i, _ in await store.lexical("who is on-call", f, 10)} >= set(on_call)
    # And the dispatch preamble's facts.
    reads = PostgresKnowledge(harness.pool)
    preamble = await build_preamble(reads, "acme", "ops-agent", "check who is on-call this week")
    assert "the on-call rota" in preamble.text
    # The same word when it is too common to match on by itself: the newest memories holding it.
    monkeypatch.setattr(textsearch, "COMMON_ROWS", 2)
    async with harness.pool.acquire() as conn:
        text_query = await selective_query(conn, "on-call", "acme")
    assert text_query is not None
    assert (text_query.broad, text_query.lexemes) == (True, ("on-cal",))
    assert {i for i, _ in await store.lexical("on-call", f, 10)} == set(on_call)
