"""Servers for benchmarks: the configured ones, or embedded ones in a temporary folder."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from noema.embedded import EmbeddedNats, EmbeddedPostgres


@contextlib.contextmanager
def servers(pids: dict[str, int | None] | None = None) -> Iterator[tuple[str, str]]:
    """(nats_url, database_url): NOEMA_NATS_URL / NOEMA_DATABASE_URL if both set, else embedded.

    ``pids``, when given, receives the embedded servers' process ids (``nats``, ``postgres``), or
    None for external servers, so a benchmark can account for their CPU time.
    """
    if pids is not None:
        pids.update(nats=None, postgres=None)
    nats_url, db_url = os.environ.get("NOEMA_NATS_URL"), os.environ.get("NOEMA_DATABASE_URL")
    if nats_url and db_url:
        yield nats_url, db_url
        return
    base = Path(tempfile.mkdtemp(prefix="noema-bench-", dir="/tmp"))
    base.chmod(0o755)
    nats_server, pg = EmbeddedNats(base), EmbeddedPostgres(base)
    nats_server.start()
    pg.start()
    if pids is not None:
        pids.update(nats=nats_server.pid, postgres=pg.pid)
    try:
        yield nats_server.url, pg.url
    finally:
        nats_server.stop()
        pg.stop()
        shutil.rmtree(base, ignore_errors=True)
