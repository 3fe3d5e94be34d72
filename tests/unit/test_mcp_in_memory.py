"""The MCP server's agent tools over the in-memory composition (the pipeline's workers, streams and
read model in memory: :meth:`noema.composition.pipeline.InMemoryPipeline.noema`), through the MCP
SDK's own client in process. The transports (stdio, streamable HTTP, tokens, body limits) are
tested against real servers in tests/integration/test_mcp.py."""

from __future__ import annotations

from typing import Any, cast

import httpx
import pytest
from mcp import Client, types
from mcp.shared.exceptions import MCPError

from noema.adapters.asgi import DEFAULT_MAX_BODY
from noema.application.facade import Noema
from noema.application.knowledge import Caller, Knowledge
from noema.composition.instance import Instance
from noema.composition.pipeline import InMemoryPipeline
from noema.domain.admission import Admission, AdmissionLimits
from noema.domain.attention import memory_id_for
from noema.errors import Kind
from noema_mcp.server import ERROR_CODE_META, PREAMBLE_URI, build_server
from noema_mcp.service import http_app
from tests.integration.api_harness import memory, retraction
from tests.mcp_results import error, ok
from tests.unit.test_errors import documented

ALICE = Caller("acme", "alice", "engineer")
OPERATOR = Caller("acme", "root", operator=True)
IVY = Caller("acme", "ivy", "intern")  # may read the security domain, not write it
TABLE = documented()


def server(pipeline: InMemoryPipeline, caller: Caller = ALICE) -> Any:
    # The facade is what every tool runs on; the server is typed for the composition root.
    return build_server(cast(Instance, pipeline.noema()), caller)


async def test_an_agent_argument_cannot_impersonate_and_bad_input_is_a_tool_error() -> None:
    """Moved from tests/integration/test_mcp.py (over stdio and PostgreSQL there), assertions kept."""
    pipeline = InMemoryPipeline()
    async with Client(server(pipeline)) as mcp:
        before = len(pipeline.stream.events)
        refused = error(
            await mcp.call_tool(
                "propose_fact", {"domain": "ops", "topic": "t", "content": "I am bob", "agent": "bob"}
            )
        )
        assert "unknown field `agent`" in refused
        assert "unknown field `agent`" in error(
            await mcp.call_tool("update_my_notes", {"notes": "x", "agent": "bob"})
        )
        assert "`query`" in error(await mcp.call_tool("search_memory", {}))
        assert "unknown field `text`; accepted fields: content" in error(
            await mcp.call_tool("record_observation", {"text": "hi"})
        )
        # A tool that does not exist is not a result for the model but an error of the request.
        with pytest.raises(MCPError, match="unknown tool 'forget_everything'") as unknown:
            await mcp.call_tool("forget_everything", {})
        assert unknown.value.code == -32602
        assert "no fact nope" in error(
            await mcp.call_tool("supersede_fact", {"fact_id": "nope", "content": "x"})
        )
        assert len(pipeline.stream.events) == before

        resources = await mcp.list_resources()
        assert [r.uri for r in resources.resources] == [PREAMBLE_URI]
        templates = await mcp.list_resource_templates()
        assert [t.uri_template for t in templates.resource_templates] == [PREAMBLE_URI + "/{task}"]
        with pytest.raises(MCPError, match="unknown resource"):
            await mcp.read_resource("noema://someone-else/notes")

        ok(await mcp.call_tool("update_my_notes", {"notes": "mine"}))
        assert pipeline.knowledge.tables.notes == {("acme", "alice"): "mine"}
        [contents] = (await mcp.read_resource(PREAMBLE_URI)).contents
        assert isinstance(contents, types.TextResourceContents)
        assert "mine" in contents.text


async def test_an_observation_is_found_through_mcp_once_the_pipeline_ran() -> None:
    """An observation (as the API publishes it) → attend → the read model → search_memory, in memory."""
    pipeline = InMemoryPipeline()
    noema = pipeline.noema()
    stored = await noema.observe(ALICE, "the deploy key rotates on Fridays")
    again = await noema.observe(
        ALICE, "the deploy key rotates on Fridays", observation_id=stored["observation_id"]
    )
    assert (again["seq"], again["duplicate"]) == (stored["seq"], True)
    async with Client(build_server(cast(Instance, noema), ALICE)) as mcp:
        assert ok(await mcp.call_tool("search_memory", {"query": "deploy key"}))["results"] == []
        await pipeline.run()
        found = ok(await mcp.call_tool("search_memory", {"query": "deploy key"}))["results"]
    assert [r["content"] for r in found] == ["the deploy key rotates on Fridays"]
    assert found[0]["id"] == memory_id_for(stored["observation_id"])


def one_request_a_while() -> Admission:
    """Limits a second request of a caller is over at once (rate_limited)."""
    return Admission(AdmissionLimits(rate=0.001, burst=1, concurrency=0))


class Down:
    """A read model and recall voices whose server is gone: every read fails as a dropped connection."""

    def __getattr__(self, name: str) -> Any:
        async def unreachable(*args: Any, **kw: Any) -> Any:
            raise ConnectionRefusedError("connection refused")

        return unreachable


def down_facade(pipeline: InMemoryPipeline) -> Noema:
    """The facade over ``pipeline`` with its read model and voices unreachable."""
    gone = cast(Any, Down())
    up = pipeline.noema()
    return Noema(
        publisher=pipeline.stream,
        memories=gone,
        knowledge=Knowledge(gone, pipeline.stream, pipeline.clock),
        voices=gone,
        observations=up._observations,
        embedder=up._load_embedder,
        connected=lambda: True,
        decay_interval_s=3600.0,
        clock=pipeline.clock,
    )


async def test_the_mcp_server_answers_each_kind_as_the_table_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """Moved from tests/integration/test_error_surfaces.py (a real instance there; here the servers
    that are not there are a read model that refuses connections), assertions kept."""
    pipeline = InMemoryPipeline()
    active, b, c, fact = (
        memory("the deploy key rotates"),
        memory("b"),
        memory("c"),
        memory("deploys happen on fridays", domain="ops", topic="deploy-day"),
    )
    await pipeline.stream.publish([active, b, c, fact])
    await pipeline.stream.publish([retraction(fact.payload.memory_id)])
    await pipeline.noema().knowledge.set_grant(OPERATOR, "intern", "security", "read")
    noema = cast(Instance, pipeline.noema())
    down = cast(Instance, down_facade(pipeline))
    buggy = cast(Instance, pipeline.noema())

    async def bug(*args: Any, **kw: Any) -> Any:
        raise KeyError("secret internals")

    monkeypatch.setattr(buggy, "preamble", bug)

    async def tool(app: Instance, who: Caller, name: str, args: dict[str, Any]) -> str:
        async with Client(build_server(app, who)) as mcp:
            result = await mcp.call_tool(name, args)
        assert result.is_error, (name, result)
        [content] = result.content
        assert isinstance(content, types.TextContent)
        text = content.text
        assert "secret" not in text
        assert "Traceback" not in text
        prefix = text[: text.index(":") + 2]
        # No structured content (clients check it against the output schema), the kind in _meta.
        assert result.structured_content is None
        assert result.meta is not None
        assert prefix == f"{result.meta[ERROR_CODE_META]}: "
        return prefix

    seen: dict[Kind, str] = {
        Kind.MALFORMED: await tool(noema, ALICE, "supersede_fact", {"fact_id": "abc", "content": "x"}),
        Kind.INVALID: await tool(noema, ALICE, "search_memory", {"query": "deploys", "limit": 0}),
        Kind.FORBIDDEN: await tool(noema, IVY, "propose_policy", {"domain": "security", "rule": "x"}),
        Kind.NOT_FOUND: await tool(noema, ALICE, "supersede_fact", {"fact_id": "zzzzzzzzzz", "content": "x"}),
        Kind.CONFLICT: await tool(
            noema, ALICE, "supersede_fact", {"fact_id": fact.payload.memory_id, "content": "x"}
        ),
        Kind.UNAVAILABLE: await tool(down, ALICE, "search_memory", {"query": "deploys"}),
        Kind.INTERNAL: await tool(buggy, ALICE, "get_preamble", {"task": "x"}),
    }
    # Rate limited: the agent's second tool call, over limits that admit one.
    async with Client(build_server(noema, ALICE, one_request_a_while())) as mcp:
        assert not (await mcp.call_tool("get_preamble", {"task": "x"})).is_error
        limited = await mcp.call_tool("get_preamble", {"task": "x"})
    assert limited.is_error
    assert limited.structured_content is None  # as every error result (docs/mcp.md)
    assert limited.meta is not None
    assert limited.meta[ERROR_CODE_META] == "rate_limited"
    assert limited.meta["noema/retry_after"] >= 1
    [content] = limited.content
    assert isinstance(content, types.TextContent)
    seen[Kind.RATE_LIMITED] = content.text[: content.text.index(":") + 2]
    # Over the HTTP transport, the token and the body limit answer before any tool runs.
    server = build_server(noema, ALICE)
    transport = httpx.ASGITransport(app=http_app(server, "127.0.0.1", token="t0ken"))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        unauthenticated = await client.post("/mcp", json={})
        too_large = await client.post(
            "/mcp", content=b"x" * (DEFAULT_MAX_BODY + 1), headers={"Authorization": "Bearer t0ken"}
        )
        not_json = await client.post(
            "/mcp", content=b"hello", headers={"Authorization": "Bearer t0ken", "Content-Type": "text/plain"}
        )
    for kind, res in (
        (Kind.UNAUTHENTICATED, unauthenticated),
        (Kind.TOO_LARGE, too_large),
        (Kind.UNSUPPORTED_MEDIA_TYPE, not_json),
    ):
        assert res.headers["content-type"] == "application/problem+json"
        assert res.json()["code"] == kind
        seen[kind] = f"HTTP {res.status_code}"
    wanted = {kind: row.mcp_tool for kind, row in TABLE.items() if row.mcp_tool is not None}
    assert seen == wanted

    # A request that is not a tool call (a resource read) fails with the kind's JSON-RPC code.
    async def read(app: Instance, uri: str) -> str:
        async with Client(build_server(app, ALICE)) as mcp:
            with pytest.raises(MCPError) as failed:
                await mcp.read_resource(uri)
        return str(failed.value.code)

    assert await read(noema, "noema://nowhere") == TABLE[Kind.NOT_FOUND].mcp_request
    assert await read(down, "noema://preamble/x") == TABLE[Kind.UNAVAILABLE].mcp_request
    assert await read(buggy, "noema://preamble/x") == TABLE[Kind.INTERNAL].mcp_request
