"""The MCP server through the SDK's own client, over stdio and streamable HTTP, against real NATS and
PostgreSQL: every agent tool is listed with its schema and called, and its events carry the configured
agent as actor."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import httpx2
import pytest
from jsonschema import Draft202012Validator
from mcp import ClientSession, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from noema.adapters.asgi import DEFAULT_MAX_BODY
from noema.adapters.jetstream import last_on_subject, stream_last_seq
from noema.adapters.postgres.roles import DbRole
from noema.application.knowledge import Caller
from noema.application.tools import TOOLS, input_schema, output_schema
from noema.composition.instance import connected_knowledge
from noema.errors import SURFACES, Kind
from noema.runtime.locate import register, registry_dir, write_state
from noema_conflicts.service import build as build_conflicts
from noema_mcp import HTTP_PATH
from noema_mcp.server import ERROR_CODE_META, PREAMBLE_URI, preamble_uri
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.integration.http_support import exchange
from tests.integration.test_knowledge import settled
from tests.mcp_results import error, ok
from tests.support import assert_eventually

pytestmark = pytest.mark.integration

ALICE = Caller("acme", "alice", "engineer")
BOB = Caller("acme", "bob", "engineer")
OPERATOR = Caller("acme", "root", operator=True)
TASK = "when do deploys/releases happen? (ops)"
SERVE = ["-m", "noema_mcp", "--workspace", "acme", "--agent", "alice", "--role", "engineer"]


def code_path() -> dict[str, str]:
    """PYTHONPATH, when set (a worktree's code first), so that a server the test starts with an
    environment of its own runs the code under test."""
    return {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}


def server_log(log: Path) -> str:
    """What the server wrote on stderr."""
    return log.read_text()


@asynccontextmanager
async def over_stdio(harness: Harness, log: Path) -> AsyncIterator[ClientSession]:
    """The server spawned by the client, as an MCP host does (``python -m noema_mcp`` = ``noemactl mcp
    serve``), finding the servers through the NOEMA_* environment."""
    params = StdioServerParameters(
        command=sys.executable, args=SERVE, env=harness.settings.to_env() | code_path()
    )
    with log.open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session
    assert "Traceback" not in server_log(log)


@asynccontextmanager
async def over_http(harness: Harness, log: Path, token: str | None = None) -> AsyncIterator[ClientSession]:
    """The server started with ``--transport http`` on a free port; stopped with SIGTERM. With
    ``token``, the server requires it (NOEMA_MCP_TOKEN) and the client sends it."""
    async with http_server(harness, log, token) as url:
        headers = {"Authorization": f"Bearer {token}"} if token else None
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as client,
            streamable_http_client(url, http_client=client) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


@asynccontextmanager
async def http_server(harness: Harness, log: Path, token: str | None = None) -> AsyncIterator[str]:
    """``--transport http`` on a free port; yields its URL; stopped with SIGTERM."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = harness.settings.to_env() | code_path() | ({"NOEMA_MCP_TOKEN": token} if token else {})
    with log.open("w") as errlog:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *SERVE,
            "--transport",
            "http",
            "--port",
            str(port),
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stderr=errlog,
        )
        try:

            async def listening() -> bool:
                assert process.returncode is None, server_log(log)
                try:
                    _, writer = await asyncio.open_connection("127.0.0.1", port)
                except OSError:
                    return False
                writer.close()
                return True

            await assert_eventually(listening, timeout=30, what="the MCP HTTP server listening")
            yield f"http://127.0.0.1:{port}{HTTP_PATH}"
        finally:
            process.terminate()
            # uvicorn drains, then re-raises the signal it caught: the exit status is "killed by SIGTERM".
            assert await asyncio.wait_for(process.wait(), 10) == -signal.SIGTERM, server_log(log)
            assert "Traceback" not in server_log(log)


TRANSPORTS = {"stdio": over_stdio, "http": over_http}


async def events(harness: Harness, **where: str) -> list[dict[str, Any]]:
    clauses = " AND ".join(f"{k} = ${i}" for i, k in enumerate(where, 1)) or "true"
    rows = await harness.pool.fetch(
        f"SELECT type, actor, payload FROM events WHERE {clauses} ORDER BY seq", *where.values()
    )
    return [{**dict(r), "payload": json.loads(r["payload"])} for r in rows]


@pytest.mark.parametrize("transport", list(TRANSPORTS))
async def test_every_tool_runs_as_the_configured_agent(
    harness: Harness, tmp_path: Path, transport: str, role_urls: dict[DbRole, str]
) -> None:
    await harness.start(build_projector)
    # The server reads as the reader role, its connections limited to its agent's workspace by
    # row-level security (the workers above started as the superuser; they are not under test).
    harness.settings = replace(harness.settings, database_url_reader=role_urls["reader"])
    await harness.start(build_conflicts)
    k = connected_knowledge(harness.pool, harness.nc, harness.topology)
    async with TRANSPORTS[transport](harness, tmp_path / "server.log") as mcp:
        listed = {t.name: t for t in (await mcp.list_tools()).tools}
        assert set(listed) == set(TOOLS)
        for name, tool in listed.items():
            assert tool.description == TOOLS[name].description
            assert tool.input_schema == input_schema(TOOLS[name])
            assert tool.input_schema["type"] == "object"
            # The SDK's client checks every result below against its tool's output schema.
            assert tool.output_schema == output_schema(TOOLS[name])
            Draft202012Validator.check_schema(tool.output_schema)
        assert listed["search_memory"].input_schema["required"] == ["query"]
        assert listed["search_memory"].annotations
        assert listed["search_memory"].annotations.read_only_hint

        # propose_fact: a fact.proposed event by alice; a contradiction becomes a conflict.
        fridays = ok(
            await mcp.call_tool(
                "propose_fact",
                {"domain": "ops", "topic": "deploy-day", "content": "Deploys happen on Fridays"},
            )
        )
        assert fridays["outcome"] == "proposed"
        await settled(harness)
        [proposed] = await events(harness, type="fact.proposed.v2")
        assert (proposed["actor"], proposed["payload"]["memory_id"]) == ("alice", fridays["memory_id"])
        tuesdays = ok(
            await mcp.call_tool(
                "propose_fact",
                {"domain": "ops", "topic": "deploy-day", "content": "Deploys happen on Tuesdays"},
            )
        )
        await settled(harness)
        [conflict] = ok(await mcp.call_tool("list_memory_conflicts", {"domain": "ops"}))["conflicts"]
        assert (conflict["winner_id"], conflict["loser_id"]) == (tuesdays["memory_id"], fridays["memory_id"])

        # search_memory finds the fact that won, with its score components when asked.
        found = ok(await mcp.call_tool("search_memory", {"query": "deploys tuesdays", "explain": True}))
        assert found["results"][0]["id"] == tuesdays["memory_id"]
        assert found["results"][0]["components"]
        assert fridays["memory_id"] not in {r["id"] for r in found["results"]}, (
            "superseded facts are not recalled"
        )
        history = ok(
            await mcp.call_tool(
                "search_memory",
                {
                    "query": "deploys",
                    "mode": "keyword",
                    "statuses": ["superseded"],
                    "epistemic_kinds": ["fact"],
                },
            )
        )
        assert [r["id"] for r in history["results"]] == [fridays["memory_id"]], "unless asked for"
        # Every mode of noemactl and the HTTP API, embeddings alone included.
        by_vector = ok(await mcp.call_tool("search_memory", {"query": "deploys tuesdays", "mode": "vector"}))
        assert by_vector["mode"] == "vector"

        # supersede_fact
        wednesdays = ok(
            await mcp.call_tool(
                "supersede_fact",
                {
                    "fact_id": tuesdays["memory_id"],
                    "content": "Deploys happen on Wednesdays",
                    "reason": "moved",
                },
            )
        )
        await settled(harness)
        status = await harness.pool.fetchval(
            "SELECT superseded_by FROM memories WHERE id = $1", tuesdays["memory_id"]
        )
        assert status == wednesdays["memory_id"]

        # propose_policy / supersede_policy; refused where the role has only read, and nothing written.
        policy = ok(
            await mcp.call_tool(
                "propose_policy", {"domain": "ops", "rule": "Never deploy without a rollback plan"}
            )
        )
        await settled(harness)
        newer = ok(
            await mcp.call_tool(
                "supersede_policy",
                {"policy_id": policy["policy_id"], "rule": "Never deploy without a tested rollback plan"},
            )
        )
        assert newer["superseded"] == policy["policy_id"]
        assert newer["policy_id"] != policy["policy_id"]
        await k.set_grant(OPERATOR, "engineer", "security", "read")
        await settled(harness)
        before = await stream_last_seq(harness.js, harness.topology.event_stream)
        refused = error(
            await mcp.call_tool("propose_policy", {"domain": "security", "rule": "Secrets never rotate"})
        )
        assert refused.startswith("forbidden: ")
        assert "'engineer' has read access to domain 'security'" in refused
        assert await stream_last_seq(harness.js, harness.topology.event_stream) == before

        # update_my_notes reaches the preamble, as a tool and as a resource.
        ok(await mcp.call_tool("update_my_notes", {"notes": "Halfway through the rollback runbook"}))
        await settled(harness)
        preamble = ok(await mcp.call_tool("get_preamble", {"task": TASK}))
        assert preamble["notes"] == "Halfway through the rollback runbook"
        assert "Halfway through the rollback runbook" in preamble["text"]
        assert "Never deploy without a tested rollback plan" in preamble["text"]
        assert any("Wednesdays" in f for f in preamble["facts"])
        resource = await mcp.read_resource(preamble_uri(TASK))
        [contents] = resource.contents
        assert isinstance(contents, types.TextResourceContents)
        assert contents.text == preamble["text"]

        # record_observation: a line in alice's private notes, and nothing on the observation stream.
        observed = ok(
            await mcp.call_tool("record_observation", {"content": "the rollback runbook is outdated"})
        )
        assert observed["line"].endswith(" the rollback runbook is outdated")
        subject = harness.topology.observation_subject("acme", "alice")
        assert await last_on_subject(harness.js, harness.topology.observation_stream, subject) is None
        await settled(harness)
        preamble = ok(await mcp.call_tool("get_preamble", {"task": TASK}))
        assert preamble["notes"] == f"Halfway through the rollback runbook\n{observed['line']}"

        # remember + consolidate_memory: an important hot-tier item becomes alice's fact.
        hot = ok(
            await mcp.call_tool(
                "remember",
                {
                    "session": "s1",
                    "content": "The staging database is rebuilt every Sunday",
                    "domain": "ops",
                    "topic": "staging",
                    "importance": 0.9,
                },
            )
        )
        assert hot["outcome"] == "remembered"
        await settled(harness)
        report = ok(await mcp.call_tool("consolidate_memory", {"domain": "ops"}))
        [promoted] = report["promoted"]
        assert promoted["hot_id"] == hot["memory_id"]
        await settled(harness)
        fact = await harness.pool.fetchrow(
            "SELECT content, mind FROM memories WHERE id = $1", promoted["fact_id"]
        )
        assert (fact["content"], fact["mind"]) == ("The staging database is rebuilt every Sunday", "alice")

        # harmonize_memory: bob holds the same belief as alice in another topic; they become one.
        bobs = await k.propose_fact(BOB, "ops", "staging-db", "the staging database is rebuilt every sunday")
        await settled(harness)
        harmonized = ok(await mcp.call_tool("harmonize_memory", {"domain": "ops"}))
        assert harmonized["corroborated"] == [
            {"kept": promoted["fact_id"], "merged": [bobs.memory_id], "agents": ["alice", "bob"]}
        ]
        await settled(harness)

    # The tools' events all name alice; the others are the test's own setup and the conflicts worker.
    actors = {e["actor"] for e in await events(harness)}
    assert actors == {"alice", "bob", "operator:root", "conflicts"}
    assert {e["type"] for e in await events(harness, actor="alice")} >= {
        "fact.proposed.v2",
        "memory.superseded.v1",
        "policy.proposed.v1",
        "policy.superseded.v1",
        "notes.updated.v1",
        "memory.created.v1",
        "fact.mentioned.v2",
    }


# The agent argument and bad input as tool errors: tests/unit/test_mcp_in_memory.py (in memory).


async def test_http_with_a_token_answers_only_requests_that_carry_it(
    harness: Harness, tmp_path: Path
) -> None:
    log = tmp_path / "mcp.log"
    token = "t0k3n-for-alice"
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    async with http_server(harness, log, token) as url, httpx.AsyncClient(timeout=10) as client:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": token}):
            refused = await client.post(url, json=initialize, headers=accept | headers)
            assert refused.status_code == 401, refused.text
            assert refused.headers["www-authenticate"].startswith("Bearer")
            assert "bearer token" in refused.json()["error"]
        admitted = await client.post(
            url, json=initialize, headers=accept | {"Authorization": f"Bearer {token}"}
        )
        assert admitted.status_code == 200, admitted.text
        # OAuth discovery finds nothing (404, not 401), so that a host reports the token, not a
        # failed OAuth flow; health and readiness answer without the token.
        base = url.removesuffix(HTTP_PATH)
        for path in (
            "/.well-known/oauth-protected-resource",
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-authorization-server",
            "/.well-known/oauth-authorization-server/mcp",
            "/.well-known/openid-configuration",
        ):
            discovered = await client.get(base + path)
            assert discovered.status_code == 404, (path, discovered.text)
            assert discovered.headers["content-type"] == "application/problem+json"
            assert "static bearer token" in discovered.json()["detail"]
        assert (await client.get(base + "/healthz")).json() == {"status": "ok"}
        ready = await client.get(base + "/readyz")
        assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
    async with over_http(harness, tmp_path / "mcp2.log", token) as mcp:
        names = {tool.name for tool in (await mcp.list_tools()).tools}
        assert "search_memory" in names
    assert "bearer token required" in server_log(log)


async def test_stdio_answers_a_line_that_is_not_utf8_json_and_keeps_serving(
    harness: Harness, tmp_path: Path
) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    log = tmp_path / "mcp.log"
    with log.open("w") as errlog:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *SERVE,
            env=harness.settings.to_env(),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=errlog,
        )
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.write(b'{"jsonrpc": "2.0", "id": 0, "method": "caf\xe9"}\n\xff\xfe\n')
        process.stdin.write(json.dumps(initialize).encode() + b"\n")
        await process.stdin.drain()
        answers: list[dict[str, Any]] = []
        while not {0, 1} <= {a.get("id") for a in answers}:
            line = await asyncio.wait_for(process.stdout.readline(), 60)
            assert line, server_log(log)
            answers.append(json.loads(line))
        process.stdin.close()
        assert await asyncio.wait_for(process.wait(), 30) == 0, server_log(log)
    # The undecodable bytes are replaced (U+FFFD): a request naming no method is answered with an
    # error, a line that is not JSON is dropped, and the server goes on to initialize.
    by_id = {a.get("id"): a for a in answers}
    assert by_id[0]["error"]["code"] == -32601
    assert by_id[1]["result"]["serverInfo"]["name"] == "noema"
    assert "Traceback" not in server_log(log)


async def test_http_refuses_a_body_above_the_limit_before_reading_it(
    harness: Harness, tmp_path: Path
) -> None:
    accept = "Accept: application/json, text/event-stream"
    async with http_server(harness, tmp_path / "mcp.log") as url:
        path = urlsplit(url).path
        # A chunked body one chunk past the limit that never ends: cut off at the limit. (A whole
        # body sent at once would race the server's close: its reset can arrive before the 413.)
        chunk = b"1," * 32768
        chunked = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", accept, "Transfer-Encoding: chunked"]
        over = DEFAULT_MAX_BODY // len(chunk) + 1
        refused = await exchange(url, chunked, [b"%x\r\n%s\r\n" % (len(chunk), chunk)] * over)
        assert refused.status == 413
        assert "limit of 1048576 bytes" in refused.json()["error"]
        # Announced but never sent: only an answer given without reading the body can arrive.
        head = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", accept, "Content-Length: 52428800"]
        assert (await exchange(url, head)).status == 413


async def test_http_refuses_a_body_nested_too_deep_with_a_422(harness: Harness, tmp_path: Path) -> None:
    accept = "Accept: application/json, text/event-stream"
    deep = b'{"jsonrpc": "2.0", "id": 1, "method": "x", "params": ' + b"[" * 5_000 + b"]" * 5_000 + b"}"
    async with http_server(harness, tmp_path / "mcp.log") as url:
        path = urlsplit(url).path
        # Connection: close, since the answer is read until the server closes (it keeps others alive).
        head = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", accept, "Content-Type: application/json"]
        refused = await exchange(url, [*head, "Connection: close", f"Content-Length: {len(deep)}"], [deep])
        assert refused.status == 422
        assert "more than 32 levels deep" in refused.json()["error"]


def serve_without_servers(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m noema_mcp ARGS`` with a data folder where nothing runs."""
    return subprocess.run(
        [sys.executable, *args],
        env={"PATH": os.environ["PATH"], "NOEMA_DATA_DIR": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_serve_says_what_is_missing_instead_of_starting(tmp_path: Path) -> None:
    no_agent = serve_without_servers(tmp_path, *SERVE[:4])
    assert no_agent.returncode == 2
    assert "--agent" in no_agent.stderr
    assert "NOEMA_AGENT" in no_agent.stderr
    bad_name = serve_without_servers(tmp_path, *SERVE[:4], NOEMA_AGENT="alice smith")
    assert bad_name.returncode == 2
    assert "agent must be 1-64 letters" in bad_name.stderr
    exposed = serve_without_servers(tmp_path, *SERVE, "--transport", "http", "--host", "0.0.0.0")
    assert exposed.returncode == 2
    assert "without a token" in exposed.stderr
    assert "NOEMA_MCP_TOKEN" in exposed.stderr


def host_env(harness: Harness, home: Path) -> dict[str, str]:
    """What an MCP host gives the server it starts: a minimal environment (no data folder, no
    server URLs, no XDG_RUNTIME_DIR), plus this test's stream prefix and database schema."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "NOEMA_PREFIX": harness.settings.prefix,
        "NOEMA_DB_SCHEMA": harness.settings.db_schema,
    } | code_path()


async def test_a_server_a_host_starts_anywhere_says_noema_is_not_running_then_finds_it(
    harness: Harness, tmp_path: Path
) -> None:
    await harness.start(build_projector)
    await harness.start(build_conflicts)
    home, host_dir, data_dir = tmp_path / "home", tmp_path / "host", tmp_path / "project" / "var"
    for folder in (home, host_dir, data_dir):
        folder.mkdir(parents=True)
    params = StdioServerParameters(
        command=sys.executable, args=SERVE, env=host_env(harness, home), cwd=host_dir
    )
    log = tmp_path / "server.log"
    with log.open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as mcp,
        ):
            # Nothing runs: the server starts all the same, and each call says what to do.
            await mcp.initialize()
            assert {t.name for t in (await mcp.list_tools()).tools} == set(TOOLS)
            refused = await mcp.call_tool("search_memory", {"query": "deploys"})
            message = error(refused)
            assert message.startswith("unavailable: no running Noema found in ")
            assert str(host_dir / "var") in message
            assert "noemactl up" in message
            assert refused.structured_content is None
            assert refused.meta == {ERROR_CODE_META: "unavailable"}
            with pytest.raises(MCPError, match="no running Noema found") as unreadable:
                await mcp.read_resource(PREAMBLE_URI)
            assert unreadable.value.code == SURFACES[Kind.UNAVAILABLE].mcp

            # `noemactl up` in the project's folder records its state there and registers the
            # folder in the user's state directory: the next call finds it.
            write_state(
                data_dir,
                {
                    "pid": os.getpid(),
                    "nats_url": harness.settings.nats_url,
                    "database_url": harness.settings.database_url,
                },
            )
            register(registry_dir({"HOME": str(home)}), data_dir)
            fact = ok(
                await mcp.call_tool(
                    "propose_fact", {"domain": "ops", "topic": "deploy-day", "content": "Deploys on Fridays"}
                )
            )
            assert fact["outcome"] == "proposed"
            found = ok(await mcp.call_tool("search_memory", {"query": "deploys", "mode": "vector"}))
            assert found["mode"] == "vector"
    await settled(harness)
    [proposed] = await events(harness, type="fact.proposed.v2")
    assert proposed["actor"] == "alice"
    text = server_log(log)
    assert "noema not reachable yet" in text, "and says so on stderr, which hosts keep in their logs"
    assert "no running Noema found" in text
    assert "Traceback" not in text


async def test_http_serves_its_metrics_without_the_token_and_counts_its_searches(
    harness: Harness, tmp_path: Path
) -> None:
    token = "t0k3n-for-alice"
    async with http_server(harness, tmp_path / "mcp.log", token) as url:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as authed,
            streamable_http_client(url, http_client=authed) as (read, write),
            ClientSession(read, write) as mcp,
        ):
            await mcp.initialize()
            ok(await mcp.call_tool("search_memory", {"query": "deploys", "mode": "keyword"}))
        async with httpx.AsyncClient(timeout=10) as client:
            assert (await client.post(url, json={})).status_code == 401
            scraped = await client.get(url.removesuffix(HTTP_PATH) + "/metrics")  # no token: counts only
    assert scraped.status_code == 200
    assert 'noema_search_duration_seconds_count{mode="keyword"} 1.0' in scraped.text
    assert 'noema_http_requests_total{method="POST",route="unmatched",status="401"} 1.0' in scraped.text
    assert 'route="/mcp",status="200"' in scraped.text


async def test_http_keeps_an_idle_keep_alive_connection_open_past_uvicorns_five_seconds(
    harness: Harness, tmp_path: Path
) -> None:
    # A host pauses between tool calls; uvicorn's default closes an idle connection after 5 s.
    async with http_server(harness, tmp_path / "server.log") as url:
        parts = urlsplit(url)
        assert parts.hostname is not None
        assert parts.port is not None
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        request = f"GET /healthz HTTP/1.1\r\nHost: {parts.netloc}\r\n\r\n".encode()
        try:
            for _ in range(2):
                writer.write(request)
                await writer.drain()
                status = await asyncio.wait_for(reader.readline(), 10)
                assert status.startswith(b"HTTP/1.1 200"), status
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                await asyncio.sleep(6.5)  # idle longer than uvicorn's default keep-alive
        finally:
            writer.close()
