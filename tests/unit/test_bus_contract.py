"""The published bus contract refuses what the server refuses and accepts what it accepts.

Every golden sample and a table of near-misses go through two real JSON Schema validators
(``jsonschema``, ``jsonschema-rs`` with format assertion) and through the server's own decoder
(:func:`noema_events.decode_event`); the verdicts must agree, except for the few refusals a JSON
Schema cannot express, which are listed (and pinned) here and in the AsyncAPI document's description.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from datetime import datetime
from functools import cache
from itertools import product
from pathlib import Path
from typing import Any

import jsonschema
import jsonschema_rs
import msgspec
import pytest
import referencing
import referencing.jsonschema

from noema_events import EVENT_TYPES, EventDecodeError, decode_event
from noema_events.asyncapi import channel_address
from noema_events.datetimes import DATETIME_PATTERN
from noema_events.golden import GOLDEN_DIR

SCHEMAS = GOLDEN_DIR.parent
JSON = SCHEMAS / "json"
Raw = dict[str, Any]


def golden(tag: str) -> Raw:
    data: Raw = json.loads((GOLDEN_DIR / f"{tag}.json").read_text())
    return data


@cache
def schema_of(tag: str) -> Raw:
    data: Raw = json.loads((JSON / f"{tag}.json").read_text())
    return data


def python_verdict(tag: str, instance: Any) -> bool:
    validator = jsonschema.Draft202012Validator(schema_of(tag), format_checker=jsonschema.FormatChecker())
    return bool(validator.is_valid(instance))


def rust_verdict(tag: str, instance: Any, *, formats: bool = False) -> bool:
    return bool(jsonschema_rs.validator_for(schema_of(tag), validate_formats=formats).is_valid(instance))


def server_verdict(data: bytes) -> bool:
    try:
        decode_event(data)
    except EventDecodeError:
        return False
    return True


# --- golden samples ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(GOLDEN_DIR.glob("*.json")), ids=lambda p: p.stem)
def test_every_golden_sample_is_valid_under_its_schema_for_both_validators(path: Path) -> None:
    instance = json.loads(path.read_text())
    assert python_verdict(path.stem, instance)
    assert rust_verdict(path.stem, instance, formats=True)
    assert server_verdict(path.read_bytes())


@pytest.mark.parametrize("tag", sorted(p.stem for p in GOLDEN_DIR.glob("*.json")))
def test_every_golden_sample_is_valid_under_its_asyncapi_message_which_its_channel_carries(tag: str) -> None:
    doc = asyncapi()
    payload = doc["components"]["messages"][tag]["payload"]
    assert _component_validator(payload["$ref"]).is_valid(golden(tag))
    assert not _component_validator(payload["$ref"]).is_valid({**golden(tag), "occurred_at": "not-a-date"})
    name = tag.rsplit(".", 1)[0]
    received = [m["$ref"] for m in doc["operations"][f"consume.{name}"]["messages"]]
    published = [m["$ref"] for m in doc["operations"][f"publish.{name}"]["messages"]]
    assert f"#/channels/{name}/messages/{tag}" in received
    assert published == [f"#/channels/{name}/messages/{t}" for t in EVENT_TYPES if t.startswith(f"{name}.v")]


# --- near-misses: the schema's verdict is the server's ----------------------------------------------


def at(path: str, value: Any) -> Callable[[Raw], None]:
    """Set ``value`` at a dotted path (``payload.items.0.entered_at``)."""

    def mutate(raw: Raw) -> None:
        *parents, last = path.split(".")
        node: Any = raw
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return mutate


def drop(path: str) -> Callable[[Raw], None]:
    def mutate(raw: Raw) -> None:
        *parents, last = path.split(".")
        node: Any = raw
        for key in parents:
            node = node[key]
        del node[last]

    return mutate


CASES: list[tuple[str, str, Callable[[Raw], None]]] = [
    # date-times
    ("occurred_at not a date", "memory.created.v1", at("occurred_at", "not-a-date")),
    ("occurred_at a date only", "memory.created.v1", at("occurred_at", "2026-03-01")),
    ("occurred_at RFC 3339 Z", "memory.created.v1", at("occurred_at", "2026-03-01T09:30:00Z")),
    ("occurred_at with an offset", "memory.created.v1", at("occurred_at", "2026-03-01T09:30:00-05:30")),
    ("occurred_at nanoseconds", "memory.created.v1", at("occurred_at", "2026-03-01T09:30:00.123456789Z")),
    ("occurred_at lowercase t and z", "memory.created.v1", at("occurred_at", "2026-03-01t09:30:00z")),
    ("occurred_at a leap second", "memory.created.v1", at("occurred_at", "2016-12-31T23:59:60Z")),
    ("occurred_at 30 February", "memory.created.v1", at("occurred_at", "2026-02-30T09:30:00Z")),
    ("occurred_at 29 February 2024", "memory.created.v1", at("occurred_at", "2024-02-29T09:30:00Z")),
    ("occurred_at 29 February 2100", "memory.created.v1", at("occurred_at", "2100-02-29T09:30:00Z")),
    ("occurred_at hour 24", "memory.created.v1", at("occurred_at", "2026-03-01T24:00:00Z")),
    ("occurred_at no seconds", "memory.created.v1", at("occurred_at", "2026-03-01T09:30Z")),
    ("occurred_at offset +24:00", "memory.created.v1", at("occurred_at", "2026-03-01T09:30:00+24:00")),
    ("occurred_at offset hours only", "memory.created.v1", at("occurred_at", "2026-03-01T09:30:00+01")),
    ("occurred_at year 0", "memory.created.v1", at("occurred_at", "0000-03-01T09:30:00Z")),
    ("occurred_at a number", "memory.created.v1", at("occurred_at", 1772357400)),
    ("occurred_at null", "memory.created.v1", at("occurred_at", None)),
    ("happened_at not a date", "observation.recorded.v1", at("payload.happened_at", "yesterday")),
    ("happened_at null", "observation.recorded.v1", at("payload.happened_at", None)),
    ("valid_until not a date", "fact.proposed.v2", at("payload.valid_until", "soon")),
    ("tick_at not a date", "activation.decayed.v1", at("payload.tick_at", "now")),
    ("entered_at not a date", "working_memory.updated.v1", at("payload.items.0.entered_at", "then")),
    (
        "entered_at with an offset",
        "working_memory.updated.v1",
        at("payload.items.0.entered_at", "2026-03-01T10:00:00+01:00"),
    ),
    # the envelope
    ("workspace with a dot", "memory.created.v1", at("workspace", "ac.me")),
    ("workspace empty", "memory.created.v1", at("workspace", "")),
    ("workspace of 65 characters", "memory.created.v1", at("workspace", "w" * 65)),
    ("mind empty", "memory.created.v1", at("mind", "")),
    ("mind a wildcard", "memory.created.v1", at("mind", "*")),
    ("no id", "memory.created.v1", drop("id")),
    ("no correlation id", "memory.created.v1", drop("correlation_id")),
    ("causation id null", "memory.created.v1", at("causation_id", None)),
    ("an unknown field", "memory.created.v1", at("from_the_future", {"x": 1})),
    ("an unknown payload field", "memory.created.v1", at("payload.from_the_future", 1)),
    ("another version's type", "memory.created.v1", at("type", "memory.created.v2")),
    # payloads
    ("content blank", "observation.recorded.v1", at("payload.content", " \n\t ")),
    ("content empty", "observation.recorded.v1", at("payload.content", "")),
    ("content of 32,001 characters", "observation.recorded.v1", at("payload.content", "x" * 32_001)),
    ("content of 32,000 characters", "observation.recorded.v1", at("payload.content", "é" * 32_000)),
    ("salience above 1", "observation.recorded.v1", at("payload.salience", 1.5)),
    ("salience 1", "observation.recorded.v1", at("payload.salience", 1)),
    ("an unknown channel", "observation.recorded.v1", at("payload.channel", "email")),
    ("metadata not text", "observation.recorded.v1", at("payload.metadata", {"k": 1})),
    ("participants not a list", "observation.recorded.v1", at("payload.participants", "ann")),
    ("capacity a string", "attention.decided.v1", at("payload.capacity", "9")),
    ("dimensions a float", "memory.embedded.v1", at("payload.dimensions", 3.5)),
    ("half-life 0", "memory.retrieved.v2", at("payload.half_life_days", 0)),
    ("mentions 0", "fact.mentioned.v2", at("payload.mentions", 0)),
    ("an unknown access", "grant.changed.v1", at("payload.access", "admin")),
    ("an unknown action", "operator.action.v1", at("payload.action", "delete")),
    ("reason empty", "operator.action.v1", at("payload.reason", "")),
    ("blank memory content still read", "memory.created.v1", at("payload.content", "   ")),
    ("an earlier version without its later fields", "fact.proposed.v1", drop("payload.veracity")),
    ("an earlier version's boost null", "memory.retrieved.v1", at("payload.boost", None)),
]


@pytest.mark.parametrize(("case", "tag", "mutate"), CASES, ids=[c[0] for c in CASES])
def test_the_schema_refuses_exactly_where_the_server_refuses(
    case: str, tag: str, mutate: Callable[[Raw], None]
) -> None:
    raw = copy.deepcopy(golden(tag))
    mutate(raw)
    server = server_verdict(json.dumps(raw).encode())
    assert python_verdict(tag, raw) == server, f"{case}: jsonschema says {not server}, the server {server}"
    assert rust_verdict(tag, raw) == server, f"{case}: jsonschema-rs says {not server}, the server {server}"


def test_the_table_has_both_verdicts() -> None:
    verdicts = set()
    for _, tag, mutate in CASES:
        raw = copy.deepcopy(golden(tag))
        mutate(raw)
        verdicts.add(server_verdict(json.dumps(raw).encode()))
    assert verdicts == {True, False}


SPELLINGS_FORMAT_REFUSES = ["2026-03-01 09:30:00Z", "2026-03-01T09:30:00", "2026-03-01T09:30:00+0100"]
"""What the server reads but RFC 3339 (``format: date-time``, asserted) does not allow."""


@pytest.mark.parametrize("when", SPELLINGS_FORMAT_REFUSES)
def test_a_format_asserting_validator_is_stricter_only_on_spellings_rfc_3339_does_not_allow(
    when: str,
) -> None:
    raw = {**golden("memory.created.v1"), "occurred_at": when}
    assert server_verdict(json.dumps(raw).encode())
    assert rust_verdict("memory.created.v1", raw)
    assert python_verdict("memory.created.v1", raw)
    assert not rust_verdict("memory.created.v1", raw, formats=True)


def test_format_assertion_changes_no_other_verdict_of_the_table() -> None:
    for case, tag, mutate in CASES:
        raw = copy.deepcopy(golden(tag))
        mutate(raw)
        assert rust_verdict(tag, raw, formats=True) == server_verdict(json.dumps(raw).encode()), case


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


BEYOND_THE_SCHEMA: list[tuple[str, str, Callable[[Raw], None]]] = [
    ("a NUL character", "observation.recorded.v1", at("payload.content", "a\x00b")),
    ("an integer written with a fraction", "attention.decided.v1", at("payload.capacity", 9.0)),
    ("nested 33 levels deep", "memory.created.v1", at("extra", _nested(33))),
    ("larger than 1 MiB", "memory.created.v1", at("extra", "x" * (1024 * 1024))),
    ("a fraction rounding past 9999", "memory.created.v1", at("occurred_at", "9999-12-31T23:59:59.9999999Z")),
]
"""What the server refuses that no JSON Schema can say (the AsyncAPI document's description lists
them): if one starts to agree, move it to :data:`CASES`."""


@pytest.mark.parametrize(("case", "tag", "mutate"), BEYOND_THE_SCHEMA, ids=[c[0] for c in BEYOND_THE_SCHEMA])
def test_what_only_the_server_refuses_is_the_documented_list(
    case: str, tag: str, mutate: Callable[[Raw], None]
) -> None:
    raw = copy.deepcopy(golden(tag))
    mutate(raw)
    assert not server_verdict(json.dumps(raw).encode()), case
    assert python_verdict(tag, raw), case
    assert rust_verdict(tag, raw, formats=True), case


# --- the date-time pattern is msgspec's reading, exhaustively over near-misses ----------------------


def _msgspec_reads(text: str) -> bool:
    try:
        msgspec.json.decode(json.dumps(text).encode(), type=datetime)
    except msgspec.ValidationError:
        return False
    return True


YEARS = [
    "0000",
    "0001",
    "0004",
    "0400",
    "1900",
    "1999",
    "2000",
    "2023",
    "2024",
    "2100",
    "9999",
    "999",
    "+2026",
]
MONTHS = ["00", "01", "02", "04", "06", "09", "11", "12", "13", "1"]
DAYS = ["00", "01", "28", "29", "30", "31", "32", "1"]
SEPARATORS = ["T", "t", " ", "_", ""]
HOURS = ["00", "19", "23", "24", "3"]
MINUTES = ["00", "59", "60"]
SECONDS = ["00", "59", "60", ""]
FRACTIONS = ["", ".", ".5", ".123456", ".1234567", ".000000000001", ",5"]
ZONES = [
    "",
    "Z",
    "z",
    "+01:00",
    "-00:00",
    "+0100",
    "+01",
    "+23:59",
    "-23:59",
    "+24:00",
    "+01:60",
    " Z",
    "ZZ",
    "Z ",
]


def test_the_date_time_pattern_matches_exactly_what_msgspec_reads() -> None:
    pattern = re.compile(DATETIME_PATTERN)
    dates = [f"{y}-{m}-{d}" for y, m, d in product(YEARS, MONTHS, DAYS)]
    times = [
        f"{h}:{mi}{':' + s if s else ''}{f}{z}"
        for h, mi, s, f, z in product(HOURS, MINUTES, SECONDS, FRACTIONS, ZONES)
    ]
    texts = [f"{d}T12:00:00Z" for d in dates] + [f"2024-02-29{s}{t}" for s, t in product(SEPARATORS, times)]
    differ = [t for t in texts if bool(pattern.fullmatch(t)) != _msgspec_reads(t)]
    assert differ == []
    assert any(pattern.fullmatch(t) for t in texts)
    assert not all(pattern.fullmatch(t) for t in texts)


# --- the AsyncAPI document --------------------------------------------------------------------------


@cache
def asyncapi() -> Raw:
    data: Raw = json.loads((SCHEMAS / "asyncapi.json").read_text())
    return data


ASYNCAPI_SCHEMA = Path(__file__).parent / "asyncapi" / "asyncapi-3.0.0.schema.json"


def test_the_asyncapi_document_is_valid_asyncapi_3() -> None:
    schema = json.loads(ASYNCAPI_SCHEMA.read_text())
    errors = [
        f"{list(e.absolute_path)}: {e.message[:200]}"
        for e in jsonschema.Draft7Validator(schema).iter_errors(asyncapi())
    ]
    assert errors == []


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return own + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def resolve(ref: str) -> Any:
    assert ref.startswith("#/"), ref
    node: Any = asyncapi()
    for key in ref[2:].split("/"):
        node = node[key.replace("~1", "/").replace("~0", "~")]
    return node


def test_every_ref_of_the_asyncapi_document_resolves() -> None:
    refs = _refs(asyncapi())
    assert refs
    for ref in refs:
        resolve(ref)


def test_every_operation_names_a_channel_and_messages_of_that_channel() -> None:
    doc = asyncapi()
    assert {op["action"] for op in doc["operations"].values()} == {"send", "receive"}
    for name, op in doc["operations"].items():
        channel = resolve(op["channel"]["$ref"])
        prefix = op["channel"]["$ref"] + "/messages/"
        for message in op["messages"]:
            assert message["$ref"].startswith(prefix), name
            resolve(message["$ref"])
        assert op.get("tags"), f"{name}: who performs it"
        assert channel["messages"]
        if "reply" in op:
            reply_prefix = op["reply"]["channel"]["$ref"] + "/messages/"
            assert all(m["$ref"].startswith(reply_prefix) for m in op["reply"]["messages"]), name


def test_every_channel_is_sent_and_received_and_declares_exactly_its_parameters() -> None:
    doc = asyncapi()
    used = {(op["channel"]["$ref"], op["action"]) for op in doc["operations"].values()}
    for name, channel in doc["channels"].items():
        if channel["address"] is None:  # the requester's inbox: named by each operation's reply
            continue
        assert {(f"#/channels/{name}", "send"), (f"#/channels/{name}", "receive")} <= used, name
        placeholders = set(re.findall(r"\{(\w+)\}", channel["address"]))
        assert set(channel["parameters"]) == placeholders, name
        for parameter in channel["parameters"].values():
            re.compile(parameter["x-pattern"])


def test_every_current_event_has_its_channel_and_the_dead_letters_and_every_service_operation_theirs() -> (
    None
):
    from noema_service.operations import OPERATIONS

    doc = asyncapi()
    addresses = {c["address"] for c in doc["channels"].values()}
    assert {channel_address(tag) for tag in EVENT_TYPES} <= addresses
    assert "{prefix}.dlq.{source}" in addresses
    for name in OPERATIONS:
        assert f"{{prefix}}.agent.{{workspace}}.{{role}}.{{agent}}.{name}" in addresses
        assert doc["operations"][f"answer.{name}"]["reply"]


# --- a body must match its subject ------------------------------------------------------------------


def contract_verdict(tag: str, subject: str, body: Raw) -> bool:
    """The AsyncAPI document's reading: the subject fits the channel's address (each parameter its
    pattern), the parameters located in the payload equal the body's values ('_' for no mind), and
    the body is valid under the message's schema."""
    channel = next(c for c in asyncapi()["channels"].values() if tag in c["messages"])
    params = channel["parameters"]
    address = re.escape(channel["address"])
    for name in params:
        address = address.replace(re.escape("{" + name + "}"), f"(?P<{name}>[^.]+)")
    found = re.fullmatch(address, subject)
    if found is None:
        return False
    for name, parameter in params.items():
        if not re.match(parameter["x-pattern"], found[name]):
            return False
        location = parameter.get("location")
        if location:
            value = body.get(location.removeprefix("$message.payload#/"), "")
            if found[name] != (value or "_"):
                return False
    return python_verdict(tag, body)


def attend_verdict(subject: str, data: bytes) -> bool:
    from noema.domain.attention import AttentionConfig
    from noema.topology import Topology
    from noema_attend.worker import AttendHandler

    class NoNats:
        def jetstream(self, **options: Any) -> None:
            return None

    handler = AttendHandler(NoNats(), Topology(), AttentionConfig())  # type: ignore[arg-type]
    try:
        handler._validate(data, subject)
    except EventDecodeError:
        return False
    return True


def projector_verdict(subject: str, data: bytes) -> bool:
    from noema.topology import Topology

    try:
        Topology().event_on_subject(data, subject)
    except EventDecodeError:
        return False
    return True


SUBJECT_CASES: list[tuple[str, str, Callable[[Raw], None]]] = [
    ("observation.recorded.v1", "noema.obs.acme.acme", lambda raw: None),
    ("observation.recorded.v1", "noema.obs.acme.ops", lambda raw: None),
    ("observation.recorded.v1", "noema.obs.other.acme", lambda raw: None),
    ("observation.recorded.v1", "noema.obs.acme._", at("mind", "")),
    ("observation.recorded.v1", "noema.obs.acme.acme.recall", lambda raw: None),
    ("recall.proposed.v1", "noema.obs.acme.acme.recall", lambda raw: None),
    ("recall.proposed.v1", "noema.obs.acme.acme", lambda raw: None),
    ("recall.proposed.v1", "noema.obs.acme.ops.recall", lambda raw: None),
    ("memory.created.v1", "noema.evt.acme.acme.memory_created", lambda raw: None),
    ("memory.created.v1", "noema.evt.acme.ops.memory_created", lambda raw: None),
    ("memory.created.v1", "noema.evt.other.acme.memory_created", lambda raw: None),
    ("memory.created.v1", "noema.evt.acme.acme.fact_proposed", lambda raw: None),
    ("memory.created.v1", "noema.evt.acme._.memory_created", at("mind", "")),
    ("memory.created.v1", "noema.evt.acme._.memory_created", lambda raw: None),
    ("activation.decayed.v1", "noema.evt.acme._.activation_decayed", at("mind", "")),
    ("operator.action.v1", "noema.evt.acme.acme.operator_action", lambda raw: None),
]


@pytest.mark.parametrize(
    ("tag", "subject", "mutate"), SUBJECT_CASES, ids=[f"{c[0]} on {c[1]}" for c in SUBJECT_CASES]
)
def test_a_body_on_a_subject_is_accepted_by_the_contract_exactly_when_the_server_accepts_it(
    tag: str, subject: str, mutate: Callable[[Raw], None]
) -> None:
    raw = copy.deepcopy(golden(tag))
    mutate(raw)
    data = json.dumps(raw).encode()
    server = attend_verdict(subject, data) if ".obs." in subject else projector_verdict(subject, data)
    assert contract_verdict(tag, subject, raw) == server


# --- dead letters -----------------------------------------------------------------------------------


async def test_the_dead_letter_headers_are_those_the_writer_writes() -> None:
    from types import SimpleNamespace

    from noema.adapters.jetstream import dead_letter
    from noema.topology import Topology
    from noema_events.asyncapi import DEAD_LETTER_HEADERS

    written: list[tuple[str, dict[str, str]]] = []

    class Capture:
        async def publish(self, subject: str, data: bytes, headers: dict[str, str]) -> None:
            written.append((subject, headers))

    meta = SimpleNamespace(stream="NOEMA_OBSERVATIONS", sequence=SimpleNamespace(stream=7), num_delivered=1)
    msg = SimpleNamespace(subject="noema.obs.acme.ops", data=b"x" * 100, metadata=meta, headers=None)
    trace = {"traceparent": f"00-{'a' * 32}-{'b' * 16}-01", "tracestate": "k=v", "Other": "x"}
    traced = SimpleNamespace(**{**vars(msg), "headers": trace})
    await dead_letter(Capture(), Topology(), "attend", msg, "bad")  # type: ignore[arg-type]
    await dead_letter(Capture(), Topology(), "attend", traced, "bad", keep_bytes=10)  # type: ignore[arg-type]
    (subject, whole), (_, cut) = written

    declared = resolve("#/components/messages/dead_letter")["headers"]
    always = set(declared["required"])
    assert set(whole) == always
    assert set(cut) == set(declared["properties"]) == set(DEAD_LETTER_HEADERS)
    assert re.fullmatch(r"noema\.dlq\.(?P<source>\w+)", subject)
    channel = asyncapi()["channels"]["dead_letters"]
    assert "attend" in channel["parameters"]["source"]["enum"]
    assert jsonschema.Draft7Validator(declared).is_valid(whole)


# --- the agent service ------------------------------------------------------------------------------


def _component_validator(ref: str) -> jsonschema.Draft7Validator:
    registry: referencing.Registry[Any] = referencing.Registry().with_resource(
        "urn:noema:asyncapi", referencing.jsonschema.DRAFT7.create_resource(asyncapi())
    )
    return jsonschema.Draft7Validator({"$ref": "urn:noema:asyncapi" + ref}, registry=registry)


def service_accepts(operation: str, body: Raw) -> bool:
    from noema.application.tools import ToolInputError, decode
    from noema_service.operations import OPERATIONS

    try:
        decode(operation, OPERATIONS[operation].input, json.dumps(body).encode())
    except ToolInputError:
        return False
    return True


REQUESTS: list[tuple[str, Raw]] = [
    ("search_memory", {"query": "deploy"}),
    ("search_memory", {"query": "deploy", "mode": "keyword", "limit": 50, "explain": True}),
    ("search_memory", {"query": "deploy", "since": "2026-03-01T09:30:00Z", "until": "2026-03-02"}),
    ("search_memory", {"query": ""}),
    ("search_memory", {"query": "deploy", "limit": 0}),
    ("search_memory", {"query": "deploy", "mode": "fuzzy"}),
    ("search_memory", {"query": "deploy", "kinds": ["dreams"]}),
    ("search_memory", {"query": "deploy", "workspace": "other"}),
    ("search_memory", {}),
    ("propose_fact", {"domain": "ops", "topic": "deploy-day", "content": "Fridays"}),
    ("propose_fact", {"domain": "ops", "topic": "deploy-day", "content": "Fridays", "veracity": "rumour"}),
    ("propose_fact", {"domain": "ops", "topic": "", "content": "Fridays"}),
    ("supersede_policy", {"policy_id": "p-1"}),
    ("remember", {"session": "s", "content": "x", "importance": 1.5}),
    ("consolidate_memory", {"stale_after_hours": -1}),
    ("why", {"id": "abcdef"}),
    ("why", {"id": "abc"}),
    ("why", {"id": "abc def"}),
    ("update_my_notes", {"notes": ""}),
    ("get_preamble", {"task": "deploy", "repo": "billing"}),
    ("observe", {"content": "the build is red", "observation_id": "build-1", "salience": 0.5}),
    ("observe", {"content": "the build is red", "mind": "someone-else"}),
]


@pytest.mark.parametrize(("operation", "body"), REQUESTS, ids=[f"{o} {b}" for o, b in REQUESTS])
def test_a_request_is_valid_under_the_contract_exactly_when_the_service_reads_it(
    operation: str, body: Raw
) -> None:
    payload = resolve(f"#/components/messages/{operation}.request")["payload"]
    assert _component_validator(payload["$ref"]).is_valid(body) == service_accepts(operation, body)


def test_replies_are_valid_under_the_contract() -> None:
    from noema_sdk.protocol import encode_error, encode_result

    fact = {"outcome": "proposed", "memory_id": "m-1", "domain": "ops", "topic": "deploy-day"}
    search = {
        "query": "deploy",
        "mode": "keyword",
        "results": [{"id": "m-1", "content": "x", "score": 0.5, "when": "2026-03-01T09:30:00+00:00"}],
    }
    reply = _component_validator("#/components/messages/propose_fact.reply/payload")
    assert reply.is_valid(json.loads(encode_result(fact)))
    assert not reply.is_valid(json.loads(encode_result({"outcome": "proposed"})))
    body, headers = encode_error(403, "the role engineer may not write to ops")
    assert reply.is_valid(json.loads(body))
    assert set(headers) <= set(resolve("#/components/messages/propose_fact.reply")["headers"]["properties"])
    assert not reply.is_valid(json.loads(encode_error(418, "teapot")[0]))
    searched = _component_validator("#/components/messages/search_memory.reply/payload")
    assert searched.is_valid(json.loads(encode_result(search)))
    assert not searched.is_valid(json.loads(encode_result({**search, "results": [{"id": "m-1"}]})))
