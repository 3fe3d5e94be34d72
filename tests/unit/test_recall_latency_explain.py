"""bench.recall_latency's ``--explain`` records the statements of real searches through a stand-in
pool (``_Recorder``): it must offer every method of a pool and of a connection the recall voices
use, or a search under it fails where the store's own pool would not."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from bench import recall_latency

from noema.adapters.postgres.voices import RecallStore
from noema.ports import RecallFilters


class _Connection:
    """Answers every statement with no rows; keeps what it was sent and whether in a transaction."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def fetch(self, sql: str, *args: Any) -> list[Any]:
        self.log.append(sql)
        return []

    async def execute(self, sql: str, *args: Any) -> str:
        self.log.append(sql)
        return "SET"

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        self.log.append("BEGIN")
        yield
        self.log.append("COMMIT")


class _Pool:
    def __init__(self) -> None:
        self.log: list[str] = []

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[_Connection]:
        yield _Connection(self.log)

    async def fetch(self, sql: str, *args: Any) -> list[Any]:
        self.log.append(sql)
        return []


async def test_the_graph_walk_runs_under_the_recorder_in_its_own_transaction() -> None:
    pool = _Pool()
    recorder = recall_latency._Recorder(pool)
    store = RecallStore(recorder, False)  # a stand-in pool, as _explain gives it
    now = datetime.now(UTC)
    walked, rows = await store.graph({"m1": 1.0}, RecallFilters(workspace="bench"), 10, None, now)
    assert (walked, rows) == ([], {})
    assert [recall_latency._statement(sql) for sql, _ in recorder.sent] == [None, "graph_walk"]
    assert pool.log[0] == "BEGIN"
    assert pool.log[-1] == "COMMIT"
    assert "plan_cache_mode = force_generic_plan" in pool.log[1]
