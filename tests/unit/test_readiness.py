"""The verdicts of `noemactl status` and /readyz, as pure functions of heartbeats and consumer state."""

from __future__ import annotations

import pytest

from noema.runtime.health import ErrorTap, connection_of, instance_name
from noema.runtime.readiness import (
    Check,
    ConsumerState,
    Thresholds,
    assess,
    assess_consumer,
    assess_heartbeats,
    problems,
)
from noema.runtime.settings import Settings, SettingsError
from noema.topology import Topology
from tests.unit.heartbeats import NOW, beat

LIMITS = Thresholds(stale_s=20.0, stall_s=60.0, max_lag=1000)


def consumer(pending: int = 0, ack_pending: int = 0, floor: int = 10) -> ConsumerState:
    return ConsumerState("noema_attend", pending, ack_pending, floor)


def test_a_fresh_heartbeat_means_the_worker_is_up() -> None:
    check = assess_heartbeats("attend", [beat(ago=2)], LIMITS, NOW)
    assert check.ok
    assert "pid 41 on host-a" in check.detail


def test_no_heartbeat_at_all_is_a_problem_naming_the_worker() -> None:
    check = assess_heartbeats("embed", [beat("attend")], LIMITS, NOW)
    assert not check.ok
    assert check.line.startswith("embed: no heartbeat")


def test_a_stale_heartbeat_means_stopped_hung_or_disconnected() -> None:
    check = assess_heartbeats("attend", [beat(ago=25)], LIMITS, NOW)
    assert not check.ok
    assert "no heartbeat for 25 s" in check.detail
    assert "disconnected" in check.detail


def test_a_crash_record_says_it_crashed_and_why() -> None:
    record = beat(ago=1, stopped=True, last_error="crashed: RuntimeError: boom", last_error_at=NOW - 1)
    check = assess_heartbeats("attend", [record], LIMITS, NOW)
    assert not check.ok
    assert "crashed" in check.detail
    assert "RuntimeError: boom" in check.detail


def test_a_silent_earlier_instance_beside_a_live_one_is_not_a_problem() -> None:
    old = beat(ago=300, pid=40, instance=instance_name("host-a", 40), last_error="x", last_error_at=NOW - 300)
    check = assess_heartbeats("attend", [old, beat(ago=1)], LIMITS, NOW)
    assert check.ok
    assert "1 earlier instance(s) silent" in check.detail
    assert "last error 300 s ago (pid 40): x" in check.detail


def test_the_agent_service_is_named_as_such() -> None:
    assert assess_heartbeats("service", [], LIMITS, NOW).name == "agent service"


def test_an_idle_consumer_is_fine_however_long_ago_it_last_progressed() -> None:
    record = beat(ack_floor=10, progress_at=NOW - 86400)
    assert assess_consumer("attend", consumer(0, 0), [record], LIMITS, NOW, "noema_attend").ok


def test_work_waiting_with_an_ack_floor_that_has_not_moved_past_the_threshold_is_a_stall() -> None:
    record = beat(ago=30, ack_floor=10, progress_at=NOW - 90)
    check = assess_consumer("attend", consumer(5, 2), [record], LIMITS, NOW, "noema_attend")
    assert not check.ok
    assert check.line.startswith("attend consumer: noema_attend stalled: 5 waiting, 2 in flight")


def test_work_waiting_is_not_a_stall_within_the_threshold() -> None:
    record = beat(ack_floor=10, progress_at=NOW - 30)
    assert assess_consumer("attend", consumer(5), [record], LIMITS, NOW, "noema_attend").ok


def test_an_ack_floor_that_moved_since_the_last_heartbeat_is_progress() -> None:
    record = beat(ago=30, ack_floor=10, progress_at=NOW - 90)
    assert assess_consumer("attend", consumer(5, floor=12), [record], LIMITS, NOW, "noema_attend").ok


def test_a_backlog_beyond_the_lag_threshold_is_lagging() -> None:
    record = beat(ack_floor=10, progress_at=NOW)
    check = assess_consumer("attend", consumer(1500, 1), [record], LIMITS, NOW, "noema_attend")
    assert not check.ok
    assert "lagging: 1500 waiting" in check.detail


def test_a_missing_consumer_is_a_problem() -> None:
    check = assess_consumer("attend", None, [], LIMITS, NOW, "noema_attend")
    assert not check.ok
    assert "noema_attend missing" in check.detail


def test_workers_without_a_consumer_are_judged_by_their_heartbeat_alone() -> None:
    topology = Topology("noema")
    assert [c.name for c in assess("decay", [beat("decay")], None, LIMITS, NOW, topology)[0]] == ["decay"]
    names = [c.name for c in assess("embed", [beat("embed")], None, LIMITS, NOW, topology)[0]]
    assert names == ["embed", "embed consumer"]


def test_problems_are_the_lines_of_the_failed_checks() -> None:
    checks = [Check("nats", True, "connected"), Check("postgres", False, "no answer within 2 s")]
    assert problems(checks) == ["postgres: no answer within 2 s"]


def test_the_error_tap_keeps_the_last_error_with_its_reason() -> None:
    tap = ErrorTap(clock=lambda: NOW)
    tap(None, "info", {"event": "batch projected"})
    assert tap.last is None
    tap(None, "error", {"event": "observation skipped", "reason": "recall failed"})
    assert tap.last == ("observation skipped: recall failed", NOW)


def test_the_connection_is_found_in_a_services_parts() -> None:
    from nats.aio.client import Client as NATS

    nc = NATS()

    class Puller:
        def __init__(self) -> None:
            self._nc = nc

    class Worker:
        def __init__(self) -> None:
            self.name = "attend"
            self._puller = Puller()

    assert connection_of(Worker()) is nc
    assert connection_of(object()) is None


def test_thresholds_come_from_settings_with_documented_defaults() -> None:
    assert Thresholds.of(Settings.from_env({})) == Thresholds(20.0, 60.0, 10_000)
    given = Settings.from_env(
        {
            "NOEMA_HEARTBEAT_INTERVAL": "1",
            "NOEMA_HEARTBEAT_STALE": "3",
            "NOEMA_STALL_AFTER": "5",
            "NOEMA_MAX_LAG": "7",
        }
    )
    assert Thresholds.of(given) == Thresholds(3.0, 5.0, 7)
    assert Settings.from_env(given.to_env()) == given


def test_a_stale_threshold_not_longer_than_the_interval_is_refused() -> None:
    with pytest.raises(SettingsError, match="NOEMA_HEARTBEAT_STALE"):
        Settings.from_env({"NOEMA_HEARTBEAT_INTERVAL": "10", "NOEMA_HEARTBEAT_STALE": "10"})


def test_the_expected_workers_are_every_kind_unless_configured() -> None:
    assert "embed" in Settings.from_env({}).expected_workers
    assert "embed" not in Settings.from_env({"NOEMA_EMBEDDER": "none"}).expected_workers
    picked = Settings.from_env({"NOEMA_STATUS_WORKERS": "attend, projector"})
    assert picked.expected_workers == ("attend", "projector")
    assert Settings.from_env(picked.to_env()) == picked
    with pytest.raises(SettingsError, match="unknown processes attnd"):
        Settings.from_env({"NOEMA_STATUS_WORKERS": "attnd"})


def test_a_claimed_worker_names_its_owner_and_shows_the_other_instance_standing_by() -> None:
    owner = beat("projector", claim="owner")
    standby = beat("projector", claim="standby", pid=42, instance=instance_name("host-a", 42))
    check = assess_heartbeats("projector", [owner, standby], LIMITS, NOW)
    assert check.ok
    assert "owner pid 41 on host-a" in check.detail
    assert "1 standing by (pid 42)" in check.detail


def test_live_instances_of_which_none_owns_the_claim_are_a_problem() -> None:
    check = assess_heartbeats("attend", [beat(claim="standby"), beat(claim="lost", pid=42)], LIMITS, NOW)
    assert not check.ok
    assert "none owns the claim" in check.detail


def test_a_standby_beside_a_working_owner_is_not_a_stall() -> None:
    owner = beat(claim="owner", progress_at=NOW - 1, ack_floor=10)
    standby = beat(claim="standby", pid=42, progress_at=NOW - 1, ack_floor=10)
    check = assess_consumer("attend", consumer(pending=5), [owner, standby], LIMITS, NOW, "noema_attend")
    assert check.ok, check.detail
