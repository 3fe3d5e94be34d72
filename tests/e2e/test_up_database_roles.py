"""`noemactl up` on the embedded default signs every process in to PostgreSQL as a role of its own
kind, none of them a superuser, and the server asks every role for its password."""

from __future__ import annotations

import asyncio
import json
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from tests.e2e.test_noemactl import ctl, start, stop

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def data_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="noema-e2e-", dir="/tmp"))
    yield path / "var"
    shutil.rmtree(path, ignore_errors=True)


async def _sessions(superuser_url: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(superuser_url)
    try:
        rows: list[asyncpg.Record] = await conn.fetch(
            """SELECT a.application_name AS app, a.usename AS role, r.rolsuper AS superuser
               FROM pg_stat_activity a JOIN pg_roles r ON r.oid = a.usesysid
               WHERE a.backend_type = 'client backend' AND a.pid <> pg_backend_pid()"""
        )
    finally:
        await conn.close()
    return rows


async def _refused(url: str) -> str:
    try:
        conn = await asyncpg.connect(url)
    except asyncpg.InvalidPasswordError as exc:
        return str(exc)
    await conn.close()
    return ""


def test_no_process_of_up_connects_as_a_superuser_and_every_role_needs_its_password(data_dir: Path) -> None:
    up = start(data_dir)
    try:
        ctl(data_dir, "observe", "the deploy key rotates on Fridays", "--workspace", "acme", "--mind", "ops")
        ctl(data_dir, "memory", "list", "--workspace", "acme", "--json")
        state = json.loads((data_dir / "noema.json").read_text())
        urls = state["database_urls"]
        assert {urls[k].split("@")[0] for k in urls} == {
            "postgresql://noema_owner",
            "postgresql://noema_projector",
            "postgresql://noema_reader",
        }
        assert all(
            "passfile=" in u and ":" not in u.split("@")[0][len("postgresql://") :] for u in urls.values()
        )
        passwords = data_dir / "pgpass"
        assert stat.S_IMODE(passwords.stat().st_mode) == 0o700
        for f in passwords.iterdir():
            assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
        superuser_url = urls["owner"].replace("noema_owner", "postgres")

        sessions = asyncio.run(_sessions(superuser_url))
        by_app: dict[str, set[str]] = {}
        for s in sessions:
            assert not s["superuser"], f"{s['app']} is connected as the superuser {s['role']}"
            by_app.setdefault(s["app"], set()).add(s["role"])
        assert by_app.get("noema-projector") == {"noema_projector"}
        for app in ("noema-api", "noema-service", "noema-conflicts", "noema-decay", "noema-recall"):
            assert by_app.get(app) == {"noema_reader"}, (app, by_app)

        # No trust any more: without its password file, not even the superuser gets in.
        for url in (superuser_url, urls["reader"]):
            assert "password authentication failed" in asyncio.run(_refused(url.split("&passfile=")[0]))
    finally:
        assert stop(up) == 0
