"""The product as a user starts it: `noemactl up` on the embedded default, then the CLI."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from noema.runtime.embedded import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NOEMACTL = [sys.executable, "-m", "noema_cli.main"]
API_PORTS: dict[str, int] = {}


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA_")}
    env["NOEMA_DATA_DIR"] = str(data_dir)
    env["NOEMA_API_PORT"] = str(API_PORTS.setdefault(str(data_dir), free_port()))
    return env


def ctl(data_dir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [*NOEMACTL, *args], env=_env(data_dir), capture_output=True, text=True, timeout=120
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"noemactl {' '.join(args)} failed ({result.returncode}): {result.stderr}{result.stdout}"
        )
    return result


def wait_healthy(data_dir: Path, up: subprocess.Popen[str], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert up.poll() is None, f"noemactl up exited with {up.returncode}"
        if ctl(data_dir, "status", check=False).returncode == 0:
            return
        time.sleep(0.2)
    raise AssertionError(f"not healthy within {timeout}s: {ctl(data_dir, 'status', check=False).stdout}")


def start(data_dir: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``noemactl up`` in ``data_dir``, healthy; ``env`` replaces the environment's variables."""
    up = subprocess.Popen(
        [*NOEMACTL, "up"],
        env=_env(data_dir) | (env or {}),
        text=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_healthy(data_dir, up)
    return up


def stop(up: subprocess.Popen[str]) -> int:
    children = psutil.Process(up.pid).children(recursive=True)
    up.send_signal(signal.SIGINT)
    code = up.wait(60)
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, f"left running after stop: {[p.cmdline() for p in alive]}"
    return code


@pytest.fixture
def data_dir() -> Iterator[Path]:
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="noema-e2e-", dir="/tmp"))
    yield path / "var"
    shutil.rmtree(path, ignore_errors=True)


def test_up_observe_search_replay_status_and_a_clean_stop(data_dir: Path) -> None:
    up = start(data_dir)
    try:
        ctl(data_dir, "observe", "the deploy key rotates on Fridays", "--workspace", "acme", "--mind", "ops")
        deadline = time.monotonic() + 2.0
        hits: list[dict[str, Any]] = []
        while not hits and time.monotonic() < deadline:
            hits = json.loads(
                ctl(
                    data_dir, "memory", "search", "deploy key", "-w", "acme", "--mode", "keyword", "--json"
                ).stdout
            )["results"]
        assert hits, "the observation was not searchable within 2 s"
        assert hits[0]["content"] == "the deploy key rotates on Fridays"
        shown = json.loads(ctl(data_dir, "memory", "show", hits[0]["id"][:8], "--json").stdout)
        assert shown["origin"]["id"] == hits[0]["memory"]["origin_event"]
        assert shown["origin"]["type"] == "memory.created.v1"

        human = ctl(data_dir, "memory", "search", "deploy key").stdout
        assert "memory.created #" in human
        explained = ctl(data_dir, "memory", "search", "deploy key", "--explain").stdout
        assert "intent: lookup" in explained
        assert "semantic" in explained

        replayed = json.loads(ctl(data_dir, "replay", "--json").stdout)
        assert replayed["match"] is True
        assert replayed["checksum"] == replayed["live_checksum"]
        assert replayed["events"] >= 2

        bad = ctl(data_dir, "observe", "", "--workspace", "acme", "--mind", "ops", check=False)
        assert bad.returncode == 2
        assert "content" in bad.stderr

        again = ["observe", "--workspace", "scratch", "--mind", "ops", "--id", "obs-once", "--json"]
        first = json.loads(ctl(data_dir, *again[:1], "first text", *again[1:]).stdout)
        second = json.loads(ctl(data_dir, *again[:1], "other text", *again[1:]).stdout)
        assert (first["duplicate"], second["duplicate"]) == (False, True)
        assert second["seq"] == first["seq"]  # the id was stored once; the second text was not
        assert "Traceback" not in bad.stderr

        second = subprocess.run(
            [*NOEMACTL, "up"], env=_env(data_dir), capture_output=True, text=True, timeout=60
        )
        assert second.returncode == 5  # conflict: the data folder is in use
        assert "already running" in second.stderr
        nats_url = json.loads((data_dir / "noema.json").read_text())["nats_url"]
    finally:
        assert stop(up) == 0

    down = ctl(data_dir, "status", check=False)
    assert down.returncode != 0
    assert "noemactl up" in down.stderr

    up = start(data_dir)  # a second `up` reuses the data, and NATS's address: clients keep working
    try:
        assert json.loads((data_dir / "noema.json").read_text())["nats_url"] == nats_url
        listed = json.loads(ctl(data_dir, "memory", "list", "--workspace", "acme", "--json").stdout)
        assert [m["content"] for m in listed["items"]] == ["the deploy key rotates on Fridays"]
    finally:
        assert stop(up) == 0
    assert_no_permission_refused(data_dir)


def assert_no_permission_refused(data_dir: Path) -> None:
    """Every Noema process did its work with its own identity: the server refused none of them."""
    refused = [line for line in (data_dir / "nats.log").read_text().splitlines() if "Violation" in line]
    assert not refused, "\n".join(refused)


def test_up_runs_authenticated_and_an_added_agent_reaches_its_own_memory(data_dir: Path) -> None:
    import asyncio

    import nats
    import nats.errors

    from noema_sdk import NoemaClient

    up = start(data_dir)
    try:
        for name in ("noema.json", "nats-auth.json", "nats.conf"):
            assert (data_dir / name).stat().st_mode & 0o777 == 0o600, name
        added = json.loads(
            ctl(data_dir, "agent", "add", "-w", "acme", "-a", "alice", "-r", "engineer", "--json").stdout
        )
        assert added["user"] == "agent.acme.alice"
        listed = json.loads(ctl(data_dir, "agent", "list", "--json").stdout)
        assert [(a["workspace"], a["agent"]) for a in listed] == [("acme", "alice")]
        assert "password" not in listed[0]
        operator_password = json.loads((data_dir / "nats-auth.json").read_text())["services"]["operator"]
        assert operator_password not in ctl(data_dir, "status").stdout

        async def as_alice() -> list[str]:
            with contextlib.suppress(nats.errors.Error):  # no credentials: refused
                anonymous = await nats.connect(added["url"], allow_reconnect=False, error_cb=_quiet)
                await anonymous.close()
                raise AssertionError("an unauthenticated client was let in")
            async with NoemaClient.connect(
                added["url"],
                user=added["user"],
                password=added["password"],
                workspace="acme",
                agent="alice",
                role="engineer",
            ) as alice:
                await alice.publish_observation("the staging database restarts at noon")
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    found = await alice.search_memory("staging database", mode="keyword")
                    if found.results:
                        return [hit.content for hit in found.results]
                    await asyncio.sleep(0.2)
            return []

        assert asyncio.run(as_alice()) == ["the staging database restarts at noon"]
        removed = ctl(data_dir, "agent", "remove", "-w", "acme", "-a", "alice", "--json")
        assert json.loads(removed.stdout)["reloaded"] is True
    finally:
        assert stop(up) == 0
    assert_no_permission_refused(data_dir)


async def _quiet(_: Exception) -> None:
    return None


def test_status_explains_what_is_wrong_when_nothing_runs(tmp_path: Path) -> None:
    result = ctl(tmp_path / "nowhere", "status", check=False)
    assert result.returncode != 0
    assert "no running Noema" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_mcp_server_and_api_token_in_another_folder_find_up_and_up_unregisters_on_stop(
    data_dir: Path, tmp_path: Path
) -> None:
    import asyncio

    from mcp import ClientSession, StdioServerParameters, stdio_client

    home, host_dir = tmp_path / "home", tmp_path / "host"
    host_dir.mkdir()
    registry = home / ".local" / "state" / "noema" / "instances"
    up = start(data_dir, {"HOME": str(home), "XDG_STATE_HOME": ""})
    try:
        [entry] = registry.iterdir()
        assert json.loads(entry.read_text())["data_dir"] == str(data_dir.resolve())
        # As a host starts it: its own folder, a minimal environment, no --data-dir.
        serve = [*NOEMACTL[1:], "mcp", "serve", "--workspace", "acme", "--agent", "alice"]
        params = StdioServerParameters(
            command=sys.executable,
            args=serve,
            env={"PATH": os.environ["PATH"], "HOME": str(home)},
            cwd=host_dir,
        )

        async def as_a_host() -> list[str]:
            async with stdio_client(params) as (read, write), ClientSession(read, write) as mcp:
                await mcp.initialize()
                proposed = await mcp.call_tool(
                    "propose_fact",
                    {"domain": "ops", "topic": "deploys", "content": "Deploys happen on Fridays"},
                )
                assert not proposed.is_error, proposed.content
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    found = await mcp.call_tool("search_memory", {"query": "deploys", "mode": "keyword"})
                    assert not found.is_error, found.content
                    assert found.structured_content is not None
                    if hits := found.structured_content["results"]:
                        return [hit["content"] for hit in hits]
                    await asyncio.sleep(0.2)
            return []

        assert asyncio.run(as_a_host()) == ["Deploys happen on Fridays"]

        # `api token` there prints the running API's token, and creates no ./var of its own.
        printed = subprocess.run(
            [*NOEMACTL, "api", "token"],
            env={"PATH": os.environ["PATH"], "HOME": str(home)},
            cwd=host_dir,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert printed.returncode == 0, printed.stderr
        assert printed.stderr == ""
        assert not (host_dir / "var").exists()
        api = f"http://127.0.0.1:{API_PORTS[str(data_dir)]}/v1/memories?workspace=acme"
        request = urllib.request.Request(api, headers={"Authorization": f"Bearer {printed.stdout.strip()}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
    finally:
        assert stop(up) == 0
    assert list(registry.iterdir()) == []


def test_api_token_with_no_instance_running_says_it_created_the_tokens_file(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home")}
    first = subprocess.run(
        [*NOEMACTL, "api", "token"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert first.returncode == 0, first.stderr
    tokens = tmp_path / "var" / "api-tokens.json"
    assert f"created {tokens}" in first.stderr
    again = subprocess.run(
        [*NOEMACTL, "api", "token"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert (again.stdout, again.stderr) == (first.stdout, "")


def _eventually_json(data_dir: Path, *args: str, until: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = json.loads(ctl(data_dir, *args, "--json").stdout)
        if until(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def test_up_settles_a_contradiction_within_the_conflicts_identity_and_replay_matches(data_dir: Path) -> None:
    # What the knowledge commands answer (facts, conflicts, grants and strict mode, --as-of, policies,
    # notes, the preamble, a retraction) is tested over the in-memory composition, with the conflicts
    # decision run there: tests/unit/test_cli_knowledge_in_memory.py. Here, what needs `noemactl up`:
    # its conflicts worker settles a contradiction under its own NATS identity (the server refuses
    # none: noemactl's own identity may publish every event, so its writes are not tried here), and
    # `noemactl replay` of that stream into a fresh PostgreSQL schema matches the read model (every
    # knowledge event type's replay: tests/integration/test_knowledge.py).
    up = start(data_dir)
    try:
        for day in ("Fridays", "Tuesdays"):
            ctl(
                data_dir,
                "fact",
                "propose",
                f"Deploys happen on {day}",
                "-w",
                "acme",
                "-d",
                "ops",
                "-t",
                "deploy-day",
            )
        conflicts = _eventually_json(data_dir, "conflicts", "-w", "acme", until=bool)
        assert [(c["winner_content"], c["loser_content"], c["rule"]) for c in conflicts] == [
            ("Deploys happen on Tuesdays", "Deploys happen on Fridays", "recency")
        ]
        replayed = json.loads(ctl(data_dir, "replay", "--json").stdout)
        assert replayed["match"] is True
    finally:
        assert stop(up) == 0
    assert_no_permission_refused(data_dir)


def test_up_says_noema_is_ready_once_readyz_answers_200(data_dir: Path, tmp_path: Path) -> None:
    # `noema is up` comes when every process started; the workers report a few seconds later, and
    # only then does /readyz answer 200: `noema is ready` says when.
    log = tmp_path / "up.log"
    with log.open("w") as out:
        up = subprocess.Popen([*NOEMACTL, "up"], env=_env(data_dir), text=True, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + 120
        ready: dict[str, Any] | None = None
        while ready is None and time.monotonic() < deadline:
            assert up.poll() is None, log.read_text()
            for line in log.read_text().splitlines():
                if line.startswith("{") and json.loads(line).get("event") == "noema is ready":
                    ready = json.loads(line)
            time.sleep(0.2)
        assert ready is not None, log.read_text()
        events = [json.loads(line)["event"] for line in log.read_text().splitlines() if line.startswith("{")]
        assert events.index("noema is up") < events.index("noema is ready")
        with urllib.request.urlopen(ready["readyz"], timeout=10) as answer:
            assert answer.status == 200
    finally:
        assert stop(up) == 0
