"""`noemactl` over both compositions, for the scenarios written once and run on each: in process over
the in-memory pipeline (tests/unit/cli_in_memory.py, the fast tier) and as a process, as a user runs
it, against the real servers (tests/integration/cli_process.py, marked ``integration``).

A test asks for ``either_cli``: the API it is compared with (``cli.api``, as in
tests/contract/api_backends.py) and the command line (``cli.ctl``, ``cli.ctl_json``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.contract.api_backends import AnyApi, api, api_over_servers
from tests.integration import cli_process
from tests.integration.api_harness import ApiHarness
from tests.unit import cli_in_memory
from tests.unit.api_in_memory import in_memory_api

__all__ = ["Cli", "api", "api_over_servers", "at_about_the_same_time", "either_cli", "from_api"]


@dataclass
class Cli:
    """The command line over one composition, and the API over the same."""

    api: AnyApi
    _run: Callable[..., Awaitable[Any]]

    async def ctl(self, *args: str, stdin: bytes = b"") -> Any:
        """Run a command (a ``Ran``: its exit code, stdout and stderr)."""
        return await self._run(self.api, *args, stdin=stdin)

    async def ctl_json(self, *args: str) -> Any:
        """A command's ``--json`` answer (it must succeed)."""
        ran = await self.ctl(*args, "--json")
        assert ran.code == 0, ran.stderr
        return json.loads(ran.stdout)


@pytest.fixture
async def either_cli(
    api_over_servers: ApiHarness | None, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Cli]:
    """Each scenario once per composition."""
    if api_over_servers is not None:
        yield Cli(api_over_servers, cli_process.ctl)
        return
    async with in_memory_api() as harness:
        cli_in_memory.opened_in_process(harness, monkeypatch)
        yield Cli(harness, cli_in_memory.ctl)


async def from_api(api: AnyApi, path: str, **params: str) -> Any:
    """The API's answer, but for a page's ``next``: the link is HTTP's (the CLI has ``next_offset``)."""
    res = await api.admin.get(path, params=params)
    assert res.status_code == 200, res.text
    answer = res.json()
    if isinstance(answer, dict) and answer.get("next"):
        answer["next"] = None
    return at_about_the_same_time(answer)


class _AnActivation:
    """Equal to any activation: one the API answers at its pinned clock (``NOW``, when the test's
    memories were made) and the CLI at the real time, and a read computes activation at its time."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _AnActivation) or (isinstance(other, float) and 0.0 < other <= 1.0)

    def __repr__(self) -> str:
        return "<an activation>"


def at_about_the_same_time(answer: Any) -> Any:
    """``answer`` with each activation left to :class:`_AnActivation` (the rest compared exactly)."""
    if isinstance(answer, dict):
        return {
            k: _AnActivation() if k == "activation" else at_about_the_same_time(v) for k, v in answer.items()
        }
    if isinstance(answer, list):
        return [at_about_the_same_time(v) for v in answer]
    return answer
