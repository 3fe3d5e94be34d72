"""Noema through third-party Node clients, installed by `make setup` from tests/node/package-lock.json
(`npm ci`): the official MCP TypeScript SDK client (`@modelcontextprotocol/sdk` 1.x) and the MCP
Inspector's CLI mode (`@modelcontextprotocol/inspector` 2.x, on the SDK's 2.x client; it asks for
Node 22.19 but runs on 20) — and nats.js v3 (`@nats-io/transport-node`, `@nats-io/jetstream`), the
client of docs/sdk.md's Node.js example — against real NATS and PostgreSQL.

Both clients check a tool result's structured content against the tool's output schema, and the
TypeScript one does so even for an error result: an error that carried structured content in another
shape was lost as ``McpError -32602`` and the host never showed Noema's message. Here a bad argument
and Noema not running must each come back as Noema's own message (``invalid: …``,
``unavailable: no running Noema found …``)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from noema.application.tools import TOOLS
from noema.runtime.locate import nats_fields, write_state
from noema_mcp.server import ERROR_CODE_META
from noema_service.service import build as build_service
from tests.conftest import Harness
from tests.integration.test_mcp import SERVE, code_path, http_server

pytestmark = pytest.mark.integration

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
INSPECTOR = NODE_DIR / "node_modules" / ".bin" / "mcp-inspector"
SETUP = "run `make setup`: it installs the Node clients of tests/node with `npm ci` (Node 20 and npm)"


def node() -> str:
    """The node executable, with the pinned packages installed beside tests/node/package.json."""
    executable = shutil.which("node")
    if executable is None:
        pytest.fail(f"no node on PATH: {SETUP}", pytrace=False)
    if not (NODE_DIR / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.fail(f"tests/node/node_modules is missing: {SETUP}", pytrace=False)
    return executable


async def run(*argv: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def typescript(server: dict[str, Any], *calls: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each call's outcome through the TypeScript SDK's ``Client.callTool`` (tests/node/mcp_call.mjs):
    ``{"result": CallToolResult}`` or ``{"threw": {"code", "message"}}``."""
    spec = {"server": server, "calls": [{"name": n, "arguments": a} for n, a in calls]}
    status, out, err = await run(node(), str(NODE_DIR / "mcp_call.mjs"), json.dumps(spec), cwd=NODE_DIR)
    assert status == 0, err
    outcome = json.loads(out)
    assert sorted(outcome["tools"]) == sorted(TOOLS)
    results: list[dict[str, Any]] = outcome["results"]
    return results


def failed(outcome: dict[str, Any]) -> str:
    """The text of a tool result the client returned (not threw) with ``isError``."""
    assert "result" in outcome, outcome  # {"threw": …} is the bug: the host never sees the message
    result = outcome["result"]
    assert result["isError"] is True
    assert "structuredContent" not in result
    [content] = result["content"]
    text: str = content["text"]
    assert result["_meta"] == {ERROR_CODE_META: text[: text.index(":")]}
    return text


def stdio(harness: Harness) -> dict[str, Any]:
    return {"command": sys.executable, "args": SERVE, "env": harness.settings.to_env() | code_path()}


def nowhere(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """What a host gives a server when no Noema runs: a minimal environment, a data folder with none."""
    home, data_dir = tmp_path / "home", tmp_path / "project" / "var"
    home.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "NOEMA_DATA_DIR": str(data_dir)} | code_path()
    return env, data_dir


async def test_the_typescript_sdk_client_shows_noemas_message_for_a_bad_argument_and_for_noema_down(
    harness: Harness, tmp_path: Path
) -> None:
    bad = ("search_memory", {"query": "deploys", "limit": 0})
    good = ("search_memory", {"query": "deploys", "mode": "keyword"})
    refused, found = await typescript(stdio(harness), bad, good)
    message = failed(refused)
    assert message.startswith("invalid: ")
    assert "limit" in message
    # A result that succeeds still carries structured content matching its output schema.
    assert found["result"]["structuredContent"]["results"] == []

    async with http_server(harness, tmp_path / "http.log") as url:
        [over_http] = await typescript({"url": url}, bad)
    assert failed(over_http) == message

    env, data_dir = nowhere(tmp_path)
    [down] = await typescript(
        {"command": sys.executable, "args": SERVE, "env": env, "cwd": str(tmp_path)}, good
    )
    message = failed(down)
    assert message.startswith(f"unavailable: no running Noema found in {data_dir} — ")
    assert "noemactl up" in message
    assert "--data-dir" in message


async def inspector(target: list[str], env: dict[str, str], name: str, **args: str) -> dict[str, Any]:
    """``mcp-inspector --cli [-e K=V…] <target> --method tools/call --tool-name <name> --tool-arg k=v…``:
    the result it prints. It exits 5 when the tool result has ``isError`` and 1 when the SDK's client
    throws (printing that error instead)."""
    variables = [a for k, v in env.items() for a in ("-e", f"{k}={v}")]
    tool_args = [a for k, v in args.items() for a in ("--tool-arg", f"{k}={v}")]
    transport = ["--transport", "http"] if target[0].startswith("http") else []
    # The inspector gives a server 15 s to answer by default; a loaded machine can take longer to
    # start Python and Noema (a bound, not a speed target).
    argv = [node(), str(INSPECTOR), "--cli", "--connect-timeout", "120000", *variables, *target, *transport]
    argv += ["--method", "tools/call", "--tool-name", name, *tool_args]
    home = {"PATH": os.environ["PATH"], "HOME": env.get("HOME", str(NODE_DIR))}
    status, out, err = await run(*argv, cwd=NODE_DIR, env=home)
    assert status == 5, out + err
    result: dict[str, Any] = json.loads(out)
    return result


async def test_the_mcp_inspector_cli_shows_noemas_message_for_a_bad_argument_and_for_noema_down(
    harness: Harness, tmp_path: Path
) -> None:
    base = {"HOME": str(tmp_path)} | code_path()
    command = [sys.executable, *SERVE]
    refused = await inspector(
        command, base | harness.settings.to_env(), "search_memory", query="x", limit="0"
    )
    message = failed({"result": refused})
    assert message.startswith("invalid: ")
    assert "limit" in message

    async with http_server(harness, tmp_path / "http.log") as url:
        over_http = await inspector([url], {}, "search_memory", query="x", limit="0")
    assert failed({"result": over_http}) == message

    env, data_dir = nowhere(tmp_path)
    down = await inspector(command, env, "search_memory", query="deploys")
    message = failed({"result": down})
    assert message.startswith(f"unavailable: no running Noema found in {data_dir} — ")
    assert "noemactl up" in message


async def test_a_nats_js_v3_client_connects_with_the_fields_of_noema_json(
    harness: Harness, tmp_path: Path
) -> None:
    """docs/sdk.md's Node.js example: nats.js v3 takes ``nats_url`` (no credentials in it, which
    nats.js refuses), ``nats_user`` and ``nats_password`` from ``noema.json``, calls the agent
    service, and ``$SRV.STATS`` counts the error reply in ``num_errors``."""
    await harness.start(build_service)
    data_dir = tmp_path / "var"
    data_dir.mkdir()
    fields = nats_fields(harness.settings.nats_url)
    assert "@" not in str(fields["nats_url"])
    write_state(data_dir, {"pid": os.getpid(), **fields, "database_url": harness.settings.database_url})
    subject = f"{harness.topology.prefix}.agent.acme.engineer.alice.search_memory"
    script = str(NODE_DIR / "nats_v3.mjs")
    request = json.dumps({"query": "deploys", "limit": 0})
    status, out, err = await run(node(), script, str(data_dir / "noema.json"), subject, request, cwd=NODE_DIR)
    assert status == 0, err
    answer = json.loads(out)
    assert answer["reply"]["ok"] is False
    assert answer["reply"]["error"]["code"] == 422
    [endpoint] = [e for e in answer["stats"]["endpoints"] if e["name"] == "search_memory"]
    assert endpoint["num_errors"] == 1
    assert endpoint["last_error"].startswith("422:search_memory: limit must be at least 1")
