"""Per-worker backlog, rate and drain estimate: the pure arithmetic and the verdicts built on it."""

from __future__ import annotations

import math

import pytest

from noema.runtime.backlog import RateWindow, Sample, drain_estimate, format_drain, rate_since
from noema.runtime.readiness import ConsumerState, Thresholds, assess, assess_consumer
from noema.runtime.settings import Settings, SettingsError
from noema.topology import Topology
from tests.unit.heartbeats import NOW, beat

LIMITS = Thresholds(stale_s=20.0, stall_s=60.0, max_lag=100_000, max_drain_s=600.0)
TOPOLOGY = Topology("noema")


def embed(pending: int, floor: int, ack_pending: int = 0) -> ConsumerState:
    return ConsumerState("noema_embed", pending, ack_pending, floor)


def test_the_window_starts_at_the_newest_sample_a_whole_window_old() -> None:
    window = RateWindow(window_s=60)
    for t in range(0, 100, 5):
        window.add(float(t), t * 2, backlog=1)
    assert window.start == Sample(35.0, 70)  # 95 - 35 = 60: the newest sample at least 60 s old


def test_a_lower_ack_floor_means_a_recreated_consumer_and_restarts_the_window() -> None:
    window = RateWindow()
    window.add(0.0, 500, backlog=3)
    window.add(5.0, 4, backlog=3)
    assert window.start == Sample(5.0, 4)


def test_busy_since_is_when_the_backlog_last_appeared() -> None:
    window = RateWindow()
    window.add(0.0, 0, backlog=0)
    assert window.busy_since is None
    window.add(5.0, 0, backlog=7)
    window.add(10.0, 3, backlog=4)
    assert window.busy_since == 5.0
    window.add(15.0, 7, backlog=0)
    assert window.busy_since is None


def test_the_rate_is_acknowledgements_per_second_since_the_window_start() -> None:
    samples = [Sample(NOW - 60, 100), Sample(NOW - 2, 680)]
    assert rate_since(samples, 700, NOW) == pytest.approx(10.0)


def test_a_worker_silent_for_longer_than_the_window_has_a_rate_of_its_recent_past() -> None:
    # Stopped 300 s ago after working fast: what counts is that nothing moved since its last beat.
    samples = [Sample(NOW - 360, 0), Sample(NOW - 300, 6000)]
    assert rate_since(samples, 6000, NOW) == 0.0


def test_the_rate_is_unknown_without_samples_or_after_a_recreated_consumer() -> None:
    assert rate_since([], 10, NOW) is None
    assert rate_since([Sample(NOW - 30, 50)], 10, NOW) is None


def test_the_drain_estimate_is_backlog_over_rate() -> None:
    assert drain_estimate(0, None) == 0.0
    assert drain_estimate(1000, 4.0) == 250.0
    assert math.isinf(drain_estimate(10, 0.0) or 0)
    assert drain_estimate(10, None) is None
    assert [format_drain(s) for s in (45.0, 720.0, 12_600.0, math.inf, None)] == [
        "~45 s",
        "~12 min",
        "~3.5 h",
        "never",
        "?",
    ]


def test_a_backlog_that_would_take_longer_than_the_drain_threshold_is_behind() -> None:
    # retrieve as measured in issue 17: 66,808 waiting, about one observation a second.
    record = beat(
        "retrieve",
        ack_floor=5_000,
        progress_at=NOW - 1,
        window_at=NOW - 61,
        window_floor=4_940,
        busy_since=NOW - 900,
    )
    consumer = ConsumerState("noema_retrieve", 66_800, 8, 5_001)
    check = assess_consumer("retrieve", consumer, [record], LIMITS, NOW, "noema_retrieve")
    assert not check.ok
    assert check.line.startswith(
        "retrieve consumer: noema_retrieve behind: 66800 waiting, 8 in flight, 1.0/s"
    )
    assert "drains in ~18.6 h (threshold 600 s)" in check.detail


def test_a_fresh_burst_is_not_judged_by_its_drain_estimate_before_a_whole_window() -> None:
    record = beat(
        "embed", ack_floor=50, progress_at=NOW, window_at=NOW - 60, window_floor=0, busy_since=NOW - 10
    )
    checks, load = assess("embed", [record], embed(9_000, 60), LIMITS, NOW, TOPOLOGY)
    assert all(c.ok for c in checks)
    assert (load.state, load.backlog, load.live) == ("working", 9_000, 1)
    assert load.rate == pytest.approx(1.0)
    assert load.drain_s == pytest.approx(9_000)


def test_a_quick_worker_with_a_backlog_is_fine_and_says_when_it_drains() -> None:
    record = beat(
        "embed", ack_floor=5_000, progress_at=NOW, window_at=NOW - 60, window_floor=0, busy_since=NOW - 300
    )
    check = assess_consumer("embed", embed(1_000, 6_000), [record], LIMITS, NOW, "noema_embed")
    assert check.ok
    assert check.detail == "noema_embed: 1000 waiting, 0 in flight, 100.0/s, drains in ~10 s, progressing"


def test_a_backlog_with_no_live_process_is_stalled_naming_the_worker_and_its_backlog() -> None:
    check = assess_consumer("embed", embed(12, 40), [], LIMITS, NOW, "noema_embed")
    assert not check.ok
    assert check.line == (
        "embed consumer: noema_embed stalled: 12 waiting, 0 in flight, 0/s: "
        "no live embed process works it off"
    )


def test_the_row_of_a_stopped_worker_says_down_with_its_backlog_and_zero_rate() -> None:
    record = beat("embed", ago=400, ack_floor=40, progress_at=NOW - 400, window_at=NOW - 460, window_floor=10)
    checks, load = assess("embed", [record], embed(12, 40), LIMITS, NOW, TOPOLOGY)
    assert [c.ok for c in checks] == [False, False]
    assert (load.state, load.live, load.backlog, load.rate, load.drain_s, load.ok) == (
        "down",
        0,
        12,
        0.0,
        None,
        False,
    )


def test_an_idle_worker_reports_its_recent_rate() -> None:
    record = beat("embed", ack_floor=30, progress_at=NOW, window_at=NOW - 60, window_floor=0)
    checks, load = assess("embed", [record], embed(0, 30), LIMITS, NOW, TOPOLOGY)
    assert checks[1].detail == "noema_embed: idle, nothing waiting (0.5/s)"
    assert (load.state, load.backlog, load.rate, load.ok) == ("idle", 0, 0.5, True)


def test_a_worker_without_a_consumer_has_no_figures() -> None:
    _, load = assess("decay", [beat("decay")], None, LIMITS, NOW, TOPOLOGY)
    assert (load.consumer, load.backlog, load.rate, load.state, load.ok) == (
        None,
        None,
        None,
        "running",
        True,
    )


def test_the_drain_threshold_is_configurable_and_zero_turns_it_off() -> None:
    assert Settings.from_env({}).max_drain_s == 600.0
    assert Thresholds.of(Settings.from_env({"NOEMA_MAX_DRAIN": "0"})).max_drain_s == 0.0
    with pytest.raises(SettingsError, match="NOEMA_MAX_DRAIN"):
        Settings.from_env({"NOEMA_MAX_DRAIN": "soon"})
    off = Thresholds(max_lag=100_000, max_drain_s=0.0)
    record = beat(
        "embed", ack_floor=1, progress_at=NOW, window_at=NOW - 61, window_floor=0, busy_since=NOW - 900
    )
    assert assess_consumer("embed", embed(50_000, 2), [record], off, NOW, "noema_embed").ok
