"""Test helpers: bounded waiting instead of sleeps, and events as the workers publish them."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import asyncpg
from nats.js.client import JetStreamContext
from nats.js.errors import NotFoundError

from noema.adapters.postgres.voices import RecallStore
from noema.application.search import Recall, SearchResult
from noema.ids import new_id
from noema.ports import RecallFilters
from noema_events import (
    AttentionDecided,
    AttentionDecidedPayload,
    AttentionDecision,
    MemoryCreated,
    MemoryCreatedPayload,
)

__all__ = [
    "T0",
    "assert_eventually",
    "attention_decided",
    "envelope",
    "keyword_search",
    "memory_created",
]

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
"""The application clock of the in-memory and contract tests."""


def envelope(
    workspace: str = "acme", mind: str = "ops", at: datetime = T0, actor: str = "attend"
) -> dict[str, Any]:
    """The envelope of an event that starts its own correlation."""
    event_id = new_id()
    return {
        "id": event_id,
        "workspace": workspace,
        "mind": mind,
        "occurred_at": at,
        "correlation_id": event_id,
        "actor": actor,
    }


def memory_created(
    content: str,
    *,
    workspace: str = "acme",
    mind: str = "ops",
    at: datetime = T0,
    memory_id: str | None = None,
    **payload: Any,
) -> MemoryCreated:
    """A ``memory.created`` as attend publishes it (an episodic observation unless told)."""
    fields = {"kind": "episodic", "epistemic_kind": "observation", **payload}
    return MemoryCreated(
        **envelope(workspace, mind, at),
        payload=MemoryCreatedPayload(memory_id=memory_id or new_id(), content=content, **fields),
    )


def attention_decided(decisions: Sequence[AttentionDecision], workspace: str = "acme") -> AttentionDecided:
    """An attention cycle's outcome as attend publishes it."""
    payload = AttentionDecidedPayload(decisions=list(decisions), threshold=0.5, capacity=7)
    return AttentionDecided(**envelope(workspace), payload=payload)


PATIENCE = float(os.environ.get("NOEMA_TEST_PATIENCE") or (3 if os.environ.get("PYTEST_XDIST_WORKER") else 1))
"""How much longer than its ``timeout`` :func:`assert_eventually` waits: 3 × when several test
processes share the machine (pytest-xdist, ``make test``), else 1 × (``NOEMA_TEST_PATIENCE`` sets
it). A timeout here only bounds how long a failing test takes to say so: never a speed target."""


async def assert_eventually(
    check: Callable[[], Awaitable[Any]],
    timeout: float = 10.0,
    interval: float = 0.05,
    what: str = "condition",
) -> Any:
    """Poll ``check`` until it returns a truthy value (returned) or raise after ``timeout`` (times
    :data:`PATIENCE`), naming ``what`` was waited for."""
    timeout *= PATIENCE
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"{what} not met within {timeout}s (last value: {last!r})")


async def consumer_drained(js: JetStreamContext, stream: str, durable: str) -> bool:
    """The durable consumer exists and has nothing pending or unacknowledged (the claimed workers
    create theirs only once they own their claim, so a missing one is not drained yet)."""
    try:
        info = await js.consumer_info(stream, durable)
    except NotFoundError:
        return False
    return bool(info.num_pending == 0 and info.num_ack_pending == 0)


async def keyword_search(pool: asyncpg.Pool, query: str, workspace: str | None = None) -> list[SearchResult]:
    """What ``noemactl memory search --mode keyword`` returns: active memories, best first."""
    recall = Recall(await RecallStore.open(pool), None)
    return (await recall.search(query, RecallFilters(workspace=workspace), mode="keyword")).results
