"""`noemactl status` and `/readyz` tell the truth about a running `noemactl up`: a stopped or killed
worker, NATS or PostgreSQL not answering and a lagging projector each make them fail with a line
naming the part, and they are healthy again once it recovers.

Outages are simulated with SIGSTOP/SIGCONT (a stopped server holds its connections but answers
nothing), so no test depends on anything restarting a server.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from noema.runtime.embedded import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NOEMACTL = [sys.executable, "-m", "noema_cli.main"]
# Short thresholds, so that each outage shows within seconds (the defaults are 20 s, 60 s, 10000).
THRESHOLDS = {
    "NOEMA_HEARTBEAT_INTERVAL": "0.5",
    "NOEMA_HEARTBEAT_STALE": "4",
    "NOEMA_STALL_AFTER": "4",
    "NOEMA_MAX_LAG": "5",
}


@dataclass
class Instance:
    data_dir: Path
    env: dict[str, str]
    up: subprocess.Popen[str]

    def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*NOEMACTL, *args], env=self.env, capture_output=True, text=True, timeout=120)

    def status(self) -> tuple[int, dict[str, str]]:
        """Exit code and the failed checks (name → detail)."""
        assert self.up.poll() is None, f"noemactl up exited with {self.up.returncode}"
        result = self.ctl("status", "--json")
        assert "Traceback" not in result.stderr, result.stderr
        if not result.stdout:  # not running (yet): the error is on stderr
            return result.returncode, {"instance": result.stderr}
        checks = json.loads(result.stdout)["checks"]
        return result.returncode, {c["name"]: c["detail"] for c in checks if not c["ok"]}

    def wait_status(
        self, until: Callable[[int, dict[str, str]], bool], timeout: float = 60
    ) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while True:
            code, failed = self.status()
            if until(code, failed):
                return failed
            if time.monotonic() > deadline:
                raise AssertionError(f"status never got there: exit {code}, failed {failed}")
            time.sleep(0.3)

    def wait_healthy(self) -> None:
        self.wait_status(lambda code, failed: code == 0 and not failed, timeout=120)

    def state(self) -> dict[str, Any]:
        return dict(json.loads((self.data_dir / "noema.json").read_text()))

    def pid(self, service: str) -> int:
        return int(self.state()["services"][service])

    def nats_server(self) -> psutil.Process:
        for child in psutil.Process(self.up.pid).children():
            if "nats-server" in " ".join(child.cmdline()):
                return child
        raise AssertionError("no nats-server under noemactl up")

    def postgres(self) -> list[psutil.Process]:
        """The postmaster (pg_ctl detaches it from `up`) and its backends: a stop must freeze all."""
        postmaster = psutil.Process(int((self.data_dir / "pg" / "postmaster.pid").read_text().split()[0]))
        return [postmaster, *postmaster.children(recursive=True)]

    def readyz(self) -> httpx.Response:
        return httpx.get(f"{self.state()['api_url']}/readyz", timeout=30)

    def observe(self, n: int, tag: str) -> None:
        for i in range(n):
            done = self.ctl("observe", f"{tag} observation {i}", "-w", "acme", "-m", "ops")
            assert done.returncode == 0, done.stderr


@contextlib.contextmanager
def stopped(*procs: psutil.Process) -> Iterator[None]:
    for p in procs:
        p.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        for p in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.send_signal(signal.SIGCONT)


@pytest.fixture(scope="module")
def noema() -> Iterator[Instance]:
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="noema-status-", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA_")}
    env |= THRESHOLDS | {
        "NOEMA_DATA_DIR": str(base / "var"),
        "NOEMA_API_PORT": str(free_port()),
        "NOEMA_EMBEDDER": "none",  # one worker less on a shared machine; embed's heartbeat is the same code
        "NOEMA_LOG_FORMAT": "json",
    }
    up = subprocess.Popen(
        [*NOEMACTL, "up"], env=env, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    instance = Instance(base / "var", env, up)
    try:
        instance.wait_healthy()
        yield instance
    finally:
        up.send_signal(signal.SIGINT)
        up.wait(60)
        shutil.rmtree(base, ignore_errors=True)


def test_status_exits_0_with_a_live_heartbeat_from_every_process(noema: Instance) -> None:
    result = noema.ctl("status")
    assert result.returncode == 0, result.stdout
    for part in ("attend", "projector", "retrieve", "decay", "conflicts", "api", "agent service"):
        assert f"ok {part}: 1 live" in result.stdout
    assert "ok attend consumer: noema_attend" in result.stdout
    assert "ok projector lag: 0 events behind" in result.stdout
    assert noema.readyz().json() == {"status": "ok", "problems": []}


def test_a_stopped_worker_with_work_waiting_is_named_by_status_and_readyz(noema: Instance) -> None:
    with stopped(psutil.Process(noema.pid("attend"))):
        noema.observe(2, "while attend is stopped")
        failed = noema.wait_status(lambda code, f: code != 0 and {"attend", "attend consumer"} <= set(f))
        assert "no heartbeat for" in failed["attend"]
        assert "stalled" in failed["attend consumer"] or "lagging" in failed["attend consumer"]
        ready = noema.readyz()
        assert ready.status_code == 503
        lines = ready.json()["problems"]
        assert any(line.startswith("attend: no heartbeat for") for line in lines), lines
        assert any(line.startswith("attend consumer: noema_attend") for line in lines), lines
        # A probe for another process does not wait for attend.
        other = noema.ctl("status", "--expect", "decay")
        assert other.returncode == 0, other.stdout
        assert "attend" not in other.stdout
    noema.wait_healthy()


def test_a_stopped_retrieve_worker_shows_its_backlog_until_it_runs_and_drains(noema: Instance) -> None:
    def retrieve_row() -> dict[str, Any]:
        report = json.loads(noema.ctl("status", "--json").stdout)
        [row] = [w for w in report["workers"] if w["worker"] == "retrieve"]
        return dict(row)

    with stopped(psutil.Process(noema.pid("retrieve"))):
        noema.observe(3, "while retrieve is stopped")
        failed = noema.wait_status(lambda code, f: code != 0 and "retrieve consumer" in f)
        assert failed["retrieve consumer"].startswith("noema_retrieve stalled: ")
        row = retrieve_row()
        assert (row["state"], row["live"], row["ok"]) == ("down", 0, False)
        assert row["backlog"] > 0
        human = noema.ctl("status")
        assert human.returncode == 1
        [line] = [x for x in human.stdout.splitlines() if x.startswith("│ retrieve ")]
        assert line.split("│")[3].strip() == str(row["backlog"])  # worker | live | backlog | ...
        assert "down" in line
        ready = noema.readyz()
        assert ready.status_code == 503
        assert any(p.startswith("retrieve consumer: noema_retrieve") for p in ready.json()["problems"])
    noema.wait_healthy()
    row = retrieve_row()
    assert row["backlog"] == 0
    assert row["rate"] > 0  # it worked off the 3 observations within the last minute


def test_an_unknown_process_kind_is_bad_input(noema: Instance) -> None:
    wrong = noema.ctl("status", "--expect", "atend")
    assert wrong.returncode == 2
    assert "--expect atend: not a process kind" in wrong.stderr
    assert "Traceback" not in wrong.stderr


def test_a_killed_worker_is_named_until_it_runs_again(noema: Instance) -> None:
    supervisor = psutil.Process(noema.up.pid)
    with stopped(supervisor):  # so that nothing restarts the worker meanwhile
        os.kill(noema.pid("retrieve"), signal.SIGKILL)
        failed = noema.wait_status(lambda code, f: code != 0 and {"retrieve", "process retrieve"} <= set(f))
        assert "not running" in failed["process retrieve"]
        assert "no heartbeat for" in failed["retrieve"]
    noema.wait_healthy()  # the supervisor restarted it


def test_nats_not_answering_makes_status_and_readyz_fail(noema: Instance) -> None:
    with stopped(noema.nats_server()):
        failed = noema.wait_status(lambda code, f: code != 0 and "nats" in f)
        assert noema.ctl("status").stdout.count("FAIL nats:") == 1
        assert failed.keys() <= {"nats", "api http"}  # nothing else can be judged without NATS
        ready = noema.readyz()
        assert ready.status_code == 503
        assert [line for line in ready.json()["problems"] if line.startswith("nats:")]
    noema.wait_healthy()


def test_postgres_not_answering_makes_status_fail(noema: Instance) -> None:
    with stopped(*noema.postgres()):
        failed = noema.wait_status(lambda code, f: code != 0 and "postgres" in f)
        assert "no answer" in failed["postgres"]
        ready = noema.readyz()
        assert ready.status_code == 503
        assert "postgres: no answer within 2 s" in ready.json()["problems"]
    noema.wait_healthy()


def test_a_projector_lagging_beyond_the_threshold_is_named(noema: Instance) -> None:
    with stopped(psutil.Process(noema.pid("projector"))):
        noema.observe(4, "while the projector is stopped")
        failed = noema.wait_status(lambda code, f: code != 0 and "projector lag" in f)
        assert "events behind" in failed["projector lag"]
        assert "threshold 5)" in failed["projector lag"]
    noema.wait_healthy()
