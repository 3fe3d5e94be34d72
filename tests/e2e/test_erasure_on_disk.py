"""Erasure is physical (docs/privacy.md): on a running ``noemactl up`` (embedded default, real
vectors), a marker observed about a subject becomes a memory, a vector, a recall and a dead letter;
after ``noemactl erase --subject`` and ``noemactl compact`` no file of the instance — the NATS store,
PostgreSQL's data and write-ahead log, the logs — holds the marker's bytes, and replay still matches.

An agent's poison message on its own subject — JSON nested 5,000 levels deep, naming the subject —
stays in the observation stream (attend dead-letters a copy): the erasure's scan skips decoding it
(docs/reliability.md, bounded decoding), matches it by its bytes, and deletes it with the rest."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest

from tests.faults.instance import Instance, eventually, running

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

MARKER = b"zqxmarker4711"
PERSON = "person:4711"


@pytest.fixture
async def instance(request: pytest.FixtureRequest) -> AsyncIterator[Instance]:
    async with running(request, {}) as inst:  # the default embedder: vectors are part of what is erased
        yield inst


def files_holding(root: Path, needle: bytes) -> list[str]:
    """Every file under ``root`` whose bytes contain ``needle``."""
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                if needle in path.read_bytes():
                    found.append(str(path.relative_to(root)))
            except OSError:
                continue  # a file removed while scanning (a WAL segment, a socket)
    return sorted(found)


async def test_after_erase_and_compact_no_file_of_the_instance_holds_the_erased_text(
    instance: Instance,
) -> None:
    text = f"{MARKER.decode()}: Ann's phone number is 555-0199"
    stored = instance.ctl("observe", text, "-w", "acme", "-m", "ops", "--subject", PERSON, "--json")
    assert stored.returncode == 0, stored.stderr
    assert (
        instance.ctl("observe", "the deploy key rotates on Fridays", "-w", "acme", "-m", "ops").returncode
        == 0
    )
    assert instance.nc is not None
    await instance.nc.publish("noema.obs.acme.ops", f'{{"broken": "{MARKER.decode()} {PERSON}'.encode())
    await instance.nc.flush()
    await _publish_poison_as_an_agent(instance)
    assert instance.pool is not None
    pool = instance.pool

    async def embedded() -> bool:
        return bool(
            await pool.fetchval(
                "SELECT count(*) = 2 FROM memory_embeddings e JOIN memories m ON m.id = e.memory_id "
                "WHERE m.workspace = 'acme'"
            )
        )

    await eventually(embedded, 300, 1.0, "both memories embedded")
    found = instance.ctl("memory", "search", MARKER.decode(), "-w", "acme", "--json")
    assert found.returncode == 0, found.stderr
    assert MARKER.decode() in found.stdout  # recalled: a memory.retrieved with the query, sealed
    await instance.settle()
    assert files_holding(instance.root, MARKER)  # the scan below can see it: the read model has it

    erased = instance.ctl("erase", "-w", "acme", "--subject", PERSON, "--reason", "request 812", "--json")
    assert erased.returncode == 0, erased.stderr
    report = json.loads(erased.stdout)
    assert report["keys_destroyed"] is True
    assert report["observations_deleted"] == 3  # the one observed, the broken bytes, the poison
    assert report["dead_letters_deleted"] == 2
    compacted = instance.ctl("compact")
    assert compacted.returncode == 0, compacted.stderr

    assert files_holding(instance.root, MARKER) == []
    searched = instance.ctl("memory", "search", MARKER.decode(), "-w", "acme", "--json")
    assert searched.returncode == 0, searched.stderr
    results = json.loads(searched.stdout)["results"]
    assert MARKER.decode() not in json.dumps(results)
    assert [r["content"] for r in results] == ["the deploy key rotates on Fridays"]  # by meaning only
    kept = instance.ctl("memory", "search", "deploy key", "-w", "acme", "--json")
    assert "Fridays" in kept.stdout
    await instance.assert_replay_matches()


async def _publish_poison_as_an_agent(instance: Instance) -> None:
    """As agent ``mallory`` (its own credentials), on its own observation subject: an observation
    about the subject whose payload also nests 5,000 levels deep (~10 KB)."""
    added = instance.ctl("agent", "add", "-w", "acme", "-a", "mallory", "-r", "engineer", "--json")
    assert added.returncode == 0, added.stderr
    who = json.loads(added.stdout)
    head = (
        '{"type":"observation.recorded.v1","workspace":"acme","mind":"mallory",'
        f'"payload":{{"subjects":["{PERSON}"],"content":"{MARKER.decode()} poison","deep":'
    ).encode()
    poison = head + b"[" * 5_000 + b"]" * 5_000 + b"}}"
    agent = await nats.connect(who["url"], user=who["user"], password=who["password"])
    try:
        await agent.publish("noema.obs.acme.mallory", poison)
        await agent.flush()
    finally:
        await agent.close()
