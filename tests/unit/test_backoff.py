"""The supervisor's restart backoff: capped, exponential, reset after a stable run — never a stop."""

from __future__ import annotations

from noema_cli.supervisor import BACKOFF_CAP_S, Backoff


def test_delays_double_from_half_a_second_up_to_the_cap_and_go_on_forever() -> None:
    backoff = Backoff()
    delays = [backoff.next_delay(ran_for=1.0) for _ in range(12)]
    assert delays[:7] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, BACKOFF_CAP_S]
    assert delays[7:] == [BACKOFF_CAP_S] * 5  # still restarting after a dozen failures


def test_a_stable_run_starts_again_from_the_first_delay() -> None:
    backoff = Backoff()
    for _ in range(5):
        backoff.next_delay(ran_for=1.0)
    assert backoff.next_delay(ran_for=backoff.stable_after) == 0.5
    assert backoff.next_delay(ran_for=1.0) == 1.0


def test_reset_forgets_failures_whose_cause_is_gone() -> None:
    backoff = Backoff(cap=5.0)
    for _ in range(6):
        backoff.next_delay()
    backoff.reset()
    assert backoff.next_delay() == 0.5
