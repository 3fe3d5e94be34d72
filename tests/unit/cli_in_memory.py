"""``noemactl`` over the in-memory composition: the CLI's commands run in process (Typer's test
runner, in a thread of their own, as each command runs its own event loop) against the application
facade of the in-memory API harness (:mod:`tests.unit.api_in_memory`), which the CLI opens in place
of the servers' :class:`~noema.composition.instance.Instance` (and of the reader of memory alone,
:func:`~noema.composition.reader.open_reader`). The CLI as a process against the real
servers is tested in tests/integration/test_cli_reads.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
import traceback
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import typer.main
import typer.testing
from typer.testing import CliRunner

from noema.composition import reader
from noema.composition.instance import Instance
from noema_cli import lazy
from noema_cli.main import app as noemactl
from tests.unit.api_in_memory import InMemoryApi, in_memory_api

__all__ = ["Ran", "api", "ctl", "ctl_json", "opened_in_process"]

ENV = {
    # External servers by URL, so that nothing is looked for; the CLI opens the in-memory app instead.
    "NOEMA_NATS_URL": "nats://in-memory:4222",
    "NOEMA_DATABASE_URL": "postgresql://in-memory/noema",
    "NOEMA_EMBEDDER": "none",
    "USER": "carol",
}


_COMMANDS: dict[int, Any] = {}


def _command(app: typer.Typer) -> Any:
    """The Click command of a Typer app, built once (as a process builds it once): building it takes
    most of an in-process command's time. noemactl's is the tree its process runs (each command
    made on first use, :mod:`noema_cli.lazy`)."""
    if id(app) not in _COMMANDS:
        _COMMANDS[id(app)] = lazy.command(app) if app is noemactl else typer.main.get_command(app)
    return _COMMANDS[id(app)]


@dataclass(frozen=True)
class Ran:
    code: int
    stdout: str
    stderr: str


async def ctl(api: InMemoryApi, *args: str, stdin: bytes = b"") -> Ran:
    """Run a noemactl command against ``api``'s in-memory composition, with ``stdin`` on its standard
    input. An exception that escapes the command is in its stderr, as the process would print it."""
    runner = CliRunner()
    result = await asyncio.to_thread(runner.invoke, noemactl, list(args), input=stdin, env=ENV)
    stderr = result.stderr
    # A command that ends (exit 0 too) leaves exc_info set with no exception: only an escaped one prints.
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return Ran(result.exit_code, result.stdout, stderr)


async def ctl_json(api: InMemoryApi, *args: str) -> Any:
    """A command's ``--json`` answer (it must succeed)."""
    ran = await ctl(api, *args, "--json")
    assert ran.code == 0, ran.stderr
    return json.loads(ran.stdout)


def opened_in_process(harness: InMemoryApi, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the CLI's commands, run in process, open ``harness``'s facade as their running instance."""

    @contextlib.asynccontextmanager
    async def opened(*args: Any, **kwargs: Any) -> AsyncIterator[Instance]:
        yield harness.instance

    monkeypatch.setattr(Instance, "open", opened)
    monkeypatch.setattr(reader, "open_reader", opened)  # the reads of memory alone (a search)
    monkeypatch.setattr(typer.testing, "_get_command", _command)


@pytest.fixture
async def api(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[InMemoryApi]:
    """The in-memory API harness, which the CLI's commands open as their running instance."""
    async with in_memory_api() as harness:
        opened_in_process(harness, monkeypatch)
        yield harness
