"""NOEMA_HISTORY_DAYS: when the projector bounds the read model's history and from which point
(:class:`noema_projector.retention.HistoryRetention`), over a stream and a history held in memory
that answer as JetStream's ``last_seq_at`` and ``history.prune`` do (the SQL itself, the refusal on
the API and the CLI: tests/integration/test_history_retention.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from noema_projector.retention import EVERY_S, RETRY_S, HistoryRetention

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


def day(n: float) -> datetime:
    return T0 + timedelta(days=n)


@dataclass
class Held:
    """An event stream's stored times (sequence = index + 1) and the row versions of a read model's
    history, (valid from, valid until: None while it holds)."""

    stored: list[datetime]
    versions: list[tuple[int, int | None]]
    start: int = 0
    asked: list[datetime] = field(default_factory=list)
    outage: int = 0
    """How many of the next calls fail as a database that is away does."""

    async def seq_at(self, when: datetime) -> int:
        """The last sequence stored at or before ``when`` (0: none), as ``last_seq_at``."""
        self.asked.append(when)
        if self.outage:
            self.outage -= 1
            raise ConnectionRefusedError("the database is away")
        return sum(1 for t in self.stored if t <= when)

    async def prune(self, before_seq: int) -> int:
        """As ``history.prune``: drop the versions no point from ``before_seq`` on can see."""
        if before_seq <= self.start:
            return 0
        kept = [(f, t) for f, t in self.versions if t is None or t > before_seq]
        dropped = len(self.versions) - len(kept)
        self.versions, self.start = kept, before_seq
        return dropped


class Clocks:
    """The wall clock the bound is measured on, and the monotonic one its schedule runs on."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.tick = 1000.0

    def wall(self) -> datetime:
        return self.now

    def monotonic(self) -> float:
        return self.tick

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
        self.tick += seconds


def retention(held: Held, clocks: Clocks, days: int) -> HistoryRetention:
    return HistoryRetention(days, held.seq_at, held.prune, clock=clocks.wall, monotonic=clocks.monotonic)


# Four events on days 0, 1, 2 and 5; a memory changed by each of the later three (versions 1→2,
# 2→3, 3→4 and the one holding since 4), and another created at 1 that still holds.
def _held() -> Held:
    return Held([day(0), day(1), day(2), day(5)], [(1, 2), (2, 3), (3, 4), (4, None), (2, None)])


async def test_with_no_bound_set_every_version_is_kept_and_nothing_is_asked() -> None:
    held, clocks = _held(), Clocks(day(400))
    assert await retention(held, clocks, 0)() == 0
    assert (held.asked, len(held.versions), held.start) == ([], 5, 0)


async def test_the_first_point_kept_is_the_last_event_stored_that_many_days_ago() -> None:
    held, clocks = _held(), Clocks(day(5.5))
    dropped = await retention(held, clocks, 3)()
    # 3 days before day 5.5 is day 2.5: the stream had stored seq 3 by then. Every point from 3 on
    # keeps what it saw; the version replaced at 2 (before any of them) goes, the rest stay.
    assert held.asked == [day(2.5)]
    assert (dropped, held.start) == (2, 3)
    assert held.versions == [(3, 4), (4, None), (2, None)]


async def test_it_bounds_once_an_hour_and_an_idle_read_model_too() -> None:
    held, clocks = _held(), Clocks(day(5.5))
    bound = retention(held, clocks, 3)
    assert await bound() == 2
    clocks.advance(EVERY_S - 1)
    assert await bound() == 0  # not due yet: nothing asked
    assert len(held.asked) == 1
    clocks.advance(1)
    assert await bound() == 0  # due and asked: nothing more is that old yet
    assert len(held.asked) == 2
    # No event since day 5, only time: once day 5 is 3 days old, the version replaced at 4 goes.
    clocks.advance(2.5 * 86400)
    assert await bound() == 1
    assert (held.start, held.versions) == (4, [(4, None), (2, None)])


async def test_a_bound_before_the_first_event_drops_nothing() -> None:
    held, clocks = _held(), Clocks(day(2))
    assert await retention(held, clocks, 30)() == 0
    assert (held.start, len(held.versions)) == (0, 5)


async def test_a_failure_is_tried_again_a_minute_later_and_never_raised() -> None:
    held, clocks = _held(), Clocks(day(5.5))
    held.outage = 1
    bound = retention(held, clocks, 3)
    assert await bound() == 0  # the outage: logged, not raised (the projector goes on)
    clocks.advance(RETRY_S - 1)
    assert await bound() == 0
    assert len(held.asked) == 1
    clocks.advance(1)
    assert await bound() == 2
    assert held.start == 3
