"""Test helpers: bounded waiting instead of sleeps."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from noema.adapters.postgres.voices import RecallFilters, RecallStore
from noema.application.search import Recall, SearchResult

__all__ = ["assert_eventually", "keyword_search"]


async def assert_eventually(
    check: Callable[[], Awaitable[Any]],
    timeout: float = 10.0,
    interval: float = 0.05,
    what: str = "condition",
) -> Any:
    """Poll ``check`` until it returns a truthy value (returned) or raise after ``timeout``, naming
    ``what`` was waited for."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"{what} not met within {timeout}s (last value: {last!r})")


async def keyword_search(pool: asyncpg.Pool, query: str, workspace: str | None = None) -> list[SearchResult]:
    """What ``noemactl memory search --mode keyword`` returns: active memories, best first."""
    recall = Recall(await RecallStore.open(pool), None)
    return (await recall.search(query, RecallFilters(workspace=workspace), mode="keyword")).results
