"""bench.recall_latency's copied workspaces on a kept store (``--data``): a copy is made whole or
not at all, so a run interrupted while copying never leaves a workspace whose memories a later run
takes as made (its count is right) but that lacks their vectors — timed then as semantic searches
over nothing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from bench.recall_latency import _copy_workspace

from tests.conftest import Harness

pytestmark = pytest.mark.integration

T0 = datetime(2026, 12, 7, tzinfo=UTC)


async def _seed(harness: Harness, n: int) -> None:
    for i in range(n):
        await harness.pool.execute(
            """INSERT INTO memories (id, workspace, mind, kind, epistemic_kind, content, confidence,
                   importance, salience, credibility, memory_type, activation, activation_at,
                   origin_event, origin_seq, created_at, updated_at)
               VALUES ($1, 'bench', 'm', 'episodic', 'observation', 'words', 0.9, 0.5, 0.5, 0.8,
                       'observation', 1.0, $2, 'e', $3, $2, $2)""",
            f"m{i}",
            T0,
            i + 1,
        )
        await harness.pool.execute(
            """INSERT INTO memory_embeddings (memory_id, model, dimensions, embedding, origin_event,
                   origin_seq, created_at)
               VALUES ($1, 'bench', 3, '[1,0,0]', 'e', $2, $3)""",
            f"m{i}",
            i + 1,
            T0,
        )


async def test_a_copy_interrupted_before_its_vectors_leaves_no_workspace_behind(harness: Harness) -> None:
    await _seed(harness, 3)
    schema, url = harness.settings.db_schema, harness.settings.database_url
    # The copy's vectors fail (as a run stopped between its statements would leave them unwritten).
    await harness.pool.execute(
        """CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS
           $$BEGIN RAISE EXCEPTION 'interrupted'; END$$;
           CREATE TRIGGER refuse BEFORE INSERT ON memory_embeddings FOR EACH ROW EXECUTE FUNCTION refuse()"""
    )
    with pytest.raises(Exception, match="interrupted"):
        await _copy_workspace(url, schema, "small", 2)
    count = "SELECT count(*) FROM memories WHERE workspace = 'small'"
    assert await harness.pool.fetchval(count) == 0
    await harness.pool.execute("DROP TRIGGER refuse ON memory_embeddings")
    await _copy_workspace(url, schema, "small", 2)  # the later run makes it, whole
    assert await harness.pool.fetchval(count) == 2
    vectors = """SELECT count(*) FROM memory_embeddings e JOIN memories m ON m.id = e.memory_id
                 WHERE m.workspace = 'small'"""
    assert await harness.pool.fetchval(vectors) == 2
