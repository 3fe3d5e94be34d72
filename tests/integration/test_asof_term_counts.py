"""Word counts as of a point (migration 0017): the as-of ``memory_terms`` view counts a word's
postings up to the point from its last mark (every 128 postings of a word), and must give exactly
the count of the word's postings of the memories created by then — at every sequence, however the
projector batched the memories, after edits and deletes of a memory's words, and after a bulk
load's rebuild of the marks."""

from __future__ import annotations

import pytest

from noema.adapters.postgres.history import search_path
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.integration.test_recall import given, memory

pytestmark = pytest.mark.integration

DIRECT = """SELECT t.lexeme, (SELECT count(*) FROM {schema}.memory_postings p
                              WHERE p.lexeme = t.lexeme AND p.workspace = t.workspace
                                AND p.origin_seq <= $1)::integer AS memories
            FROM {schema}.memory_terms t WHERE t.workspace = 'acme' ORDER BY 1"""
AS_OF = "SELECT lexeme, memories FROM memory_terms WHERE workspace = 'acme' ORDER BY 1"


async def insert_below(harness: Harness, source: str, origin_seq: int) -> None:
    """A copy of memory ``source`` under a new id, created at ``origin_seq``, inserted after later
    memories: as the projector does when a batch's fact proposals (applied after its memories) are
    older than some of its memories."""
    columns = [
        r["column_name"]
        for r in await harness.pool.fetch(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = 'memories' AND is_generated = 'NEVER' ORDER BY ordinal_position"
        )
    ]
    chosen = ", ".join({"id": "$2", "origin_seq": "$3"}.get(c, c) for c in columns)
    await harness.pool.execute(
        f"INSERT INTO memories ({', '.join(columns)}) SELECT {chosen} FROM memories WHERE id = $1",
        source,
        f"below-{source}",
        origin_seq,
    )


async def _mismatches(harness: Harness) -> list[int]:
    """The sequences at which an as-of count differs from the direct count."""
    schema = harness.settings.db_schema
    last = int(await harness.pool.fetchval("SELECT max(origin_seq) FROM memories")) + 1
    wrong = []
    async with harness.pool.acquire() as conn:
        await conn.execute(f"SET search_path = {search_path(schema)}")
        for seq in range(last + 1):
            await conn.execute(f"SELECT set_config('noema.as_of_seq', '{seq}', false)")
            direct = [tuple(r) for r in await conn.fetch(DIRECT.format(schema=schema), seq)]
            if [tuple(r) for r in await conn.fetch(AS_OF)] != direct:
                wrong.append(seq)
    return wrong


async def test_as_of_word_counts_equal_the_postings_up_to_each_point(harness: Harness) -> None:
    await harness.start(build_projector)
    # 330 memories in batches of unequal size: "deploy" passes 128 and 256 inside batches, the other
    # words stay under 128.
    ids: list[str] = []
    for k, size in enumerate((1, 40, 97, 3, 120, 69)):
        ids += await given(
            harness,
            *(memory(f"deploy batch{k} item{i}" + (" host" if i % 3 == 0 else "")) for i in range(size)),
        )
    marks = int(await harness.pool.fetchval("SELECT count(*) FROM memory_term_marks"))
    assert marks >= 2, "the projector's inserts wrote marks (deploy past 128 and 256)"
    assert await _mismatches(harness) == []

    # A memory's words change (an erasure blanks them) and a memory goes: the marks after its
    # creation follow.
    await harness.pool.execute("UPDATE memories SET content = 'resealed vault' WHERE id = $1", ids[5])
    await harness.pool.execute("DELETE FROM memories WHERE id = $1", ids[200])
    assert await _mismatches(harness) == []
    # Several memories that share a word go in one statement (created at different sequences
    # before the same marks): each mark is corrected by all of them, not by one.
    await harness.pool.execute(
        "DELETE FROM memories WHERE id = ANY($1::text[])", [ids[10], ids[60], ids[150]]
    )
    assert await _mismatches(harness) == []
    # A memory inserted after later ones (below marks already written): they count it too.
    await insert_below(harness, ids[30], 2)
    assert await _mismatches(harness) == []

    # A bulk load writes the marks once at the end, from the postings.
    await harness.pool.execute("SELECT noema_term_marks_rebuilt()")
    assert int(await harness.pool.fetchval("SELECT count(*) FROM memory_term_marks")) >= 2
    assert await _mismatches(harness) == []
