"""The embedded PostgreSQL reads back after a restart what its shared buffers held (pg_prewarm's
autoprewarm, preloaded by ``noema.runtime.embedded.write_server_settings``): a restart does not
leave recall reading its vector index from disk page by page again (docs/benchmarks.md)."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from noema.runtime.embedded import EmbeddedPostgres

pytestmark = pytest.mark.integration

PAGES = "SELECT count(*) FROM pg_buffercache WHERE relfilenode = pg_relation_filenode('held')"


async def _held_pages(url: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval(PAGES))
    finally:
        await conn.close()


@pytest.fixture
def base() -> Iterator[Path]:
    """A data folder outside /root that the server's own user can reach."""
    folder = Path(tempfile.mkdtemp(prefix="noema-prewarm-", dir="/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


async def test_a_restarted_embedded_server_reads_back_what_its_buffers_held(base: Path) -> None:
    pg = EmbeddedPostgres(base)
    try:
        pg.start()
        conn = await asyncpg.connect(pg.url)
        try:
            await conn.execute("CREATE EXTENSION pg_buffercache")
            # About 12 MB: read whole into shared buffers (no ring buffer below a quarter of them).
            await conn.execute(
                "CREATE TABLE held AS SELECT g, repeat('x', 500) AS pad FROM generate_series(1, 20000) g"
            )
            await conn.execute("SELECT count(*) FROM held")
            before = int(await conn.fetchval(PAGES))
        finally:
            await conn.close()
        assert before > 1000
        pg.stop()
        pg.start()
        # Read back in the background after the start; nothing has read the table since.
        deadline = time.monotonic() + 60
        after = await _held_pages(pg.url)
        while after < before and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            after = await _held_pages(pg.url)
        assert after >= before, f"{after} of the table's {before} pages in shared buffers after the restart"
    finally:
        pg.stop()
