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
from noema.runtime.embedded import EmbeddedNats, EmbeddedPostgres, resolve_data_dir
from noema.runtime.identities import Identity


def kept_folder(path: Path) -> Path:
    """``path`` made ready to keep the embedded servers' data in (``servers(keep=...)``), absolute:
    a new or empty folder, or one an earlier run kept servers' data in (it holds ``pg/``). Raises
    ValueError, saying why, for anything else — a file, a folder that cannot be made, one under
    /root when running as root, a Noema installation's data folder (``noema.json``), a folder of
    other files (``/tmp``, a checkout): the servers write their files there and open the folder to
    everyone (0755), and as root every parent of it (the embedded PostgreSQL's user must reach it)."""
    try:
        folder = resolve_data_dir(path)
    except RuntimeError:
        raise ValueError(
            "is under /root; as root the embedded PostgreSQL would open /root to its system user: "
            "give a folder outside /root"
        ) from None
    if folder.exists() and not folder.is_dir():
        raise ValueError("is not a folder")
    if folder.is_dir():
        try:
            names = {p.name for p in folder.iterdir()}
        except OSError as e:
            raise ValueError(f"cannot be read ({e.strerror})") from None
        if "noema.json" in names:
            raise ValueError("is a Noema installation's data folder (noema.json): give a folder of its own")
        if names and "pg" not in names:
            raise ValueError("is not empty and holds no kept servers' data (pg/): give a new or empty folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"cannot be made ({e.strerror})") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError("is not writable")
    return folder


@contextlib.contextmanager
def servers(pids: dict[str, int | None] | None = None, keep: Path | None = None) -> Iterator[tuple[str, str]]:
    """(nats_url, database_url): NOEMA_NATS_URL / NOEMA_DATABASE_URL if both set, else embedded.

    ``pids``, when given, receives the embedded servers' process ids (``nats``, ``postgres``), or
    None for external servers, so a benchmark can account for their CPU time. ``keep``: the embedded
    servers' data folder, kept after the run (and used again by a later run with the same folder)
    instead of a temporary one (:func:`kept_folder`).
    """
    if pids is not None:
        pids.update(nats=None, postgres=None)
    nats_url, db_url = os.environ.get("NOEMA_NATS_URL"), os.environ.get("NOEMA_DATABASE_URL")
    if nats_url and db_url:
        yield nats_url, db_url
        return
    if keep is not None:
        base = kept_folder(keep)
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
