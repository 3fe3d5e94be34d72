"""Which SQL statements a benchmark's PostgreSQL spends its time on (``pg_stat_statements``).

The embedded server is prepared before `noemactl up` starts it — the module must be loaded at server
start — and the benchmark resets and reads the statistics around each phase as the superuser (the
password file beside the roles' in the data folder). A diagnostic only: the product never loads it.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any

import asyncpg

from noema.runtime.embedded import EmbeddedPostgres

__all__ = ["Statements", "preload"]

TOP = 12
"""Statements reported per phase, by total execution time."""


def preload(data_dir: Path) -> None:
    """Initialise the embedded PostgreSQL of ``data_dir`` with ``pg_stat_statements`` preloaded
    (it takes effect when `up` starts the server)."""
    saved = os.environ.get("XDG_RUNTIME_DIR")  # the embedded server's start sets its own
    pg = EmbeddedPostgres(data_dir)
    pg.start()
    try:
        asyncio.run(
            _execute(
                pg.url,
                "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'",
                "ALTER SYSTEM SET pg_stat_statements.track = 'all'",
            )
        )
    finally:
        pg.stop()
        if saved is None:
            os.environ.pop("XDG_RUNTIME_DIR", None)
        else:
            os.environ["XDG_RUNTIME_DIR"] = saved


async def _execute(url: str, *statements: str) -> None:
    """Run ``statements`` in order on one connection of ``url``."""
    conn = await asyncpg.connect(url)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


def superuser_url(owner_url: str, data_dir: Path) -> str:
    """The superuser's URL: the schema owner's with the superuser's name and password file."""
    url = re.sub(r"^postgresql://[^@]*@", f"postgresql://{EmbeddedPostgres.SUPERUSER}@", owner_url)
    return re.sub(r"passfile=[^&]*", f"passfile={data_dir / 'pgpass' / EmbeddedPostgres.SUPERUSER}", url)


class Statements:
    """Reset and read ``pg_stat_statements`` of one instance."""

    def __init__(self, owner_url: str, data_dir: Path) -> None:
        self._url = superuser_url(owner_url, data_dir)

    async def reset(self) -> None:
        await _execute(
            self._url,
            "CREATE EXTENSION IF NOT EXISTS pg_stat_statements SCHEMA public",
            "SELECT pg_stat_statements_reset()",
        )

    async def top(self) -> dict[str, Any]:
        """The total execution time, and the ``TOP`` statements by it (with their share)."""
        conn = await asyncpg.connect(self._url)
        try:
            total = float(
                await conn.fetchval("SELECT coalesce(sum(total_exec_time), 0) FROM pg_stat_statements") or 0
            )
            rows = await conn.fetch(
                """SELECT r.rolname, s.calls, s.total_exec_time, s.mean_exec_time, s.rows, s.query
                   FROM pg_stat_statements s LEFT JOIN pg_roles r ON r.oid = s.userid
                   ORDER BY s.total_exec_time DESC LIMIT $1""",
                TOP,
            )
        finally:
            await conn.close()
        return {
            "total_exec_ms": round(total, 1),
            "statements": [
                {
                    "role": r["rolname"],
                    "calls": r["calls"],
                    "total_ms": round(float(r["total_exec_time"]), 1),
                    "share": round(float(r["total_exec_time"]) / total, 3) if total else 0.0,
                    "mean_ms": round(float(r["mean_exec_time"]), 3),
                    "rows": r["rows"],
                    "query": " ".join(str(r["query"]).split())[:240],
                }
                for r in rows
            ],
        }
