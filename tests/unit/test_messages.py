"""One reading of dates and times, and msgspec's validation errors in words, on every surface that
can be exercised without servers: the shared filters, the CLI's checks before it connects, the tool
inputs (MCP and NATS) and the publisher client."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta, timezone

import msgspec
import pytest
from typer.testing import CliRunner

from noema.application.curation import KnowledgeEntry
from noema.application.tools import TOOLS, ToolInputError, decode_input, input_schema
from noema.application.views import ListQuery, TimelineQuery, parse
from noema.client import InvalidObservation, build_observation
from noema.errors import InvalidQuery
from noema.instants import FORMS, InvalidInstant, parse_instant
from noema_api.endpoint import parse_body
from noema_api.errors import ApiError
from noema_api.knowledge_models import FactBody
from noema_api.models import KnowledgeBody
from noema_api.openapi import build_openapi
from noema_api.routes import ENDPOINTS
from noema_cli.main import app
from noema_events.messages import humanize
from noema_service.operations import OPERATIONS

ACCEPTED = [
    ("2020-01-01", datetime(2020, 1, 1, tzinfo=UTC)),
    ("2020-01-01T09:30:00", datetime(2020, 1, 1, 9, 30, tzinfo=UTC)),
    ("2020-01-01T09:30", datetime(2020, 1, 1, 9, 30, tzinfo=UTC)),
    ("2020-01-01 09:30:00", datetime(2020, 1, 1, 9, 30, tzinfo=UTC)),
    ("2020-01-01T09:30:00Z", datetime(2020, 1, 1, 9, 30, tzinfo=UTC)),
    (
        "2020-01-01T09:30:00.5+01:00",
        datetime(2020, 1, 1, 9, 30, 0, 500_000, tzinfo=timezone(timedelta(hours=1))),
    ),
    ("2020-01-01T09:30:00.123456789Z", datetime(2020, 1, 1, 9, 30, 0, 123_456, tzinfo=UTC)),
]
REFUSED = [
    "yesterday",
    "2020",
    "2020-13-01",
    "2020-01-01T25:00:00Z",
    "2020-01-01Z",
    "1577836800",
    "",
    "01/02/2020",
]


@pytest.mark.parametrize(("text", "expected"), ACCEPTED)
def test_the_accepted_forms_are_read_as_utc_unless_they_name_a_zone(text: str, expected: datetime) -> None:
    assert parse_instant(text, "since") == expected
    assert parse(ListQuery, {"since": text}).since == expected
    # As the end of a period, a plain date means the end of that day (the day is included).
    until = expected + timedelta(days=1) if len(text) == len("2020-01-01") else expected
    assert parse(TimelineQuery, {"workspace": "acme", "until": text}).until == until
    assert parse_instant(text, "--until") == until


def test_an_until_date_includes_that_day_and_a_since_date_starts_it() -> None:
    since = parse(ListQuery, {"since": "2026-03-01"}).since
    until = parse(ListQuery, {"until": "2026-03-01"}).until
    assert since == datetime(2026, 3, 1, tzinfo=UTC)
    assert until == datetime(2026, 3, 2, tzinfo=UTC)
    noon = datetime(2026, 3, 1, 12, tzinfo=UTC)
    assert since <= noon < until  # filters keep since <= t < until
    # valid_until is not a period's end: a date there is still that day's midnight.
    assert parse_instant("2026-03-01", "--valid-until") == datetime(2026, 3, 1, tzinfo=UTC)


@pytest.mark.parametrize("text", REFUSED)
def test_anything_else_is_refused_naming_the_parameter_and_the_forms(text: str) -> None:
    with pytest.raises(InvalidInstant) as caught:
        parse_instant(text, "--valid-until")
    assert str(caught.value) == f"--valid-until: {text!r} is not a date or time; give {FORMS}"
    with pytest.raises(InvalidQuery, match=r"^since: .* is not a date or time; give an RFC 3339"):
        parse(ListQuery, {"since": text})


@pytest.mark.parametrize("text", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:00:00-05:00"])
def test_an_instant_outside_the_representable_range_is_refused_not_crashed_on(text: str) -> None:
    with pytest.raises(InvalidInstant, match="out of the range of dates and times"):
        parse_instant(text, "since")
    with pytest.raises(InvalidQuery, match=r"^since: .* out of the range"):
        parse(ListQuery, {"since": text})


def test_a_plus_lost_in_a_url_is_pointed_out() -> None:
    with pytest.raises(InvalidInstant, match=r"write the '\+' of a time zone as %2B"):
        parse_instant("2026-01-01T10:00:00 01:00", "since")


def test_operator_entries_read_their_times_with_the_same_reader() -> None:
    entry = parse(KnowledgeEntry, {"workspace": "acme", "content": "x", "valid_until": "2030-01-01"})
    assert entry.valid_until == datetime(2030, 1, 1, tzinfo=UTC)


runner = CliRunner()


@pytest.mark.parametrize(
    "args",
    [
        ["memory", "list", "--since", "yesterday"],
        ["memory", "timeline", "-w", "acme", "--until", "yesterday"],
        ["memory", "search", "x", "--since", "yesterday"],
        ["memory", "add", "x", "-w", "acme", "--reason", "r", "--valid-until", "yesterday"],
        ["fact", "propose", "x", "-w", "acme", "-d", "ops", "-t", "t", "--valid-until", "yesterday"],
    ],
)
def test_every_cli_time_option_refuses_with_the_same_message_and_exit_code_2(
    args: list[str], tmp_path: object
) -> None:
    ran = runner.invoke(app, [*args, "--data-dir", str(tmp_path)], prog_name="noemactl")
    assert ran.exit_code == 2, ran.output
    said = " ".join(ran.output.split())
    assert "'yesterday' is not a date or time; give an RFC 3339 timestamp" in said
    assert "or a date, meaning midnight UTC (2026-03-01; as until, the end of that day)" in said
    assert "Traceback" not in said
    # Under --json (wherever it is given), the refusal is a JSON object too.
    as_json = runner.invoke(app, ["--data-dir", str(tmp_path), *args[:2], "--json", *args[2:]])
    assert as_json.exit_code == 2, as_json.output
    refusal = json.loads(as_json.output.strip().splitlines()[-1])
    assert refusal["exit_code"] == 2
    assert "'yesterday' is not a date or time" in refusal["error"]


def test_cli_write_checks_speak_in_words(tmp_path: object) -> None:
    blank = runner.invoke(
        app, ["memory", "add", "   ", "-w", "acme", "--reason", "r", "--data-dir", str(tmp_path)]
    )
    assert blank.exit_code == 2
    assert "content must not be blank" in blank.output
    assert "regex" not in blank.output
    bad_ws = runner.invoke(app, ["observe", "hi", "-w", "bad ws!", "-m", "ops", "--data-dir", str(tmp_path)])
    assert bad_ws.exit_code == 2
    said = " ".join(bad_ws.output.split())
    assert "workspace 'bad ws!' is not a valid name: 1-64 letters, digits, '_' or '-'" in said
    assert "regex" not in said


def test_tool_inputs_name_the_accepted_fields_on_mcp_and_nats() -> None:
    tool = TOOLS["record_observation"]
    for raw in ({"text": "hi"}, b'{"text": "hi"}'):
        with pytest.raises(ToolInputError) as caught:
            decode_input(tool, raw)
        assert str(caught.value) == "record_observation: unknown field `text`; accepted fields: content"
    with pytest.raises(ToolInputError, match=r"^search_memory: `query` is required$"):
        decode_input(TOOLS["search_memory"], {})


async def test_the_nats_observe_operation_speaks_in_words() -> None:
    observe = OPERATIONS["observe"]
    with pytest.raises(ToolInputError) as caught:
        await observe.run(None, None, b'{"text": "hi"}')  # type: ignore[arg-type]
    assert str(caught.value).startswith("observe: unknown field `text`; accepted fields: content, ")


def test_the_publisher_client_speaks_in_words() -> None:
    with pytest.raises(InvalidObservation, match=r"^workspace 'bad ws!' is not a valid name: 1-64 letters"):
        build_observation("hi", workspace="bad ws!", mind="ops")
    with pytest.raises(InvalidObservation, match=r"^content must not be blank$"):
        build_observation("   ", workspace="acme", mind="ops")
    with pytest.raises(InvalidObservation, match=r"^salience must be at most 1\.0 \(got 2\.0\)$"):
        build_observation("hi", workspace="acme", mind="ops", salience=2.0)


class _Sample(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    count: int = 0
    shade: str = "x"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"name": "a", "colour": 1}, "unknown field `colour`; accepted fields: name, count, shade"),
        ({}, "`name` is required"),
        ({"name": 1}, "name must be text (got an integer)"),
        ([], "the input must be an object (got a list)"),
    ],
)
def test_humanize_says_what_is_wrong_without_msgspec_notation(raw: object, message: str) -> None:
    with pytest.raises(msgspec.ValidationError) as caught:
        msgspec.convert(raw, _Sample)
    assert humanize(caught.value, raw, struct=_Sample) == message


# --- the same dates on every surface: CLI options, API bodies, tool and observe inputs ---------


class _Body:
    """What parse_body reads of a request: its body."""

    def __init__(self, data: dict[str, object]) -> None:
        self._data = msgspec.json.encode(data)

    async def body(self) -> bytes:
        return self._data


def _surfaces(text: str) -> dict[str, Callable[[], Awaitable[datetime | None]]]:
    """How each surface reads ``text`` as a date, as the date it stores (a refusal raises)."""

    async def cli() -> datetime | None:  # noemactl memory add --valid-until (checked before connecting)
        return parse(KnowledgeEntry, {"workspace": "acme", "content": "x", "valid_until": text}).valid_until

    async def memory_body() -> datetime | None:  # POST /v1/memories
        body = {"workspace": "acme", "content": "x", "reason": "r", "valid_until": text}
        parsed: KnowledgeBody = await parse_body(_Body(body), KnowledgeBody)  # type: ignore[arg-type]
        return parsed.valid_until

    async def fact_body() -> datetime | None:  # POST /v1/facts
        body = {"workspace": "acme", "domain": "ops", "topic": "t", "content": "x", "reason": "r"}
        parsed: FactBody = await parse_body(_Body({**body, "valid_until": text}), FactBody)  # type: ignore[arg-type]
        return parsed.valid_until

    async def search_tool() -> datetime | None:  # search_memory since, as JSON (NATS) and arguments (MCP)
        raw = decode_input(TOOLS["search_memory"], msgspec.json.encode({"query": "q", "since": text}))
        assert decode_input(TOOLS["search_memory"], {"query": "q", "since": text}) == raw
        since: datetime | None = raw.since
        return since

    async def propose_tool() -> datetime | None:  # propose_fact valid_until
        args = {"domain": "ops", "topic": "t", "content": "x", "valid_until": text}
        valid_until: datetime | None = decode_input(TOOLS["propose_fact"], args).valid_until
        return valid_until

    async def observe() -> datetime | None:  # the NATS service's observe, through Noema.observe
        seen: dict[str, object] = {}

        class App:
            async def observe(self, who: object, content: str, **fields: object) -> dict[str, object]:
                seen.update(fields)
                return {}

        await OPERATIONS["observe"].run(
            App(),  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            msgspec.json.encode({"content": "x", "happened_at": text}),
        )
        when = seen["happened_at"]
        assert isinstance(when, datetime)
        return when

    return {
        "cli": cli,
        "memory body": memory_body,
        "fact body": fact_body,
        "search_memory": search_tool,
        "propose_fact": propose_tool,
        "observe": observe,
    }


@pytest.mark.parametrize(("text", "expected"), ACCEPTED)
async def test_every_surface_accepts_the_same_dates(text: str, expected: datetime) -> None:
    for surface, read in _surfaces(text).items():
        when = await read()
        assert when == expected, surface
        assert when is not None, surface
        assert when.tzinfo is not None, surface  # propose_fact refuses a datetime without a zone


@pytest.mark.parametrize("text", [*REFUSED, 1577836800, True])
async def test_every_surface_refuses_the_same_dates_in_words(text: object) -> None:
    reason = f"{text!r} is not a date or time; give {FORMS}"
    refusals = {
        "cli": (InvalidQuery, f"valid_until: {reason}"),
        "memory body": (ApiError, f"invalid body: valid_until: {reason}"),
        "fact body": (ApiError, f"invalid body: valid_until: {reason}"),
        "search_memory": (ToolInputError, f"search_memory: since: {reason}"),
        "propose_fact": (ToolInputError, f"propose_fact: valid_until: {reason}"),
        "observe": (ToolInputError, f"observe: happened_at: {reason}"),
    }
    for surface, read in _surfaces(text).items():  # type: ignore[arg-type]
        kind, message = refusals[surface]
        with pytest.raises(kind) as caught:
            await read()
        said = caught.value.message if isinstance(caught.value, ApiError) else str(caught.value)
        assert said == message, surface
        if isinstance(caught.value, ApiError):
            assert caught.value.status == 422


def test_null_dates_stay_absent_on_every_surface() -> None:
    assert decode_input(TOOLS["search_memory"], {"query": "q", "since": None}).since is None
    assert (
        parse(KnowledgeEntry, {"workspace": "acme", "content": "x", "valid_until": None}).valid_until is None
    )


def test_schemas_describe_the_date_forms_and_do_not_demand_rfc_3339() -> None:
    schemas = {f"tool {name}": input_schema(tool) for name, tool in TOOLS.items()}
    schemas |= {f"service {name}": op.schema for name, op in OPERATIONS.items()}
    for where, schema in schemas.items():
        assert '"date-time"' not in msgspec.json.encode(schema).decode(), where
    for name, field in [
        ("search_memory", "since"),
        ("search_memory", "until"),
        ("propose_fact", "valid_until"),
    ]:
        assert FORMS in input_schema(TOOLS[name])["properties"][field]["description"]
    observe = OPERATIONS["observe"].schema["$defs"]["ObserveInput"]
    assert FORMS in observe["properties"]["happened_at"]["description"]
    document = build_openapi(ENDPOINTS)["components"]["schemas"]
    for body in ("KnowledgeBody", "FactBody"):
        # The document offers RFC 3339 beside a plain date and a timestamp without a zone.
        text = msgspec.json.encode(document[body]).decode()
        assert text.count('"format":"date-time"') == text.count('"format":"date"') > 0, body
