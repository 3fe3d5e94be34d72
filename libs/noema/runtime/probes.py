"""Liveness and readiness of one worker process, answered on its metrics port (``/livez``,
``/readyz`` beside ``/metrics``) for Kubernetes' HTTP probes.

Both are the process's own view, computed without any I/O when asked (the HTTP server runs in a
thread of its own, so a probe never waits for the event loop):

- **alive** (``/livez``): the process's event loop ran within :data:`STUCK_AFTER_S` — a
  :class:`LoopWatch` task stamps the time every second, so a loop that is blocked (a call that never
  returns, a busy loop) or hung stops stamping. Nothing outside the process counts: NATS or
  PostgreSQL being down never makes a worker "dead", so an outage does not restart every pod at
  once (the worker waits and retries; its readiness says why).
- **ready** (``/readyz``): alive, built (connected to NATS and PostgreSQL), its NATS connection is
  up, and its heartbeat
  (:class:`noema.runtime.health.Heartbeat`) was recorded within three intervals. The system's view
  (streams, PostgreSQL, the projector's lag, every kind's consumers) stays ``noemactl status`` and
  the operator API's ``/readyz``.

Each answers ``200 {"status": "alive"|"ready"}`` or ``503 {"status": "dead"|"unready",
"reason": …}``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["PATHS", "STUCK_AFTER_S", "LoopWatch", "Probe", "Readiness"]

PATHS = ("/livez", "/readyz")
"""Where a worker's metrics port answers its liveness and its readiness."""

STUCK_AFTER_S = 60.0
"""A loop that has not run for this long is stuck: the process is restarted by its liveness probe."""

Probe = Callable[[], str | None]
"""None when the check holds, else why not (read from another thread: no I/O, no awaiting)."""


class LoopWatch:
    """Stamps the time from the event loop every ``interval_s``; :meth:`problem` says when the last
    stamp is older than ``stuck_after_s``. Run :meth:`run` as a task of the loop it watches."""

    def __init__(
        self,
        interval_s: float = 1.0,
        stuck_after_s: float = STUCK_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._interval = interval_s
        self._stuck_after = stuck_after_s
        self._clock = clock
        self.stamped = clock()

    async def run(self) -> None:
        while True:
            self.stamped = self._clock()
            await asyncio.sleep(self._interval)

    def problem(self) -> str | None:
        age = self._clock() - self.stamped
        if age <= self._stuck_after:
            return None
        return f"the event loop has not run for {age:.0f} s (over {self._stuck_after:.0f} s): it is stuck"


class Readiness:
    """The readiness of a worker: ``alive``; once :meth:`started` (the service built), its NATS
    connection up (``connected``) and a heartbeat recorded within three intervals (``beat_age``:
    seconds since the last recorded beat, None before the first)."""

    def __init__(self, alive: Probe, interval_s: float) -> None:
        self._alive = alive
        self._interval = interval_s
        self._started = False
        self._connected: Callable[[], bool] | None = None
        self._beat_age: Callable[[], float | None] | None = None

    def started(
        self, connected: Callable[[], bool] | None, beat_age: Callable[[], float | None] | None
    ) -> None:
        """The service is built: from now on its connection and heartbeat count."""
        self._connected, self._beat_age = connected, beat_age
        self._started = True

    def __call__(self) -> str | None:
        if (problem := self._alive()) is not None:
            return problem
        if not self._started:
            return "starting: connecting to NATS and PostgreSQL"
        if self._connected is not None and not self._connected():
            return "NATS is disconnected (reconnecting)"
        if self._beat_age is not None:
            age = self._beat_age()
            if age is None:
                return "no heartbeat recorded yet"
            if age > 3 * self._interval:
                return f"no heartbeat recorded for {age:.0f} s (every {self._interval:g} s expected)"
        return None
