"""Admission control per caller (issue 28, item 5): the token bucket and the concurrency limit, on a
clock the tests move by hand."""

from __future__ import annotations

import pytest

from noema.adapters.metrics import Metrics
from noema.domain.admission import Admission, AdmissionLimits, Refusal, TokenBucket
from noema.errors import Kind, RateLimited, kind_of
from noema.runtime.settings import Settings, SettingsError


def test_a_bucket_lets_a_burst_through_then_one_request_per_refill() -> None:
    bucket = TokenBucket(rate=2.0, burst=3, now=0.0)
    assert [bucket.take(0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.take(0.0) == pytest.approx(0.5)  # the next token in 1 / rate
    assert bucket.take(0.25) == pytest.approx(0.25)
    assert bucket.take(0.5) == 0.0
    assert bucket.take(0.5) == pytest.approx(0.5)


def test_refused_requests_do_not_push_the_callers_retry_further() -> None:
    bucket = TokenBucket(rate=1.0, burst=1, now=0.0)
    assert bucket.take(0.0) == 0.0
    for _ in range(100):  # a flood at the same instant
        assert bucket.take(0.0) == pytest.approx(1.0)
    assert bucket.take(1.0) == 0.0


def test_a_quiet_caller_gets_its_whole_burst_back_and_no_more() -> None:
    bucket = TokenBucket(rate=10.0, burst=5, now=0.0)
    for _ in range(5):
        bucket.take(0.0)
    assert not bucket.full(0.1)
    assert bucket.full(3600.0)
    assert [bucket.take(3600.0) for _ in range(6)][-1] > 0  # five, not 36,000


def test_each_caller_has_its_own_bucket() -> None:
    admission = Admission(AdmissionLimits(rate=1.0, burst=2, concurrency=0))
    for _ in range(2):
        assert admission.admit("acme/flood", 0.0) is None
        admission.release("acme/flood")
    refused = admission.admit("acme/flood", 0.0)
    assert refused is not None
    assert refused.reason == "rate"
    assert refused.retry_after == 1
    assert "acme/flood may make 1 a second" in refused.message
    assert "NOEMA_RATE_LIMIT" in refused.message
    assert admission.admit("acme/quiet", 0.0) is None


def test_a_caller_with_too_many_requests_in_progress_is_refused_until_one_ends() -> None:
    admission = Admission(AdmissionLimits(rate=0.0, burst=1, concurrency=2))
    assert admission.admit("a", 0.0) is None
    assert admission.admit("a", 0.0) is None
    refused = admission.admit("a", 0.0)
    assert refused is not None
    assert (refused.reason, refused.retry_after) == ("concurrency", 1)
    assert "NOEMA_CONCURRENCY_LIMIT" in refused.message
    assert admission.admit("b", 0.0) is None  # another caller is not held up
    admission.release("a")
    assert admission.in_progress("a") == 1
    assert admission.admit("a", 0.0) is None


def test_admitted_releases_when_the_request_ends_and_raises_a_refusal_of_kind_rate_limited() -> None:
    refusals: list[Refusal] = []
    admission = Admission(AdmissionLimits(rate=1.0, burst=1, concurrency=1), on_refusal=refusals.append)
    with admission.admitted("a", 0.0):
        assert admission.in_progress("a") == 1
        with pytest.raises(RateLimited) as busy, admission.admitted("a", 0.0):
            pass
    assert admission.in_progress("a") == 0
    assert busy.value.retry_after == 1
    with pytest.raises(RateLimited) as flood, admission.admitted("a", 0.2):
        pass
    assert flood.value.retry_after == 1  # 0.8 s, rounded up to whole seconds
    assert kind_of(flood.value) is Kind.RATE_LIMITED
    assert [r.reason for r in refusals] == ["concurrency", "rate"]
    with pytest.raises(KeyError), admission.admitted("a", 1.0):
        raise KeyError("the request failed")
    assert admission.in_progress("a") == 0  # released all the same


def test_idle_callers_are_forgotten_once_many_are_known() -> None:
    admission = Admission(AdmissionLimits(rate=1.0, burst=1, concurrency=0), max_callers=3)
    for n in range(3):
        assert admission.admit(f"once-{n}", 0.0) is None
    assert admission.admit("busy", 0.5) is None  # the others not refilled yet: all are kept
    assert admission.admit("late", 10.0) is None  # now they are full and idle: forgotten
    assert admission.admit("once-0", 10.0) is None


def test_no_limits_admit_everything() -> None:
    limits = AdmissionLimits(rate=0.0, burst=1, concurrency=0)
    assert not limits.enabled
    admission = Admission(limits)
    assert all(admission.admit("a", 0.0) is None for _ in range(10_000))


def test_the_limits_are_settings_with_defaults_and_checked_values() -> None:
    assert Settings.from_env({}).admission_limits == AdmissionLimits(20.0, 40, 8)
    given = Settings.from_env(
        {"NOEMA_RATE_LIMIT": "5", "NOEMA_RATE_BURST": "10", "NOEMA_CONCURRENCY_LIMIT": "0"}
    )
    assert given.admission_limits == AdmissionLimits(5.0, 10, 0)
    assert Settings.from_env(given.to_env()) == given
    with pytest.raises(SettingsError, match="NOEMA_RATE_LIMIT"):
        Settings.from_env({"NOEMA_RATE_LIMIT": "fast"})
    with pytest.raises(SettingsError, match="NOEMA_RATE_BURST"):
        Settings.from_env({"NOEMA_RATE_BURST": "0"})


def test_refusals_are_counted_per_surface_and_limit() -> None:
    metrics = Metrics()
    admission = metrics.admission(AdmissionLimits(rate=1.0, burst=1, concurrency=0), "service")
    admission.admit("a", 0.0)
    for _ in range(3):
        assert admission.admit("a", 0.0) is not None
    body, _ = metrics.exposition()
    assert b'noema_requests_refused_total{limit="rate",surface="service"} 3.0' in body
