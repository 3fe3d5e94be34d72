"""Admission control per caller: the pure arithmetic behind the rate and concurrency limits of the
operator API, the MCP server and the NATS agent service (docs/operations.md, "Admission control").

Each caller — an API token, an agent — gets a **token bucket**: it holds up to ``burst`` tokens,
refilled at ``rate`` a second; a request takes one, and is refused while the bucket is empty, with
the time until the next token as its ``Retry-After``. Beside it, the caller may have at most
``concurrency`` requests in progress; one more is refused at once (retry when one ends: a second
is suggested). One caller flooding a surface is then refused in microseconds instead of queueing
its ~130 ms searches in front of everyone else's.

No I/O and no clock reads: ``now`` (monotonic seconds) is passed in, so the limits are tested
without waiting (``tests/unit/test_admission.py``). Each surface holds one :class:`Admission` and
asks it per request; a refusal is raised as :class:`noema.errors.RateLimited` (kind
``rate_limited``: HTTP 429 with ``Retry-After``, NATS service code 429, an MCP ``isError`` result).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

from noema.errors import RateLimited
from noema.records import dataclass

__all__ = ["Admission", "AdmissionLimits", "Refusal", "TokenBucket"]


@dataclass(frozen=True)
class AdmissionLimits:
    """What one caller may do (from ``NOEMA_RATE_LIMIT``, ``NOEMA_RATE_BURST`` and
    ``NOEMA_CONCURRENCY_LIMIT``, :class:`noema.runtime.settings.Settings`)."""

    rate: float = 20.0
    """Requests a second, sustained (0: no rate limit)."""
    burst: int = 40
    """Requests at once after a quiet spell: the bucket's size (at least 1 when ``rate`` > 0)."""
    concurrency: int = 8
    """Requests in progress at once (0: no limit)."""

    @property
    def enabled(self) -> bool:
        """Whether anything is limited at all."""
        return self.rate > 0 or self.concurrency > 0


class TokenBucket:
    """``burst`` tokens, refilled at ``rate`` a second; full when made at ``now``."""

    def __init__(self, rate: float, burst: int, now: float) -> None:
        self._rate = rate
        self._burst = float(max(1, burst))
        self._tokens = self._burst
        self._at = now

    def _refill(self, now: float) -> None:
        if now > self._at:
            self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
            self._at = now

    def take(self, now: float) -> float:
        """Take a token at ``now``: 0.0 when taken, else the seconds until one is there (nothing
        taken). A refused request costs nothing, so a flood does not push its own retry further."""
        self._refill(now)
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return 0.0
        return (1.0 - self._tokens) / self._rate

    def full(self, now: float) -> bool:
        """Whether the bucket has refilled entirely (its caller has been quiet long enough)."""
        self._refill(now)
        return self._tokens >= self._burst


@dataclass(frozen=True)
class Refusal:
    """A request not admitted: why, and when to try again."""

    reason: Literal["rate", "concurrency"]
    retry_after_s: float
    """Seconds until it would be admitted (the rate), or a suggested wait (concurrency)."""
    message: str
    """What the caller is told, naming the limit and the setting."""

    @property
    def retry_after(self) -> int:
        """``retry_after_s`` as a ``Retry-After`` value: whole seconds, at least 1."""
        return max(1, math.ceil(self.retry_after_s))


CONCURRENCY_RETRY_S = 1.0
"""What a caller refused for too many requests in progress is told to wait."""


class Admission:
    """The limits of every caller of one surface, by key (a token's name, ``workspace/agent``).

    :meth:`admit` either refuses a request or counts it in progress; :meth:`release` ends it (or use
    :meth:`admitted`, which raises the refusal; ``on_refusal`` is told each one, for the metrics).
    Callers whose bucket is full and who have nothing in progress are forgotten once more than
    ``max_callers`` are known, so a stream of one-off callers cannot grow it without end.
    """

    def __init__(
        self,
        limits: AdmissionLimits,
        *,
        on_refusal: Callable[[Refusal], None] | None = None,
        max_callers: int = 10_000,
    ) -> None:
        self.limits = limits
        self._on_refusal = on_refusal
        self._max = max_callers
        self._buckets: dict[str, TokenBucket] = {}
        self._in_progress: dict[str, int] = {}

    def admit(self, caller: str, now: float) -> Refusal | None:
        """Admit a request of ``caller`` at ``now`` (None: counted in progress until
        :meth:`release`), or say why not (and tell ``on_refusal``)."""
        refusal = self._refusal(caller, now)
        if refusal is None:
            self._in_progress[caller] = self._in_progress.get(caller, 0) + 1
        elif self._on_refusal is not None:
            self._on_refusal(refusal)
        return refusal

    def _refusal(self, caller: str, now: float) -> Refusal | None:
        limits = self.limits
        busy = self._in_progress.get(caller, 0)
        if limits.concurrency > 0 and busy >= limits.concurrency:
            return Refusal(
                "concurrency",
                CONCURRENCY_RETRY_S,
                f"too many requests in progress: {caller} has {busy} running, the limit is "
                f"{limits.concurrency} (NOEMA_CONCURRENCY_LIMIT); retry when one has answered",
            )
        if limits.rate > 0:
            bucket = self._buckets.get(caller)
            if bucket is None:
                self._forget_idle(now)
                bucket = self._buckets[caller] = TokenBucket(limits.rate, limits.burst, now)
            wait = bucket.take(now)
            if wait > 0:
                return Refusal(
                    "rate",
                    wait,
                    f"too many requests: {caller} may make {limits.rate:g} a second (bursts of "
                    f"{limits.burst}; NOEMA_RATE_LIMIT, NOEMA_RATE_BURST); retry after {wait:.2f} s",
                )
        return None

    def release(self, caller: str) -> None:
        """A request :meth:`admit` let in has ended."""
        left = self._in_progress.get(caller, 0) - 1
        if left > 0:
            self._in_progress[caller] = left
        else:
            self._in_progress.pop(caller, None)

    @contextmanager
    def admitted(self, caller: str, now: float) -> Iterator[None]:
        """Run the body as an admitted request of ``caller`` at ``now`` (released when it ends), or
        raise :class:`~noema.errors.RateLimited` (after telling ``on_refusal``)."""
        refusal = self.admit(caller, now)
        if refusal is not None:
            raise RateLimited(refusal.message, refusal.retry_after)
        try:
            yield
        finally:
            self.release(caller)

    def in_progress(self, caller: str) -> int:
        """Requests of ``caller`` admitted and not yet released."""
        return self._in_progress.get(caller, 0)

    def _forget_idle(self, now: float) -> None:
        if len(self._buckets) < self._max:
            return
        idle = [k for k, b in self._buckets.items() if k not in self._in_progress and b.full(now)]
        for key in idle:
            del self._buckets[key]
