"""The framework recipes of examples/ run against a live Noema (real NATS and PostgreSQL, the
projector and conflicts workers), without any model: each lists Noema's tools through its framework,
proposes a fact and recalls it, and the fact's event names the recipe's agent.

The OpenAI Agents SDK recipe runs in this environment (the `recipes` extra); the LangChain/LangGraph
one in its own, `.venv-langchain` (`make setup`; langchain-mcp-adapters needs the MCP SDK below 2),
as a LangChain application would: a process of its own talking to `noemactl mcp serve` over stdio."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from noema.application.tools import TOOLS
from noema_conflicts.service import build as build_conflicts
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.integration.test_knowledge import settled
from tests.integration.test_mcp import code_path, events

ROOT = Path(__file__).resolve().parents[2]
LANGCHAIN_PYTHON = ROOT / ".venv-langchain" / "bin" / "python"


def serve(agent: str) -> list[str]:
    """The MCP server's command line for ``agent`` in this environment (= ``noemactl mcp serve``)."""
    return [sys.executable, "-m", "noema_mcp", "--workspace", "acme", "--agent", agent]


def example(relative: str) -> ModuleType:
    path = ROOT / "examples" / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def recalled_by(harness: Harness, agent: str, outcome: dict[str, Any]) -> None:
    """What the recipe printed: every tool, its fact proposed and then found; the event names it."""
    assert outcome["tools"] == sorted(TOOLS)
    assert outcome["proposed"]["outcome"] == "proposed"
    assert [hit["id"] for hit in outcome["found"]] == [outcome["proposed"]["memory_id"]]
    await settled(harness)
    [proposed] = await events(harness, type="fact.proposed.v2")
    assert (proposed["actor"], proposed["payload"]["memory_id"]) == (agent, outcome["proposed"]["memory_id"])


async def test_the_openai_agents_recipe_lists_proposes_and_recalls_through_its_agent(
    harness: Harness,
) -> None:
    from agents import set_tracing_disabled

    await harness.start(build_projector)
    await harness.start(build_conflicts)
    recipe = example("openai_agents/noema_agent.py")
    set_tracing_disabled(True)
    command, *args = serve("carol")
    server = recipe.noema_server("acme", "carol", command=command, args=args, env=harness.settings.to_env())
    async with server:
        outcome = await recipe.demo(server)
    assert outcome["found"][0]["content"] == "Deploys happen on Tuesdays"
    await recalled_by(harness, "carol", outcome)


async def test_the_langchain_recipe_runs_the_tools_in_a_langgraph_graph_from_its_own_environment(
    harness: Harness, tmp_path: Path
) -> None:
    assert LANGCHAIN_PYTHON.exists(), "the LangChain recipe's environment is missing: run `make setup`"
    await harness.start(build_projector)
    await harness.start(build_conflicts)
    script = ROOT / "examples" / "langchain" / "noema_tools.py"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)} | harness.settings.to_env()
    process = await asyncio.create_subprocess_exec(
        str(LANGCHAIN_PYTHON),
        str(script),
        "--",
        *serve("dave"),
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()
    outcome = json.loads(out)
    assert outcome["found"][0]["content"] == "Releases happen on Thursdays"
    await recalled_by(harness, "dave", outcome)


@pytest.mark.integration
async def test_the_openai_agents_recipe_says_noema_is_not_running_and_forwards_noema_data_dir(
    tmp_path: Path,
) -> None:
    # NOEMA_DATA_DIR names a folder where nothing runs: the server the SDK starts must look there
    # (the recipe forwards NOEMA_*), and the recipe says what the tool said instead of crashing.
    data_dir = tmp_path / "elsewhere" / "var"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "NOEMA_DATA_DIR": str(data_dir)}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(ROOT / "examples" / "openai_agents" / "noema_agent.py"),
        cwd=tmp_path,
        env=env | code_path(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 1, err.decode()
    assert "Traceback" not in err.decode()
    assert f"error: unavailable: no running Noema found in {data_dir}" in err.decode()
