"""Noema's memory for an OpenAI Agents SDK agent, through MCP (``MCPServerStdio``).

The agent's tools are Noema's agent tools (search_memory, propose_fact, get_preamble, …), served by
``noemactl mcp serve`` for one agent identity; the SDK starts that server itself. Install with
``pip install 'noema[recipes]'`` (or ``openai-agents``), start Noema (``noemactl up``), then::

    OPENAI_API_KEY=… python examples/openai_agents/noema_agent.py "When do we deploy?"

Without ``OPENAI_API_KEY`` it runs no model: it lists the agent's tools and calls two of them the
way the SDK's runner calls a tool the model chose (what tests/integration/test_examples.py checks).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from typing import Any

from agents import Agent, FunctionTool, RunContextWrapper, Runner, set_tracing_disabled
from agents.mcp import MCPServerStdio
from agents.tool_context import ToolContext

INSTRUCTIONS = (
    "You have a long-term memory (Noema). Before answering, call get_preamble with the task; recall "
    "with search_memory; record durable facts with propose_fact (a domain such as 'ops', a topic as "
    "its slot)."
)


def _beside_python(name: str) -> str:
    """``name`` in this interpreter's bin folder when it is there (an installed Noema), else as is."""
    beside = os.path.join(os.path.dirname(sys.executable), name)
    return beside if os.path.isfile(beside) else name


def noema_server(
    workspace: str,
    agent: str,
    role: str = "agent",
    command: str | None = None,
    args: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> MCPServerStdio:
    """The Noema MCP server for one agent identity, started by the SDK over stdio. ``command``:
    ``noemactl`` (found on PATH, else beside this Python, as in a virtualenv that is not activated;
    give an absolute path to be sure); ``args`` replace
    ``mcp serve --workspace … --agent … --role …``; ``env``: extra variables (e.g. NOEMA_DATA_DIR)."""
    return MCPServerStdio(
        params={
            "command": command or shutil.which("noemactl") or _beside_python("noemactl"),
            "args": args or ["mcp", "serve", "--workspace", workspace, "--agent", agent, "--role", role],
            "env": env,
        },
        name="noema",
        cache_tools_list=True,
        # Noema publishes an outputSchema and structured content for every tool: hand the model the
        # JSON object rather than its text rendering.
        use_structured_content=True,
        client_session_timeout_seconds=30,
    )


def memory_agent(server: MCPServerStdio, model: str | None = None) -> Agent[Any]:
    """An agent whose tools are Noema's."""
    return Agent(
        name="assistant",
        instructions=INSTRUCTIONS,
        mcp_servers=[server],
        **({"model": model} if model else {}),
    )


class ToolFailed(Exception):
    """A tool answered with an error (``invalid: …``, ``unavailable: no running Noema found …``)."""


async def call(agent: Agent[Any], name: str, arguments: dict[str, Any]) -> Any:
    """Call one of the agent's tools as the runner does when the model picks it; returns its output
    (Noema's structured content, decoded). A tool that fails gives the model its text, not JSON:
    raises :class:`ToolFailed` with it."""
    tools = {t.name: t for t in await agent.get_mcp_tools(RunContextWrapper(context=None))}
    tool = tools[name]
    assert isinstance(tool, FunctionTool)
    raw = json.dumps(arguments)
    context = ToolContext(context=None, tool_name=name, tool_call_id=f"call-{name}", tool_arguments=raw)
    output = await tool.on_invoke_tool(context, raw)
    if isinstance(output, str):
        try:
            return json.loads(output)
        except ValueError:
            raise ToolFailed(output) from None
    # An error result: the SDK hands the model the text of the result's content.
    text = output.get("text") if isinstance(output, dict) else None
    raise ToolFailed(str(text or output))


def forwarded_env() -> dict[str, str]:
    """What the server needs of this process's environment to find Noema: the ``NOEMA_*`` variables
    (``NOEMA_DATA_DIR``, external servers' URLs; the SDK starts it with a minimal environment)."""
    return {k: v for k, v in os.environ.items() if k.startswith("NOEMA_")}


async def demo(server: MCPServerStdio) -> dict[str, Any]:
    """No model: the agent's tools, a fact proposed, then recalled (waiting for it to be projected)."""
    agent = memory_agent(server)
    tools = await agent.get_mcp_tools(RunContextWrapper(context=None))
    proposed = await call(
        agent,
        "propose_fact",
        {"domain": "ops", "topic": "deploy-day", "content": "Deploys happen on Tuesdays"},
    )
    found: list[dict[str, Any]] = []
    for _ in range(150):  # the fact is searchable once the projector applied it (milliseconds)
        found = (await call(agent, "search_memory", {"query": "deploys tuesdays", "mode": "keyword"}))[
            "results"
        ]
        if found:
            break
        await asyncio.sleep(0.2)
    return {"tools": sorted(t.name for t in tools), "proposed": proposed, "found": found}


async def main(question: str | None) -> int:
    set_tracing_disabled(True)  # traces would go to OpenAI's platform; opt in if you want them
    async with noema_server(
        os.environ.get("NOEMA_WORKSPACE", "acme"),
        os.environ.get("NOEMA_AGENT", "assistant"),
        env=forwarded_env(),
    ) as server:
        if os.environ.get("OPENAI_API_KEY") and question:
            result = await Runner.run(memory_agent(server), question)
            print(result.final_output)
            return 0
        try:
            print(json.dumps(await demo(server), indent=2))
        except ToolFailed as failed:
            print(f"error: {failed}", file=sys.stderr)  # e.g. no running Noema found: start it
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(" ".join(sys.argv[1:]) or None)))
