"""How fast each worker works off its backlog: the pure arithmetic behind the per-worker figures of
``noemactl status`` and ``/readyz`` (:mod:`noema.runtime.readiness`).

A worker's **rate** is the number of deliveries its durable consumer settled per second over about
the last :data:`RATE_WINDOW_S` seconds. *Settled* is the consumer's delivered sequence less its
messages in flight (a consumer sequence, so a redelivered message counts each time it is
delivered): unlike the ack floor, it moves while a few messages in flight hold the floor back —
those a worker that was killed had been given, which come back only after the consumer's ack wait
while its successor works on. The count now is compared with a sample of it taken by the worker's
own heartbeat at the start of the window (:class:`RateWindow`, carried in the heartbeat as
``window_at`` / ``window_settled``). Reading the count *now*, not the worker's last report of it,
keeps the rate honest for a worker that stopped: its count stays put while the clock runs, and the
rate falls to 0. The **drain estimate** is backlog / rate, when there is a backlog and a rate.
"""

from __future__ import annotations

import math
from collections import deque

import msgspec

__all__ = [
    "RATE_WINDOW_S",
    "Progress",
    "RateWindow",
    "Sample",
    "WorkerLoad",
    "drain_estimate",
    "format_drain",
    "rate_since",
]

RATE_WINDOW_S = 60.0
"""Span the rate is averaged over; also how long a backlog must have existed before its drain
estimate is judged (a burst that has just arrived is not yet "falling behind")."""


class Sample(msgspec.Struct, frozen=True):
    """The consumer's settled deliveries (or, in older heartbeats, its ack floor) at a time (UNIX
    seconds)."""

    at: float
    count: int


class RateWindow:
    """The heartbeat's samples of its consumer's settled deliveries over the last :data:`RATE_WINDOW_S`.

    :attr:`start` is the newest sample at least a window old (else the oldest one): the rate is
    measured from there. A count that went down means the consumer was re-created (attend and the
    projector do so on start): the samples before it no longer compare, so they are dropped.
    """

    def __init__(self, window_s: float = RATE_WINDOW_S) -> None:
        self._window = window_s
        self._samples: deque[Sample] = deque()
        self.busy_since: float | None = None
        """When the backlog last went from nothing to something (None while it is empty)."""

    def add(self, at: float, count: int, backlog: int) -> None:
        """Record the consumer as seen at ``at``: ``count`` settled deliveries, ``backlog`` waiting."""
        if self._samples and count < self._samples[-1].count:
            self._samples.clear()
        self._samples.append(Sample(at, count))
        while len(self._samples) >= 2 and at - self._samples[1].at >= self._window:
            self._samples.popleft()
        if backlog == 0:
            self.busy_since = None
        elif self.busy_since is None:
            self.busy_since = at

    @property
    def start(self) -> Sample | None:
        """Where the rate is measured from (None before the first sample)."""
        return self._samples[0] if self._samples else None


class Progress:
    """What a worker's heartbeat tells of its consumer's progress, from the figures it reads at each
    beat: when the consumer last moved (:attr:`progress_at`) and the rate window (:attr:`window`).

    The consumer moved when its ack floor or its settled deliveries changed, or nothing waits. The
    floor alone would stand still for the whole ack wait after a worker was killed with messages in
    flight, while its successor acknowledges everything after them: a stall to the floor, work done
    to the settled count.
    """

    def __init__(self, started_at: float, window_s: float = RATE_WINDOW_S) -> None:
        self.progress_at = started_at
        """Last time the consumer was seen to move (the worker's start before the first look)."""
        self.window = RateWindow(window_s)
        self._last: tuple[int, int] | None = None

    def see(self, at: float, floor: int, settled: int, backlog: int) -> None:
        """Record the consumer as read at ``at``."""
        if backlog == 0 or (floor, settled) != self._last:
            self.progress_at = at
        self._last = (floor, settled)
        self.window.add(at, settled, backlog)


def rate_since(
    samples: list[Sample], count_now: int, now: float, window_s: float = RATE_WINDOW_S
) -> float | None:
    """Deliveries settled per second from the best of ``samples`` to ``count_now`` at ``now``.

    The best sample is the newest one at least ``window_s`` old, else the oldest: for a live worker
    its window start (about a minute back), for one silent longer than that its last heartbeat (so
    the rate covers only the recent past). None when unknown: no sample, no time elapsed, or a count
    lower than the sample's (the consumer was re-created since).
    """
    if not samples:
        return None
    ordered = sorted(samples, key=lambda s: s.at)
    old = [s for s in ordered if now - s.at >= window_s]
    start = old[-1] if old else ordered[0]
    elapsed = now - start.at
    if elapsed <= 0 or count_now < start.count:
        return None
    return (count_now - start.count) / elapsed


def drain_estimate(backlog: int, rate: float | None) -> float | None:
    """Seconds until ``backlog`` is worked off at ``rate``: 0 with nothing waiting, ``inf`` with a
    backlog and no progress, None when the rate is unknown."""
    if backlog == 0:
        return 0.0
    if rate is None:
        return None
    return math.inf if rate <= 0 else backlog / rate


def format_drain(seconds: float | None) -> str:
    """``~45 s``, ``~12 min``, ``~3.5 h``; ``never`` at no progress, ``?`` when unknown."""
    if seconds is None:
        return "?"
    if math.isinf(seconds):
        return "never"
    if seconds < 120:
        return f"~{seconds:.0f} s"
    if seconds < 7200:
        return f"~{seconds / 60:.0f} min"
    return f"~{seconds / 3600:.1f} h"


class WorkerLoad(msgspec.Struct, frozen=True, kw_only=True):
    """One row of the per-worker table of ``noemactl status`` (and of ``/readyz``'s body)."""

    worker: str
    live: int
    """Processes of this kind with a fresh heartbeat."""
    consumer: str | None = None
    """Its durable consumer (None for processes without one: decay, the API, the agent service)."""
    backlog: int | None = None
    """Messages waiting plus delivered but not yet acknowledged (None: no consumer, or not read)."""
    rate: float | None = None
    """Deliveries settled (acknowledged) per second over about the last minute (None: not known yet)."""
    drain_s: float | None = None
    """Estimated seconds to work off the backlog at that rate (None: unknown, or no progress)."""
    state: str
    """``idle``, ``working``, ``lagging``, ``behind``, ``stalled``, ``missing`` (no consumer yet),
    ``starting`` (its instances are taking their claim), ``running`` (no consumer to judge) or
    ``down`` (no live process)."""
    ok: bool
