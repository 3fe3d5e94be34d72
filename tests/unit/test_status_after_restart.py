"""`noemactl status` after a crash and right after a start (issue 28, item 6): messages in flight to
a killed worker hold the ack floor for the whole ack wait while its successor works on — that is
work, not a stall; and instances taking their claim for the first time are starting, not failing."""

from __future__ import annotations

import pytest

from noema.runtime.backlog import Progress
from noema.runtime.health import HeartbeatRecord, instance_name
from noema.runtime.readiness import (
    STARTING,
    ConsumerState,
    Thresholds,
    assess,
    assess_consumer,
    assess_heartbeats,
    starting,
)
from noema.topology import Topology
from tests.unit.heartbeats import NOW, beat

LIMITS = Thresholds(stale_s=20.0, stall_s=60.0, max_lag=100_000)
TOPOLOGY = Topology("noema")
ORPHANS = 128
"""Messages the killed embed had been given (a batch in hand, one on the way): they come back only
after the consumer's ack wait (300 s)."""
FLOOR = 1_000


def _restarted_embed(seconds: float, rate: float = 20.0) -> tuple[list[HeartbeatRecord], ConsumerState]:
    """The restarted embed's heartbeats every 5 s for ``seconds`` after it started at ``NOW - seconds``,
    acknowledging ``rate`` messages a second past the killed one's, and the consumer as read now."""
    started = NOW - seconds
    progress = Progress(started)
    backlog = 6_000
    delivered = FLOOR + ORPHANS
    record = None
    at = started
    while at <= NOW:
        done = int((at - started) * rate)
        settled = delivered - ORPHANS + done  # delivered (and acked) beyond the killed one's
        progress.see(at, FLOOR, settled, backlog - done)
        start = progress.window.start
        assert start is not None
        record = beat(
            "embed",
            ago=NOW - at,
            started_at=started,
            ack_floor=FLOOR,
            delivered=delivered + done,
            settled=settled,
            backlog=backlog - done,
            progress_at=progress.progress_at,
            window_at=start.at,
            window_settled=start.count,
            busy_since=progress.window.busy_since,
        )
        at += 5.0
    assert record is not None
    done = int(seconds * rate)
    consumer = ConsumerState(
        "noema_embed", backlog - done - ORPHANS, ORPHANS, FLOOR, delivered=FLOOR + ORPHANS + done
    )
    return [record], consumer


def test_a_restarted_worker_acknowledging_past_a_killed_ones_messages_is_working_not_stalled() -> None:
    records, consumer = _restarted_embed(seconds=240)
    check = assess_consumer("embed", consumer, records, LIMITS, NOW, "noema_embed")
    assert check.ok, check.detail
    assert check.state == "working"
    assert "nothing acknowledged" not in check.detail
    checks, load = assess("embed", records, consumer, LIMITS, NOW, TOPOLOGY)
    assert all(c.ok for c in checks)
    assert load.rate == pytest.approx(20.0, rel=0.1)
    assert load.drain_s is not None


def test_a_consumer_whose_deliveries_do_not_settle_either_is_still_stalled() -> None:
    # The worker is alive and heartbeats, but since its start nothing moved: not the floor, not
    # the settled count (a hung handler). That stays a stall.
    records, consumer = _restarted_embed(seconds=240, rate=0.0)
    check = assess_consumer("embed", consumer, records, LIMITS, NOW, "noema_embed")
    assert not check.ok
    assert check.state == "stalled"
    assert "nothing acknowledged for 240 s" in check.detail


def test_progress_moves_with_the_settled_count_while_the_floor_stands_still() -> None:
    progress = Progress(started_at=0.0)
    progress.see(5.0, floor=10, settled=50, backlog=900)
    progress.see(10.0, floor=10, settled=80, backlog=870)
    assert progress.progress_at == 10.0
    progress.see(15.0, floor=10, settled=80, backlog=870)
    assert progress.progress_at == 10.0  # nothing moved since
    assert progress.window.start is not None
    assert progress.window.start.count == 50


def _fresh(claim: str, pid: int, started_ago: float) -> HeartbeatRecord:
    return beat(
        "attend", claim=claim, pid=pid, instance=instance_name("host-a", pid), started_at=NOW - started_ago
    )


def test_instances_that_just_started_and_take_their_claim_are_starting_not_failing() -> None:
    records = [_fresh("standby", 41, 3), _fresh("standby", 42, 2)]
    check = assess_heartbeats("attend", records, LIMITS, NOW)
    assert not check.ok
    assert check.state == STARTING
    assert check.detail.startswith("starting: 2 live (started 3 s ago), taking the claim")
    assert "none owns" not in check.detail
    # Only an owner creates the consumer: missing meanwhile, and starting too.
    checks, load = assess("attend", records, None, LIMITS, NOW, TOPOLOGY)
    assert [c.state for c in checks] == [STARTING, STARTING]
    assert checks[1].detail.startswith("starting: noema_attend missing")
    assert load.state == STARTING
    assert starting(checks)


def test_no_owner_long_after_the_start_is_a_failure_again() -> None:
    records = [_fresh("standby", 41, 300), _fresh("standby", 42, 2)]
    check = assess_heartbeats("attend", records, LIMITS, NOW)
    assert not check.ok
    assert check.state != STARTING
    assert "none owns the claim yet" in check.detail


def test_starting_beside_a_real_failure_is_a_failure() -> None:
    records = [_fresh("standby", 41, 3)]
    checks, _ = assess("attend", records, None, LIMITS, NOW, TOPOLOGY)
    down = assess_heartbeats("embed", [], LIMITS, NOW)
    assert starting(checks)
    assert not starting([*checks, down])


def test_right_after_up_a_process_without_a_heartbeat_yet_is_starting() -> None:
    # `up` started the instance 4 s ago; embed has not connected yet, and an earlier run's
    # heartbeat of it (the bucket outlives a restart) says it stopped.
    earlier = beat("embed", ago=600, stopped=True, started_at=NOW - 4000)
    checks, load = assess("embed", [earlier], None, LIMITS, NOW, TOPOLOGY, started_at=NOW - 4)
    assert [c.state for c in checks] == [STARTING, STARTING]
    assert checks[0].detail == "starting: no heartbeat yet (started 4 s ago)"
    assert load.state == STARTING
    assert starting(checks)
    # Long after the start, the same is down.
    checks, load = assess("embed", [earlier], None, LIMITS, NOW, TOPOLOGY, started_at=NOW - 400)
    assert [c.state for c in checks] == ["", "missing"]
    assert not starting(checks)


def _drained(held: int | None, killed_ago: float) -> tuple[list[HeartbeatRecord], ConsumerState]:
    """The restarted embed has worked off everything but the killed one's messages, 120 s ago."""
    killed = beat("embed", ago=killed_ago, pid=40, instance=instance_name("host-a", 40), ack_floor=FLOOR)
    live = beat(
        "embed",
        started_at=NOW - killed_ago + 5,
        ack_floor=FLOOR,
        settled=9_000,
        progress_at=NOW - 120,
        held=held,
    )
    consumer = ConsumerState("noema_embed", 0, ORPHANS, FLOOR, delivered=9_000 + ORPHANS, ack_wait=300.0)
    return [killed, live], consumer


def test_only_a_killed_workers_messages_in_flight_are_not_a_stall_until_their_ack_wait_ends() -> None:
    records, consumer = _drained(held=0, killed_ago=200)
    check = assess_consumer("embed", consumer, records, LIMITS, NOW, "noema_embed")
    assert check.ok, check.detail
    assert check.state == "working"
    assert check.detail == (
        "noema_embed: 0 waiting, 128 in flight, held by pid 40, which stopped: delivered again "
        "within its ack wait (300 s), in ~120 s"
    )


def test_messages_in_flight_are_a_stall_when_a_live_worker_holds_them_or_the_ack_wait_is_over() -> None:
    for held, killed_ago in ((64, 200), (None, 200), (0, 400)):
        records, consumer = _drained(held=held, killed_ago=killed_ago)
        check = assess_consumer("embed", consumer, records, LIMITS, NOW, "noema_embed")
        assert not check.ok, (held, killed_ago, check.detail)
        assert "nothing acknowledged for 120 s" in check.detail


class _Queue:
    queued = 3


def test_a_heartbeat_reports_what_the_services_pull_workers_hold() -> None:
    from noema.runtime.worker import PullWorker, _held_of

    workers = [PullWorker(f"attend-{p}", _Queue(), None, 64) for p in range(2)]  # type: ignore[arg-type]

    class Partitioned:
        def __init__(self) -> None:
            self.parts = {0: workers[0], 1: workers[1]}

    held = _held_of(Partitioned())
    assert held is not None
    assert held() == 6
    assert _held_of(object()) is None


def test_a_process_that_crashed_right_after_up_is_not_starting() -> None:
    crashed = beat(
        "embed", ago=1, stopped=True, started_at=NOW - 2, last_error="crashed: boom", last_error_at=NOW
    )
    check = assess_heartbeats("embed", [crashed], LIMITS, NOW, started_at=NOW - 4)
    assert not check.ok
    assert check.state != STARTING
    assert "crashed" in check.detail
