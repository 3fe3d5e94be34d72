"""`noemactl`, run as a user runs it (a process) against the real servers: its listings answer what
the HTTP API answers (one implementation behind both), a decay tick publishes through the facade, and
`observe -` stores what standard input says and refuses too much with exit 2, without a traceback.
The other commands' answers and refusals run in process over the in-memory composition in
tests/unit/test_cli_in_memory.py."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from noema_events import ObservationRecorded, decode_event
from tests.integration.api_harness import ApiHarness, api, memory, retraction

pytestmark = [pytest.mark.integration, pytest.mark.slow]
__all__ = ["api"]  # the fixture, imported for pytest

NOEMACTL = [sys.executable, "-m", "noema_cli.main"]
JANUARY = datetime(2024, 1, 15, tzinfo=UTC)


@dataclass(frozen=True)
class Ran:
    code: int
    stdout: str
    stderr: str


async def ctl(api: ApiHarness, *args: str, stdin: bytes = b"") -> Ran:
    """Run noemactl against the test's servers (without blocking the in-process projector), with
    ``stdin`` on its standard input."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA_")}
    env |= {**api.h.settings.to_env(), "NOEMA_EMBEDDER": "none", "USER": "carol"}
    proc = await asyncio.create_subprocess_exec(
        *NOEMACTL,
        *args,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), 120)
    assert proc.returncode is not None
    return Ran(proc.returncode, out.decode(), err.decode())


async def ctl_json(api: ApiHarness, *args: str) -> Any:
    ran = await ctl(api, *args, "--json")
    assert ran.code == 0, ran.stderr
    return json.loads(ran.stdout)


async def from_api(api: ApiHarness, path: str, **params: str) -> Any:
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


async def test_list_and_timeline_filter_and_answer_exactly_what_the_api_answers(api: ApiHarness) -> None:
    billing, episode, hr = await api.given(
        memory("a fact about billing", domain="billing", happened_at=datetime(2024, 6, 1, tzinfo=UTC)),
        memory("an episode", kind="episodic", epistemic_kind="observation", happened_at=JANUARY),
        memory("a fact about hr", domain="hr"),
    )
    await api.given(retraction(hr))

    for flags, params in [
        ([], {}),
        (["--kind", "episodic"], {"kind": "episodic"}),
        (["-e", "observation"], {"epistemic_kind": "observation"}),
        (["--status", "retracted"], {"status": "retracted"}),
        (["-d", "billing"], {"domain": "billing"}),
        (["--since", "2024-03-01T00:00:00Z"], {"since": "2024-03-01T00:00:00Z"}),
        (["--until", "2025-01-01T00:00:00Z"], {"until": "2025-01-01T00:00:00Z"}),
        (["--limit", "1", "--offset", "1"], {"limit": "1", "offset": "1"}),
    ]:
        cli = await ctl_json(api, "memory", "list", "-w", "acme", *flags)
        assert cli == await from_api(api, "/v1/memories", workspace="acme", **params), flags
    assert [m["id"] for m in (await ctl_json(api, "memory", "list", "--status", "retracted"))["items"]] == [
        hr
    ]
    assert [m["id"] for m in (await ctl_json(api, "memory", "list", "-d", "billing"))["items"]] == [billing]

    timeline = await ctl_json(api, "memory", "timeline", "-w", "acme", "--order", "asc")
    assert timeline == await from_api(api, "/v1/timeline", workspace="acme", order="asc")
    assert [m["id"] for m in timeline["items"]] == [episode, billing, hr]

    human = await ctl(api, "memory", "timeline", "-w", "acme", "--order", "asc")
    assert human.code == 0, human.stderr
    assert human.stdout.index("an episode") < human.stdout.index("a fact about billing")
    assert "2024-01-15T00:00:00+00:00" in human.stdout


async def test_decay_tick_publishes_one_tick_per_workspace_through_the_facade(api: ApiHarness) -> None:
    await api.given(memory("a fact"), memory("another", workspace="globex"))
    ticked = await ctl_json(api, "decay-tick", "-w", "acme")
    assert ticked == {"workspaces": ["acme"]}
    await api.caught_up()
    rows = await api.h.pool.fetch("SELECT workspace FROM events WHERE type = 'activation.decayed.v2'")
    assert [r["workspace"] for r in rows] == ["acme"]
    no_embedder = await ctl(api, "memory", "embed-missing")
    assert no_embedder.code == 2
    assert "no embedder configured" in no_embedder.stderr


async def test_observe_dash_stores_what_standard_input_says(api: ApiHarness) -> None:
    text = "the deploy failed:\n  step 3 timed out — retried twice"
    ran = await ctl(api, "observe", "-", "-w", "acme", "-m", "ops", "--json", stdin=text.encode() + b"\n")
    assert ran.code == 0, ran.stderr
    stored = await api.h.js.get_msg(api.h.topology.observation_stream, json.loads(ran.stdout)["seq"])
    observation = decode_event(stored.data or b"")
    assert isinstance(observation, ObservationRecorded)
    assert observation.payload.content == text  # the final newline dropped, nothing else

    # At the limit it is stored; one character more is refused with what to do, before any publish.
    limit = await ctl(api, "observe", "-", "-w", "acme", "-m", "ops", "--json", stdin=b"x" * 32_000)
    assert limit.code == 0, limit.stderr
    over = await ctl(api, "observe", "-", "-w", "acme", "-m", "ops", stdin=b"x" * 32_001)
    assert over.code == 2
    assert "at most 32,000 are accepted" in over.stderr
    assert "Traceback" not in over.stderr
