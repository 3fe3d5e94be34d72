"""A point of the event stream as an operator writes it (``noemactl replay --until TIME|SEQ``): a
sequence, or a time that says its zone; anything else is refused, saying what to write."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from typer.testing import CliRunner

from noema.stream_points import InvalidStreamPoint, parse_stream_point
from noema_cli.main import app
from noema_cli.replay_cmd import differences


def test_digits_are_a_stream_sequence() -> None:
    assert parse_stream_point("1200", "--until") == 1200
    assert parse_stream_point(" 7 ", "--until") == 7


def test_a_time_with_its_zone_is_read_in_utc() -> None:
    assert parse_stream_point("2026-03-02T10:32:00+01:00", "--until") == datetime(
        2026, 3, 2, 9, 32, tzinfo=UTC
    )
    assert parse_stream_point("2026-03-02T10:32:00.25Z", "--until") == datetime(
        2026, 3, 2, 10, 32, 0, 250_000, tzinfo=UTC
    )


def test_a_lower_case_t_and_z_are_read_as_iso_8601_allows() -> None:
    assert parse_stream_point("2026-03-02t10:32z", "--as-of") == datetime(2026, 3, 2, 10, 32, tzinfo=UTC)


def test_memory_search_as_of_a_zoneless_time_exits_2_before_reaching_any_server() -> None:
    ran = CliRunner().invoke(app, ["memory", "search", "deploy", "--as-of", "2026-03-02T10:32:00"])
    assert ran.exit_code == 2
    assert "has no time zone" in ran.output


@pytest.mark.parametrize("text", ["2026-03-02T10:32:00", "2026-03-02"])
def test_a_time_without_a_zone_is_refused_with_the_zone_to_add(text: str) -> None:
    with pytest.raises(InvalidStreamPoint) as refused:
        parse_stream_point(text, "--until")
    message = str(refused.value)
    assert "--until" in message
    assert "no time zone" in message
    assert f"{datetime.fromisoformat(text).isoformat()}Z" in message


@pytest.mark.parametrize("text", ["yesterday", "10:32", "", "0", "-3"])
def test_anything_else_is_refused_saying_what_to_write(text: str) -> None:
    with pytest.raises(InvalidStreamPoint) as refused:
        parse_stream_point(text, "--until")
    assert "2026-03-02T10:32:00Z" in str(refused.value)


def test_replay_until_a_zoneless_time_exits_2_before_reaching_any_server() -> None:
    result = CliRunner().invoke(app, ["replay", "--until", "2026-03-02T10:32", "--json"])
    assert result.exit_code == 2
    assert "no time zone" in result.output


def test_replay_refuses_until_and_until_seq_together() -> None:
    result = CliRunner().invoke(app, ["replay", "--until", "5", "--until-seq", "5"])
    assert result.exit_code == 2


def test_the_rows_that_differ_are_listed_with_their_key_and_columns() -> None:
    found = {
        "count": {"memories": 3},
        "rows": [
            {
                "table": "memories",
                "key": {"id": "m1"},
                "in": "both",
                "columns": {"activation": {"live": 0.5, "replay": 0.25}},
            },
            {"table": "memories", "key": {"id": "m2"}, "in": "live only"},
        ],
    }
    assert differences(found) == [
        "rows that differ: memories 3 (the first 2 below)",
        "  memories id=m1: different values",
        "    activation: live 0.5, replay 0.25",
        "  memories id=m2: only in the live read model",
    ]
    assert differences({"count": {}, "rows": []}) == []
