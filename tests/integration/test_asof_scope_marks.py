"""Scope sizes as of a point (migration 0018): recall's count of a workspace's memories and their
average words as of a point is read from the scopes' marks (one per block of 512 sequences a
workspace has memories in) plus the memories after the last mark, and must equal the present's
count over the memories created by then — at every sequence, for one workspace and for all, however
the projector batched the memories, after a change of a memory's words and a delete of several in
one statement, and after a bulk load's rebuild of the marks."""

from __future__ import annotations

import msgspec
import pytest

from noema.adapters.postgres.history import scope_sql, search_path
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.integration.test_asof_term_counts import insert_below
from tests.integration.test_recall import given, memory

pytestmark = pytest.mark.integration

DIRECT = """SELECT count(*) AS n, coalesce(avg(length(search)), 1) AS avgdl FROM {schema}.memories
            WHERE origin_seq <= {schema}.noema_as_of() AND ($1::text IS NULL OR workspace = $1)"""


async def _mismatches(harness: Harness) -> list[tuple[int, str | None]]:
    """The (sequence, workspace) at which the marks' count differs from the direct count."""
    schema = harness.settings.db_schema
    last = int(await harness.pool.fetchval("SELECT max(origin_seq) FROM memories")) + 1
    wrong = []
    async with harness.pool.acquire() as conn:
        await conn.execute(f"SET search_path = {search_path(schema)}")
        for seq in range(last + 1):
            await conn.execute(f"SELECT set_config('noema.as_of_seq', '{seq}', false)")
            for workspace in ("acme", "globex", None):
                marked = await conn.fetchrow(scope_sql(schema), workspace)
                direct = await conn.fetchrow(DIRECT.format(schema=schema), workspace)
                assert marked is not None
                assert direct is not None
                if (int(marked["n"]), marked["avgdl"]) != (int(direct["n"]), direct["avgdl"]):
                    wrong.append((seq, workspace))
    return wrong


async def test_as_of_scope_sizes_equal_the_memories_up_to_each_point(harness: Harness) -> None:
    await harness.start(build_projector)
    # 1,230 memories of two workspaces in batches of unequal size: the stream passes two blocks of
    # 512 sequences inside batches and between them.
    ids: list[str] = []
    for k, (size, workspace) in enumerate(
        ((1, "acme"), (300, "acme"), (5, "globex"), (450, "acme"), (7, "globex"), (467, "acme"))
    ):
        ids += await given(
            harness,
            *(
                msgspec.structs.replace(
                    memory(f"deploy batch{k} item{i}" + (" host rotated" if i % 3 == 0 else "")),
                    workspace=workspace,
                )
                for i in range(size)
            ),
        )
    marks = int(await harness.pool.fetchval("SELECT count(*) FROM memory_scope_marks"))
    assert marks >= 4, "the projector's inserts wrote marks (acme past 512 and 1,024, globex once)"
    assert await _mismatches(harness) == []

    # A memory's words change (an erasure blanks them) and several go in one statement: the marks
    # after their creation follow.
    await harness.pool.execute("UPDATE memories SET content = 'resealed' WHERE id = $1", ids[5])
    gone = [ids[3], ids[200], ids[900]]
    await harness.pool.execute("DELETE FROM memories WHERE id = ANY($1::text[])", gone)
    assert await _mismatches(harness) == []
    # A memory inserted after later ones (below marks already written): they count it too.
    await insert_below(harness, ids[10], 2)
    assert await _mismatches(harness) == []

    # A bulk load writes the marks once at the end, from the memories.
    await harness.pool.execute("SELECT noema_scope_marks_rebuilt()")
    assert int(await harness.pool.fetchval("SELECT count(*) FROM memory_scope_marks")) >= 4
    assert await _mismatches(harness) == []
