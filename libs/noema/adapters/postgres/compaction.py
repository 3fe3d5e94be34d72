"""Removing erased bytes from PostgreSQL's files (``noemactl compact``, docs/privacy.md).

An erasure blanks rows and destroys keys with ordinary UPDATEs, which leave the old row versions in
the tables' pages, their indexes, the planner's statistics (which sample column values) and the
write-ahead log until PostgreSQL reuses that space. Compaction rewrites all of it now: fresh
statistics, every table and index rewritten (``VACUUM FULL``), then the write-ahead log switched and
checkpointed with recycling off, so the segments that held the old bytes are deleted, not kept for
reuse. The catalogs (statistics) and the log need the superuser, which the embedded default has; with
only the schema owner, the tables are rewritten and the rest is said to be left.
"""

from __future__ import annotations

import asyncpg

__all__ = ["compact"]


async def compact(url: str, superuser: bool) -> list[str]:
    """Compact the database of ``url``; returns the steps done, in order."""
    conn = await asyncpg.connect(url)
    try:
        done = []
        await conn.execute("ANALYZE")
        done.append("statistics refreshed (ANALYZE)")
        await conn.execute("VACUUM FULL")
        done.append(
            "every table and index rewritten (VACUUM FULL)" + ("" if superuser else ", own tables only")
        )
        if superuser:
            await conn.execute("ALTER SYSTEM SET wal_recycle = off")
            await conn.execute("SELECT pg_reload_conf()")
            for _ in range(3):
                await conn.execute("CHECKPOINT")
                await conn.execute("SELECT pg_switch_wal()")
            await conn.execute("CHECKPOINT")
            done.append("write-ahead log switched and checkpointed, old segments deleted (wal_recycle off)")
        return done
    finally:
        await conn.close()
