"""`noemactl`, run as a user runs it (a process) against the real servers: a decay tick publishes
through the facade, and `observe -` stores what standard input says and refuses too much with exit 2,
without a traceback. Its listings answer what the HTTP API answers over both compositions in
tests/contract/test_cli_reads.py; the other commands' answers and refusals run in process over the
in-memory composition in tests/unit/test_cli_in_memory.py."""

from __future__ import annotations

import json

import pytest

from noema_events import ObservationRecorded, decode_event
from tests.integration.api_harness import ApiHarness, api, memory
from tests.integration.cli_process import ctl, ctl_json, ctl_loaded
from tests.unit.test_cli_imports import NOT_FOR_A_KEYWORD_SEARCH

pytestmark = [pytest.mark.integration, pytest.mark.slow]
__all__ = ["api"]  # the fixture, imported for pytest


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


async def test_a_keyword_search_answers_without_loading_what_it_does_not_need(api: ApiHarness) -> None:
    """The whole way, from the command line to the answer (tests/unit/test_cli_imports.py checks
    it as far as the read model): no logging machinery, event catalog or listing is loaded
    (issue 32: a keyword search's start-up, timed by python -m bench.startup)."""
    await api.given(memory("the deploy key rotates on Fridays"))
    await api.caught_up()
    ran, loaded = await ctl_loaded(api, "memory", "search", "deploy key", "--mode", "keyword", "--json")
    assert ran.code == 0, ran.stderr
    answer = json.loads(ran.stdout)
    assert [r["content"] for r in answer["results"]] == ["the deploy key rotates on Fridays"]
    assert "asyncpg" in loaded  # it did read the read model
    unexpected = sorted(m for m in loaded if m.split(".")[0] == "structlog" or m in NOT_FOR_A_KEYWORD_SEARCH)
    assert unexpected == []
