"""A projection version switched in under `noemactl up` as a user runs it: the running projector
(signed in as its role) carries on in the new version without a restart, the owner role's commands
do the rebuild and the switch, and replay matches afterwards."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_noemactl import NOEMACTL, _env, ctl, stop, wait_healthy

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def data_dir() -> Iterator[Path]:
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="noema-e2e-", dir="/tmp"))
    yield path / "var"
    shutil.rmtree(path, ignore_errors=True)


def facts(data_dir: Path) -> list[str]:
    listed = json.loads(ctl(data_dir, "fact", "list", "-w", "acme", "--json").stdout)
    items = listed["items"] if isinstance(listed, dict) else listed
    return sorted(f["content"] for f in items)


def propose(data_dir: Path, n: int, start: int) -> None:
    for i in range(start, start + n):
        ctl(data_dir, "fact", "propose", f"Host {i} is patched", "-w", "acme", "-d", "ops", "-t", f"host-{i}")


def test_a_version_switched_in_under_up_is_followed_by_the_running_projector(data_dir: Path) -> None:
    log = data_dir.parent / "up.log"
    with log.open("w") as errors:
        up = subprocess.Popen([*NOEMACTL, "up"], env=_env(data_dir), text=True, stdout=errors, stderr=errors)
    try:
        wait_healthy(data_dir, up)
        propose(data_dir, 3, 0)
        built = json.loads(ctl(data_dir, "projection", "rebuild", "--json").stdout)
        assert (built["version"], built["schema"]) == (2, "noema_v2")
        propose(data_dir, 2, 3)  # after the rebuild: the switch catches the version up
        switched = json.loads(ctl(data_dir, "projection", "switch", "2", "--json").stdout)
        assert (switched["schema"], switched["previous"]["schema"]) == ("noema", "noema_v1")
        propose(data_dir, 2, 5)  # after the switch: the running projector writes the new version

        expected = sorted(f"Host {i} is patched" for i in range(7))
        deadline = time.monotonic() + 20
        while facts(data_dir) != expected and time.monotonic() < deadline:
            time.sleep(0.2)
        assert facts(data_dir) == expected

        # Vectors embedded after the switch land in the new version and its model's index (the
        # projector creates it through the version's own noema_ensure_vector_index).
        def by_vector() -> set[str]:
            found = ctl(
                data_dir, "memory", "search", "host 6 patched", "-w", "acme", "--mode", "vector", "--json"
            )
            return {r["content"] for r in json.loads(found.stdout)["results"]}

        deadline = time.monotonic() + 60
        while "Host 6 is patched" not in by_vector() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert "Host 6 is patched" in by_vector()
        replayed = json.loads(ctl(data_dir, "replay", "--json").stdout)
        assert replayed["match"] is True
        wait_healthy(data_dir, up, timeout=30)
        status = json.loads(ctl(data_dir, "projection", "status", "--json").stdout)
        assert [(v["version"], v["state"]) for v in status["versions"]] == [(1, "retired"), (2, "active")]
        assert status["versions"][1]["lag"] == 0
    finally:
        assert stop(up) == 0
    assert "service exited" not in log.read_text(), "no worker was restarted by the switch"
