"""Servers for benchmarks: the configured ones, or embedded ones in a temporary folder."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from noema.runtime.credentials import url_with_credentials
from noema.runtime.embedded import EmbeddedNats, EmbeddedPostgres
from noema.runtime.identities import Identity


@contextlib.contextmanager
def servers(pids: dict[str, int | None] | None = None, keep: Path | None = None) -> Iterator[tuple[str, str]]:
    """(nats_url, database_url): NOEMA_NATS_URL / NOEMA_DATABASE_URL if both set, else embedded.

    ``pids``, when given, receives the embedded servers' process ids (``nats``, ``postgres``), or
    None for external servers, so a benchmark can account for their CPU time. ``keep``: the embedded
    servers' data folder, kept after the run (and used again by a later run with the same folder)
    instead of a temporary one.
    """
    if pids is not None:
        pids.update(nats=None, postgres=None)
    nats_url, db_url = os.environ.get("NOEMA_NATS_URL"), os.environ.get("NOEMA_DATABASE_URL")
    if nats_url and db_url:
        yield nats_url, db_url
        return
    if keep is not None:
        base = keep.resolve()
        base.mkdir(parents=True, exist_ok=True)
    else:
        base = Path(tempfile.mkdtemp(prefix="noema-bench-", dir="/tmp"))
    base.chmod(0o755)
    # Authentication is on, as in the product. Benchmarks use prefixes and schemas of their own (so
    # the shipped per-service identities, made for the `noema` prefix, do not fit): every process of
    # a benchmark connects as one identity that may do anything, which nothing shipped has.
    bench = Identity("noema-bench", uuid.uuid4().hex, None)
    nats_server, pg = EmbeddedNats(base, extra=[bench]), EmbeddedPostgres(base)
    nats_server.start()
    pg.start()
    if pids is not None:
        pids.update(nats=nats_server.pid, postgres=pg.pid)
    try:
        yield url_with_credentials(nats_server.url, bench.user, bench.password), pg.url
    finally:
        nats_server.stop()
        pg.stop()
        if keep is None:
            shutil.rmtree(base, ignore_errors=True)
