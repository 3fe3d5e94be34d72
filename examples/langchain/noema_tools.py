"""Noema's memory as LangChain tools, for LangGraph agents, through langchain-mcp-adapters.

langchain-mcp-adapters turns the tools of ``noemactl mcp serve`` (search_memory, propose_fact,
get_preamble, …, for one agent identity) into LangChain tools; any LangGraph agent can use them. Its
environment is not Noema's (it needs the MCP SDK below 2): ``make setup`` builds it in
``.venv-langchain`` from ``examples/langchain/requirements.lock`` (elsewhere:
``pip install -r examples/langchain/requirements.lock``). Start Noema (``noemactl up``), then::

    .venv-langchain/bin/python examples/langchain/noema_tools.py -- noemactl mcp serve -w acme -a alice

It runs no model: a LangGraph ``ToolNode`` executes the tool calls a model would emit (propose a
fact, recall it), which is what tests/integration/test_examples.py checks. With a chat model, the
same tools make an agent, e.g. ``langchain.agents.create_agent(model, tools)`` or
``langgraph.prebuilt.create_react_agent(model, tools)``.

The server is started with the ``NOEMA_*`` variables of this environment (say, ``NOEMA_DATA_DIR``)
on top of the SDK's minimal default environment.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.sessions import StdioConnection
from langchain_mcp_adapters.tools import load_mcp_tools
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode


def noema_connection(command: list[str]) -> StdioConnection:
    """How langchain-mcp-adapters starts the Noema MCP server: ``command`` (e.g.
    ``["noemactl", "mcp", "serve", "-w", "acme", "-a", "alice"]``), with this process's NOEMA_*
    variables."""
    env = {k: v for k, v in os.environ.items() if k.startswith("NOEMA_")}
    return {"transport": "stdio", "command": command[0], "args": command[1:], "env": env}


async def run_calls(tools: list[BaseTool], calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Run tool calls as a model's message would ask for them, through a LangGraph graph whose one
    node is a ToolNode (an agent's graph has the model's node before it); returns each call's
    result (Noema's JSON, decoded)."""
    message = AIMessage(
        content="",
        tool_calls=[{"name": name, "args": args, "id": f"call-{i}"} for i, (name, args) in enumerate(calls)],
    )
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    answer = await graph.compile().ainvoke({"messages": [message]})
    results = []
    for reply in answer["messages"][1:]:
        assert isinstance(reply, ToolMessage)
        content = reply.content
        text = (
            content
            if isinstance(content, str)
            else "".join(b["text"] for b in content if b.get("type") == "text")
        )
        if reply.status == "error":
            raise RuntimeError(f"{reply.name}: {text}")
        results.append(json.loads(text))
    return results


async def demo(command: list[str]) -> dict[str, Any]:
    """List the tools, propose a fact, recall it (waiting until it is projected)."""
    client = MultiServerMCPClient({"noema": noema_connection(command)})
    # One session for every call (client.get_tools() alone would start a server per call).
    async with client.session("noema") as session:
        tools = await load_mcp_tools(session)
        [proposed] = await run_calls(
            tools,
            [
                (
                    "propose_fact",
                    {"domain": "ops", "topic": "release-day", "content": "Releases happen on Thursdays"},
                )
            ],
        )
        found: list[dict[str, Any]] = []
        for _ in range(150):  # searchable once the projector applied it (milliseconds)
            [result] = await run_calls(
                tools, [("search_memory", {"query": "releases thursdays", "mode": "keyword"})]
            )
            if found := result["results"]:
                break
            await asyncio.sleep(0.2)
    return {"tools": sorted(t.name for t in tools), "proposed": proposed, "found": found}


if __name__ == "__main__":
    argv = sys.argv[1:]
    server = (
        argv[argv.index("--") + 1 :]
        if "--" in argv
        else ["noemactl", "mcp", "serve", "-w", "acme", "-a", "assistant"]
    )
    print(json.dumps(asyncio.run(demo(server)), indent=2))
