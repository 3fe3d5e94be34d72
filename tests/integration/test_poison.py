"""Poison messages on every subject the workers read: dead-lettered with the reason, never a stop.

The corpus of issue 11 (deep nesting, 1e999, invalid UTF-8, 5 MB fields, wrong types, NUL, a body
on another scope's subject, and an event the database refuses) is published on the observation,
recall and event subjects, interleaved with 1,000 valid observations, while attend, the projector,
retrieve, embed and conflicts run. Every valid observation must become exactly one memory, every
poison message must be in the dead-letter stream with its reason, no worker may stop, and replay
must still reproduce the read model.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from noema.adapters.deadletters import DeadLetterQuery, DeadLetters
from noema.adapters.jetstream import EventPublisher
from noema.adapters.postgres import checksum, connect
from noema.client import build_observation, publish_observation
from noema.composition.replay import drop_schema, replay_into
from noema.domain.attention import AttentionConfig, decide_cycle, memory_id_for
from noema.ids import new_id
from noema.runtime.worker import Service
from noema_attend.service import build as build_attend
from noema_conflicts.service import build as build_conflicts
from noema_embed.service import build as build_embed
from noema_events import MemoryCreated, encode_event
from noema_projector.service import build as build_projector
from noema_retrieve.service import build as build_retrieve
from tests.conftest import Harness
from tests.support import assert_eventually

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

VALID = 1_000
FIVE_MB = 5 * 1024 * 1024


def _observation(mind: str = "ops") -> dict[str, Any]:
    obs = build_observation("a template observation", workspace="acme", mind=mind)
    raw: dict[str, Any] = json.loads(encode_event(obs))
    return raw


def _memory_created() -> dict[str, Any]:
    obs = build_observation("a template memory", workspace="acme", mind="ops")
    [created] = [
        e
        for e in decide_cycle([obs], datetime.now(UTC), AttentionConfig(threshold=0.0))
        if isinstance(e, MemoryCreated)
    ]
    raw: dict[str, Any] = json.loads(encode_event(created))
    raw["id"] = new_id()
    return raw


def _recall() -> dict[str, Any]:
    return {
        "type": "recall.proposed.v1",
        "id": new_id(),
        "workspace": "acme",
        "mind": "ops",
        "occurred_at": datetime.now(UTC).isoformat(),
        "correlation_id": new_id(),
        "actor": "retrieve",
        "payload": {"memory_id": new_id(), "observation_id": new_id(), "score": 0.9, "content": "x"},
    }


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def _with(template: Callable[[], dict[str, Any]], path: tuple[str, ...], raw_value: bytes) -> bytes:
    """The template with one field's JSON replaced by ``raw_value`` (bytes spliced in as they are)."""
    doc = template()
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = "\x1fSPLICE\x1f"
    return json.dumps(doc).encode().replace(b'"\\u001fSPLICE\\u001f"', raw_value)


def corpus(
    template: Callable[[], dict[str, Any]], content: tuple[str, ...], number: tuple[str, ...]
) -> list[tuple[str, bytes, str]]:
    """(name, bytes, expected reason fragment) for one kind of message."""
    return [
        ("deep nesting", _with(template, content, _nested(5_000)), "levels deep; the limit is 32"),
        ("nesting of depth 1000", _with(template, content, _nested(1_000)), "levels deep"),
        ("1e999", _with(template, number, b"1e999"), "Number out of range"),
        ("invalid UTF-8", _with(template, content, b'"caf\xc3\x28 \xff"'), "UTF-8"),
        ("5 MB field", _with(template, content, b'"' + b"x" * FIVE_MB + b'"'), "the limit is"),
        ("wrong type", _with(template, content, b"42"), "Expected `str`"),
        ("NUL", _with(template, content, b'"a\\u0000b"'), "NUL"),
        ("not JSON", b"\xff{not json", "not valid JSON"),
    ]


async def test_poison_on_every_subject_is_dead_lettered_and_every_valid_observation_becomes_memory(
    harness: Harness,
) -> None:
    await harness.start(build_projector)  # a worker that stops fails the test at teardown
    # Recall by text alone: the poison is what is under test, not 1,000 query embeddings.
    keyword_only = replace(harness.settings, embedder="none")
    producers = []
    for build, settings in (
        (build_attend, harness.settings),
        (build_embed, harness.settings),
        (build_conflicts, harness.settings),
        (build_retrieve, keyword_only),
    ):
        worker = await build(settings, harness.stack)
        task = asyncio.create_task(worker.run())
        harness.stack.push_async_callback(_stop, worker, task)
        producers.append((worker, task))
    t = harness.topology
    obs_subject = t.observation_subject("acme", "ops")
    poison: list[tuple[str, str, bytes, str]] = []  # (subject, name, bytes, expected reason)
    for name, data, reason in corpus(_observation, ("payload", "content"), ("payload", "salience")):
        poison.append((obs_subject, f"observation: {name}", data, reason))
    for name, data, reason in corpus(_recall, ("payload", "content"), ("payload", "score")):
        poison.append((t.recall_subject("acme", "ops"), f"recall: {name}", data, reason))
    event_subject = t.event_subject_for("acme", "ops", "memory.created")
    for name, data, reason in corpus(_memory_created, ("payload", "content"), ("payload", "importance")):
        poison.append((event_subject, f"event: {name}", data, reason))
    fact_subject = t.event_subject_for("acme", "_", "fact.proposed")
    poison += [
        (t.observation_subject("acme", "other"), "observation on another mind's subject",
         json.dumps(_observation("ops")).encode(), "does not match"),
        (t.event_subject_for("evil", "ops", "memory.created"), "event on another workspace's subject",
         json.dumps(_memory_created()).encode(), "does not match"),
        (fact_subject, "an observation on a fact subject", json.dumps(_observation()).encode(),
         "does not match"),
        (t.event_subject_for("acme", "ops", "relationship.added"), "an edge the database refuses",
         _edge_between_minds(), "refused by the database"),
    ]  # fmt: skip

    valid_ids = [f"valid-{i:04d}" for i in range(VALID)]
    every = VALID // len(poison)
    published: list[tuple[int, str, str, str]] = []  # (stream seq, stream, name, expected reason)
    pending = list(poison)
    for i, obs_id in enumerate(valid_ids):
        if i % every == 0 and pending:
            subject, name, data, reason = pending.pop(0)
            ack = await harness.js.publish(subject, data, timeout=30)
            published.append((ack.seq, ack.stream, name, reason))
        await publish_observation(
            harness.js,
            f"valid observation number {i} about the deploy key",
            workspace="acme",
            mind="ops" if i % 2 else "dev",
            observation_id=obs_id,
            topology=t,
            timeout=30,  # a busy machine: the 5 MB messages take the server a while
        )
    assert not pending

    memories = await assert_eventually(
        lambda: _count_when(harness, "SELECT count(*) FROM memories WHERE workspace = 'acme'", VALID),
        timeout=240,
    )
    assert memories == VALID
    ids = {r["id"] for r in await harness.pool.fetch("SELECT id FROM memories WHERE workspace = 'acme'")}
    assert ids == {memory_id_for(o) for o in valid_ids}
    created = await harness.pool.fetchrow(
        "SELECT count(*) AS events, count(DISTINCT id) AS ids FROM events WHERE type = 'memory.created.v1'"
    )
    assert (created["events"], created["ids"]) == (VALID, VALID)  # one per observation, none twice

    letters = await assert_eventually(lambda: _dead_letters(harness, len(published)), timeout=60)
    for seq, stream, name, reason in published:
        letter = letters.get((stream, seq))
        assert letter is not None, f"{name} (seq {seq} of {stream}) was not dead-lettered"
        assert reason in letter["Noema-Error"], f"{name}: {letter['Noema-Error']!r}"
        assert letter["Noema-Error-Kind"] == "invalid"
        owner = "attend" if stream == t.observation_stream else "projector"
        assert letter["Noema-Source"] == owner
    assert len(letters) == len(published)  # and nothing valid was dead-lettered
    # What `noemactl dlq list` (and GET /v1/dead-letters) shows: every one, with its reason.
    tooling = DeadLetters(harness.nc, t, EventPublisher(harness.nc, t))
    page = await tooling.list(DeadLetterQuery(limit=len(published)))
    listed = {(item.original_stream, item.original_seq): item for item in page.items}
    assert set(listed) == {(stream, seq) for seq, stream, _, _ in published}
    for seq, stream, name, reason in published:
        assert reason in listed[(stream, seq)].reason, name

    # Replay is compared at one stream position: the event producers stop, the projector catches up.
    for worker, task in producers:
        await _stop(worker, task)
    await assert_eventually(lambda: _projected_all(harness), timeout=60)
    schema = f"replay_{t.prefix}"
    try:
        result = await replay_into(harness.nc, harness.settings.database_url or "", t, schema)
        conn = await connect(harness.settings.database_url or "", harness.settings.db_schema)
        try:
            assert result.checksum == await checksum(conn)
        finally:
            await conn.close()
    finally:
        await drop_schema(harness.settings.database_url or "", schema)


async def _stop(worker: Service, task: asyncio.Task[None]) -> None:
    worker.shutdown()
    await asyncio.wait_for(asyncio.shield(task), 60)  # re-raises the worker's exception, if any


def _edge_between_minds() -> bytes:
    """A relationship from an ops memory to a dev memory: relationships stay within one mind, which
    the database enforces, so the projector can only refuse it."""
    return json.dumps(
        {
            "type": "relationship.added.v1",
            "id": new_id(),
            "workspace": "acme",
            "mind": "ops",
            "occurred_at": datetime.now(UTC).isoformat(),
            "correlation_id": new_id(),
            "actor": "poisoner",
            "payload": {
                "relationship_id": new_id(),
                "from_id": memory_id_for("valid-0001"),
                "to_id": memory_id_for("valid-0002"),
                "relation": "supports",
            },
        }
    ).encode()


async def _projected_all(harness: Harness) -> bool:
    last = (await harness.js.stream_info(harness.topology.event_stream)).state.last_seq
    position = await harness.pool.fetchval("SELECT last_seq FROM projection_position")
    return bool(position == last)


async def _count_when(harness: Harness, sql: str, wanted: int) -> int | None:
    count = int(await harness.pool.fetchval(sql))
    return count if count >= wanted else None


async def _dead_letters(harness: Harness, wanted: int) -> dict[tuple[str, int], dict[str, str]] | None:
    """Every dead letter's headers by the original's (stream, seq), once there are ``wanted``."""
    t = harness.topology
    info = await harness.js.stream_info(t.dead_letter_stream)
    if info.state.messages < wanted:
        return None
    out: dict[tuple[str, int], dict[str, str]] = {}
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        msg = await harness.js.get_msg(t.dead_letter_stream, seq)
        headers = dict(msg.headers or {})
        out[(headers["Noema-Original-Stream"], int(headers["Noema-Original-Seq"]))] = headers
    return out
