"""The read model's history, bounded (``NOEMA_HISTORY_DAYS``): the projector drops, at most once an
hour, the row versions no point of the last that many days can see, and starts the history there
(:func:`noema.adapters.postgres.history.prune`); a read as of an earlier point is then refused,
saying how to ask (:class:`noema.composition.asof.PointBeforeHistory`).

The bound is a time, the history's points are stream sequences: the first point kept is the last
event the stream had stored that many days ago (by the stream's own clock, as ``--as-of TIME``
maps a time), so every time of the last that many days still answers.

It runs before each fetch of the projector's worker, so it bounds an idle read model too (the
history ages without new events), and a failure (the database or NATS away) is logged and tried
again a minute later, never failing a batch or stopping the worker.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta

import structlog

from noema.adapters.jetstream import last_seq_at
from noema.adapters.postgres import history
from noema.runtime.consumer import JetStream
from noema.runtime.wiring import DbConnection
from noema.topology import Topology

__all__ = ["EVERY_S", "RETRY_S", "HistoryRetention", "history_retention"]

log = structlog.get_logger("noema.projector")

EVERY_S = 3600.0
"""How often the history is bounded."""
RETRY_S = 60.0
"""How soon a bounding that failed is tried again."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


class HistoryRetention:
    """Keeps ``days`` of history (0: all of it, and this does nothing).

    ``seq_at(time)`` is the last stream sequence stored at or before ``time`` (0: none);
    ``prune(seq)`` drops the versions no point from ``seq`` on can see and starts the history at
    ``seq``, returning the versions dropped."""

    def __init__(
        self,
        days: int,
        seq_at: Callable[[datetime], Awaitable[int]],
        prune: Callable[[int], Awaitable[int]],
        *,
        clock: Callable[[], datetime] = _utcnow,
        monotonic: Callable[[], float] = time.monotonic,
        every_s: float = EVERY_S,
        retry_s: float = RETRY_S,
    ) -> None:
        self.days = days
        self._seq_at = seq_at
        self._prune = prune
        self._clock = clock
        self._monotonic = monotonic
        self._every_s = every_s
        self._retry_s = retry_s
        self._due = 0.0
        """When (:attr:`_monotonic`) it is next due: at once, after a start."""

    async def __call__(self) -> int:
        """Bound the history if it is due; the versions dropped (0 when not due, when nothing is
        that old, or when it failed: logged, and due again in :data:`RETRY_S`)."""
        if not self.days or self._monotonic() < self._due:
            return 0
        since = self._clock() - timedelta(days=self.days)
        try:
            horizon = await self._seq_at(since)
            dropped = await self._prune(horizon) if horizon > 0 else 0
        except Exception as exc:  # an outage or a bug here must not stop the projector
            self._due = self._monotonic() + self._retry_s
            log.warning(
                "history not bounded; trying again",
                error=f"{type(exc).__name__}: {exc}"[:900],
                retry_in_s=self._retry_s,
            )
            return 0
        self._due = self._monotonic() + self._every_s
        if dropped:
            log.info("history bounded", since=since.isoformat(), starts_at=horizon, versions_dropped=dropped)
        return dropped


def history_retention(
    days: int,
    js: JetStream,
    topology: Topology,
    connection: Callable[[], AbstractAsyncContextManager[DbConnection]],
    *,
    clock: Callable[[], datetime] = _utcnow,
) -> HistoryRetention:
    """The projector's retention: the event stream's clock on ``js``, the read model's history
    through ``connection`` (the claim's, the one the projector writes with)."""

    async def seq_at(when: datetime) -> int:
        return await last_seq_at(js, topology.event_stream, topology.event_subjects, when)

    async def prune(seq: int) -> int:
        async with connection() as conn:
            return await history.prune(conn, seq)

    return HistoryRetention(days, seq_at, prune, clock=clock)
