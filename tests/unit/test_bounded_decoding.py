"""Bounded decoding (noema_events.bounded, docs/reliability.md): hostile bytes — JSON nested
thousands of levels deep, huge strings, bytes that are not UTF-8 or not JSON — fed to every decoder
and every scan of Noema are refused with a reason (or, in a scan, skipped), never a RecursionError
or any other crash; the depth pre-scan is exact; and no module decodes JSON outside the guard."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from noema.adapters.asgi import BodyLimit
from noema.adapters.erasure_streams import _about
from noema.application.tools import TOOLS, decode
from noema.composition.replay import _decode as replay_decode
from noema.errors import Conflict, Kind, NoemaError, kind_of
from noema.runtime.health import HeartbeatRecord
from noema.topology import Topology
from noema_api.endpoint import parse_body
from noema_api.errors import ApiError
from noema_events import EventDecodeError, decode_event, decode_recorded
from noema_events.bounded import (
    MAX_BYTES,
    MAX_DEPTH,
    OutOfBounds,
    Undecodable,
    check_bounds,
    check_value_depth,
    decode_json,
    json_depth,
)
from noema_service.operations import ObserveInput

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGY = Topology()


def _nested(depth: int, shape: str) -> bytes:
    match shape:
        case "array":
            return b"[" * depth + b"]" * depth
        case "object":
            return b'{"a":' * depth + b"1" + b"}" * depth
        case "mixed":
            return b'[{"a":' * (depth // 2) + b"0" + b"}]" * (depth // 2)
        case _:  # opened and never closed
            return b"[" * depth


_EVENT = (
    b'{"type":"observation.recorded.v1","id":"0196f1e2-0000-7000-8000-000000000001","workspace":"acme",'
    b'"mind":"ops","occurred_at":"2026-12-06T00:00:00Z","actor":"agent:ops","payload":%s}'
)

deep = st.builds(
    _nested, st.integers(MAX_DEPTH + 1, 20_000), st.sampled_from(["array", "object", "mixed", "open"])
)
hostile = st.one_of(
    deep,
    deep.map(lambda d: _EVENT % (b'{"subjects":["person:1"],"x":' + d + b"}")),  # poison in an event
    st.binary(max_size=4_000),  # not JSON, not UTF-8
    st.binary(min_size=1, max_size=200).map(lambda b: b'{"content": "' + b + b'"}'),  # broken text
    st.integers(1, 3).map(lambda n: b'"' + b"x" * (MAX_BYTES + n) + b'"'),  # just over the size limit
    st.integers(1_000, 100_000).map(lambda n: b'"' + b"[{" * n + b'"'),  # brackets inside a string
    st.integers(1, 5_000).map(lambda n: b"]" * n + b"[" * n),  # brackets that never balance
)


def _refusal(kind: type[BaseException], call: Any, *args: Any) -> BaseException | None:
    """The exception of ``kind`` ``call`` raised (None when it accepted); any other propagates."""
    try:
        call(*args)
    except kind as exc:
        return exc
    return None


HOSTILE = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@HOSTILE
@given(hostile)
def test_the_guarded_decode_refuses_hostile_bytes_with_its_own_error_only(data: bytes) -> None:
    for target in (Any, dict[str, Any], HeartbeatRecord):
        refused = _refusal(Undecodable, decode_json, data, target)
        if refused is not None:  # a few random bytes may be JSON
            assert str(refused)
            assert kind_of(refused) is Kind.INVALID  # every surface reports it as invalid input


@HOSTILE
@given(hostile)
def test_every_event_decoder_refuses_hostile_bytes_with_a_reason(data: bytes) -> None:
    for decoder in (
        decode_event,
        decode_recorded,
        lambda d: TOPOLOGY.recorded_on_subject(d, "noema.evt.acme.ops.observation_recorded_v1"),
    ):
        with pytest.raises(EventDecodeError) as refused:
            decoder(data)
        assert str(refused.value)


@HOSTILE
@given(hostile)
def test_every_operation_input_refuses_hostile_bytes_as_bad_input(data: bytes) -> None:
    # The MCP tools, the agent service's operations (observe among them) and their HTTP twins.
    inputs: list[tuple[str, type[Any]]] = [(n, t.input) for n, t in TOOLS.items()]
    for name, struct in [*inputs, ("observe", ObserveInput)]:
        refused = _refusal(NoemaError, decode, name, struct, data)  # some accept "{}"
        assert refused is None or kind_of(refused) is Kind.INVALID, name


@pytest.mark.parametrize("shape", ["array", "object", "mixed"])
def test_decoded_arguments_nested_too_deep_are_refused_before_they_are_walked(shape: str) -> None:
    # An MCP SDK hands over arguments it decoded itself (its parser stops at 200 levels).
    value: Any = 1
    for _ in range(5_000):
        value = [value] if shape == "array" else {"a": value} if shape == "object" else [{"a": value}]
    with pytest.raises(NoemaError, match="more than 32 levels deep"):
        decode("search_memory", TOOLS["search_memory"].input, {"query": "x", "filters": value})
    with pytest.raises(OutOfBounds):
        check_value_depth(value)


@dataclass
class _Seq:
    stream: int


@dataclass
class _Meta:
    sequence: _Seq


@dataclass
class _Msg:
    data: bytes
    subject: str
    metadata: _Meta


@HOSTILE
@given(st.lists(hostile, min_size=1, max_size=3))
def test_scans_skip_hostile_messages_and_never_stop(bodies: list[bytes]) -> None:
    # Erasure's scan: a message that does not decode is matched by its bytes, never fatal.
    for data in bodies:
        about, observation_id = _about(data, "person:1", {"0196f1e2-0000-7000-8000-000000000009"})
        assert about is (b"person:1" in data)
        assert observation_id == ""
    # Replay's (and the projector's) decode of a batch: skipped as the live projector skips them.
    msgs = [
        _Msg(d, "noema.evt.acme.ops.observation_recorded_v1", _Meta(_Seq(i))) for i, d in enumerate(bodies)
    ]
    assert replay_decode(TOPOLOGY, msgs) == []  # type: ignore[arg-type]


def test_a_poison_message_that_names_the_subject_is_still_found_by_erasure() -> None:
    poison = _EVENT % (b'{"subjects":["person:1"],"x":' + _nested(5_000, "array") + b"}")
    assert _about(poison, "person:1", ()) == (True, "")
    assert _about(poison, "person:2", ()) == (False, "")


def test_dead_letter_retry_refuses_a_hostile_original_as_a_conflict() -> None:
    from noema.adapters.deadletters import _still_refused

    with pytest.raises(Conflict, match="levels deep"):
        _still_refused(7, _nested(5_000, "array"))


def _request(body: bytes) -> Any:
    from starlette.requests import Request

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    return Request({"type": "http", "method": "POST", "headers": [], "query_string": b""}, receive)


class _Body(msgspec.Struct):
    content: str


@HOSTILE
@given(hostile)
def test_an_http_body_that_is_hostile_is_a_4xx_problem(data: bytes) -> None:
    refused = _refusal(ApiError, lambda: asyncio.run(parse_body(_request(data), _Body)))
    if refused is not None:  # a few random bytes may be a valid body
        assert isinstance(refused, ApiError)
        assert refused.kind in (Kind.MALFORMED, Kind.INVALID)


def test_an_http_body_nested_too_deep_is_refused_by_the_servers_before_any_route() -> None:
    sent: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("the body reached the application")

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": _nested(5_000, "object"), "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(BodyLimit(app)({"type": "http", "headers": []}, receive, send))  # type: ignore[arg-type]
    assert sent[0]["status"] == 422
    assert b"more than 32 levels deep" in sent[1]["body"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='ab"\\[]{}\n'),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=80,
)


def _depth_of(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth_of, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth_of, value.values()), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(json_values, st.integers(0, 8))
def test_the_depth_pre_scan_is_exact_for_json(value: Any, limit: int) -> None:
    data = json.dumps(value).encode()
    depth = _depth_of(value)
    assert json_depth(data) == depth
    try:
        check_bounds(data, max_depth=limit)
    except OutOfBounds:
        assert depth > limit
    else:
        assert depth <= limit
        assert decode_json(data, max_depth=limit) == value


def test_a_bracket_in_a_string_cannot_hide_a_level_from_the_pre_scan() -> None:
    """Found by hypothesis: the strings' "]" and "[[[" paired with real brackets in the pre-scan,
    which then found the five levels within four passes and let the document through."""
    data = b'{"0": ["]"], "": [[[[]]], "[[[]]"]}'
    assert json_depth(data) == 5
    with pytest.raises(OutOfBounds, match="more than 4 levels deep"):
        check_bounds(data, max_depth=4)
    check_bounds(data, max_depth=5)


def test_real_documents_within_the_limits_decode_as_before() -> None:
    doc = {"a": [[[[{"b": "[[[[{{{{"}]]]], "c": "x" * 1000}
    data = json.dumps(doc).encode()
    assert decode_json(data) == doc == msgspec.json.decode(data)
    with pytest.raises(OutOfBounds, match="the limit is 1,048,576 bytes"):
        decode_json(b'"' + b"x" * MAX_BYTES + b'"')
    assert decode_json(b'"' + b"x" * MAX_BYTES + b'"', max_bytes=None) == "x" * MAX_BYTES


# Where JSON is decoded without the guard, and why that is safe: bytes Noema wrote itself, into its
# own database or state directory, or decoded by the guard just before.
_UNGUARDED = {
    "schemas/noema_events/bounded.py": "the guard itself",
    "schemas/noema_events/codec.py": "after check_bounds (decode_recorded)",
    "schemas/noema_events/datetimes.py": "a deep copy of a value it encoded itself",
    "libs/noema/application/curation.py": "events it built and encoded itself, validated by decoding",
    "libs/noema/runtime/locate.py": "the state files `noemactl up` writes in its own directory",
    "libs/noema/runtime/credentials.py": "the credentials file `noemactl up` writes",
    "libs/noema/runtime/embedded.py": "the pid file it writes itself",
    "libs/noema/adapters/postgres/digests.py": "jsonb rows the projector wrote (from guarded events)",
    "libs/noema/adapters/postgres/textsearch.py": "jsonb rows the projector wrote",
    "libs/noema/adapters/postgres/knowledge.py": "jsonb rows the projector wrote",
    "libs/noema/adapters/postgres/voices.py": "pgvector's text form of a vector",
    "services/noema_cli/replay_cmd.py": "no decode: the text of a psql command it prints for the operator",
}
_DECODE = re.compile(
    r"\bjson\.loads\(|msgspec\.json\.decode\(|json\.Decoder\(|orjson\.loads\(|\bjson\.load\("
)


def test_no_module_decodes_json_outside_the_guard() -> None:
    found = set()
    for folder in ("libs", "services", "schemas"):
        for path in (ROOT / folder).rglob("*.py"):
            if _DECODE.search(path.read_text()):
                found.add(str(path.relative_to(ROOT)))
    assert found - set(_UNGUARDED) == set(), "decode through noema_events.bounded.decode_json"
    assert set(_UNGUARDED) - found == set(), "an entry of _UNGUARDED no longer decodes: remove it"
