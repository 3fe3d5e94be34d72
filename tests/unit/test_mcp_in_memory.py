"""The MCP server's agent tools over the in-memory composition (the pipeline's workers, streams and
read model in memory: :meth:`noema.composition.pipeline.InMemoryPipeline.noema`), through the MCP
SDK's own client in process. The transports (stdio, streamable HTTP, tokens, body limits) are
tested against real servers in tests/integration/test_mcp.py."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from mcp import Client, types
from mcp.shared.exceptions import MCPError

from noema.application.knowledge import Caller
from noema.composition.instance import Instance
from noema.composition.pipeline import InMemoryPipeline
from noema.domain.attention import memory_id_for
from noema_mcp.server import PREAMBLE_URI, build_server

ALICE = Caller("acme", "alice", "engineer")


def ok(result: types.CallToolResult) -> Any:
    """The structured result of a successful call (its text content is the same JSON)."""
    assert not result.is_error, result.content
    [content] = result.content
    assert isinstance(content, types.TextContent)
    assert json.loads(content.text) == result.structured_content
    return result.structured_content


def error(result: types.CallToolResult) -> str:
    """The message of a call that failed as a tool error."""
    assert result.is_error
    [content] = result.content
    assert isinstance(content, types.TextContent)
    assert "Traceback" not in content.text
    return content.text


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
