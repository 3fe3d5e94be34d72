"""`up` after an `up` killed with SIGKILL, and `up` on a port something else holds.

A killed `up` cannot stop the embedded PostgreSQL (``pg_ctl`` daemonised it: it is no child that
dies with its parent) nor remove its records. The next `up` on the data folder adopts that server
and its Ctrl-C stops it; the killed one's record in the registry is gone.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from noema.runtime.embedded import HANDLES_FILE
from tests.faults.instance import Instance, temporary_root

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(420)]


def _registry(root: Path) -> list[dict[str, object]]:
    folder = root / "state" / "noema" / "instances"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


async def test_the_next_up_adopts_and_stops_the_postgres_of_a_killed_up() -> None:
    with temporary_root() as root:
        instance = Instance(root, {"XDG_STATE_HOME": str(root / "state")})
        instance.start()
        try:
            await instance.ready()
            await instance.close_clients()
            assert instance.up is not None
            killed = instance.up.pid
            postmaster = instance.postmaster()
            instance.up.send_signal(signal.SIGKILL)
            instance.up.wait(30)
            assert postmaster.is_running(), "a killed `up` leaves its daemonised postmaster running"
            assert [r["pid"] for r in _registry(root)] == [killed]

            instance.start()  # the same data folder
            await instance.ready()
            await instance.close_clients()
            assert instance.up is not None
            assert [r["pid"] for r in _registry(root)] == [instance.up.pid]
            instance.stop()  # asserts exit 0 and that no postmaster is left
            assert not postmaster.is_running()
            assert not _registry(root)
            assert json.loads((instance.data_dir / "pg" / HANDLES_FILE).read_text()) == []
            assert "adopting the PostgreSQL of a process that died" in instance.log_path.read_text()
        finally:
            await instance.close_clients()
            instance.force_stop()


def test_up_refuses_an_api_port_in_use_before_starting_anything() -> None:
    with temporary_root() as root, socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        instance = Instance(root, {"NOEMA_API_PORT": str(port), "XDG_STATE_HOME": str(root / "state")})
        instance.start()
        assert instance.up is not None
        try:
            code = instance.up.wait(60)
        except subprocess.TimeoutExpired:
            instance.force_stop()
            raise
        log = instance.log_path.read_text()
        assert code == 5, log  # conflict (docs/errors.md)
        refused = [json.loads(line) for line in log.splitlines() if '"port in use"' in line]
        assert refused, log
        assert refused[0]["address"] == f"127.0.0.1:{port}"
        assert "NOEMA_API_PORT" in refused[0]["hint"]
        started = list(instance.data_dir.iterdir()) if instance.data_dir.exists() else []
        assert not started, f"nothing starts before the ports are checked: {started}"
        assert not _registry(root)
