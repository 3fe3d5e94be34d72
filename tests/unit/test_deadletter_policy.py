"""The dead-letter stream's policy: limits from settings, deletable dead letters only there, big
originals truncated with their size and digest, and previews that are always safe to print."""

from __future__ import annotations

import hashlib

import pytest

from noema.adapters.deadletters import preview
from noema.adapters.dlq_policy import (
    ORIGINAL_SHA256,
    ORIGINAL_SIZE,
    TRUNCATED,
    DeadLetterPolicy,
    kept_original,
)
from noema.adapters.jetstream import _stream_configs
from noema.runtime.settings import Settings, SettingsError
from noema.topology import Topology


def test_only_the_dead_letter_stream_has_limits_and_the_events_alone_refuse_deleting_one_message() -> None:
    policy = DeadLetterPolicy(max_age_s=86400, max_bytes=0)
    configs = {c.name: c for c in _stream_configs(Topology("noema"), 120, 1, policy)}
    events, observations = configs["NOEMA_EVENTS"], configs["NOEMA_OBSERVATIONS"]
    assert (events.deny_delete, events.deny_purge, events.max_age, events.max_bytes) == (True, True, 0, -1)
    # an erasure deletes erased observations (docs/privacy.md); nothing else is removed from it
    assert (observations.deny_delete, observations.deny_purge, observations.max_age) == (False, True, 0)
    dlq = configs["NOEMA_DEADLETTER"]
    assert (dlq.deny_delete, dlq.deny_purge, dlq.max_age, dlq.max_bytes) == (False, True, 86400, -1)


def test_dead_letters_are_kept_thirty_days_and_one_gibibyte_by_default() -> None:
    dlq = {c.name: c for c in _stream_configs(Topology("noema"), 120)}["NOEMA_DEADLETTER"]
    assert (dlq.max_age, dlq.max_bytes) == (30 * 86400, 1 << 30)


def test_the_policy_is_read_from_settings_and_passed_on_to_child_processes() -> None:
    s = Settings.from_env({"NOEMA_DLQ_MAX_AGE": "3600", "NOEMA_DLQ_MAX_BYTES": "0"})
    assert s.dead_letter_policy == DeadLetterPolicy(max_age_s=3600, max_bytes=0)
    assert Settings.from_env(s.to_env()) == s
    assert Settings.from_env({}).dead_letter_policy == DeadLetterPolicy()


@pytest.mark.parametrize(
    ("name", "value"),
    [("NOEMA_DLQ_MAX_AGE", "-1"), ("NOEMA_DLQ_MAX_AGE", "soon"), ("NOEMA_DLQ_MAX_BYTES", "lots")],
)
def test_a_malformed_policy_setting_is_refused_by_name(name: str, value: str) -> None:
    with pytest.raises(SettingsError, match=name):
        Settings.from_env({name: value})


def test_an_original_within_the_limit_is_kept_whole_without_extra_headers() -> None:
    assert kept_original(b"x" * 100, 100) == (b"x" * 100, {})


def test_a_big_original_is_kept_truncated_with_its_size_and_digest() -> None:
    data = bytes(range(256)) * 10
    kept, headers = kept_original(data, 1000)
    assert kept == data[:1000]
    assert headers == {
        TRUNCATED: "true",
        ORIGINAL_SIZE: str(len(data)),
        ORIGINAL_SHA256: hashlib.sha256(data).hexdigest(),
    }


@pytest.mark.parametrize(
    ("data", "shown"),
    [
        (b'{"a": 1}', '{"a": 1}'),
        (b"bad \xff\xfe utf8", "bad \\xff\\xfe utf8"),
        (b"nul\x00 esc\x1b[31m bell\x07", "nul\\x00 esc\\x1b[31m bell\\x07"),
        (b"lines\n\tkept", "lines\n\tkept"),
        ("é and 😀".encode(), "é and 😀"),
        ("\u009b csi".encode(), "\\x9b csi"),
    ],
)
def test_a_preview_escapes_what_cannot_be_printed_safely(data: bytes, shown: str) -> None:
    assert preview(data, 100) == shown


def test_a_preview_is_bounded_and_says_there_is_more() -> None:
    assert preview(b"a" * 10_000, 16) == "a" * 16 + "…"
    # A multi-byte character cut at the limit is escaped, never an error.
    assert preview("😀".encode(), 2) == "\\xf0\\x9f…"
