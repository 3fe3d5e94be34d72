"""The event catalog: tags, golden samples, generated schemas, upcasting."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

from noema_events import EVENT_TYPES, Event, EventDecodeError, ObservationRecorded, decode_event, encode_event
from noema_events.codec import UPCASTERS
from noema_events.golden import GOLDEN_DIR
from noema_service.documents import generate

SPEC_EVENTS = {
    "observation.recorded",
    "attention.decided",
    "memory.created",
    "memory.embedded",
    "memory.retrieved",
    "memory.reinforced",
    "activation.decayed",
    "memory.superseded",
    "conflict.recorded",
    "fact.proposed",
    "fact.mentioned",
    "policy.proposed",
    "policy.superseded",
    "domain.created",
    "grant.changed",
    "working_memory.updated",
    "notes.updated",
    "relationship.added",
    "operator.action",
}


def test_the_catalog_holds_every_event_of_the_spec() -> None:
    assert {tag.rsplit(".", 1)[0] for tag in EVENT_TYPES} >= SPEC_EVENTS


@pytest.mark.parametrize("tag", sorted(EVENT_TYPES))
def test_every_event_has_an_explicit_versioned_past_tense_tag(tag: str) -> None:
    assert re.fullmatch(r"[a-z_]+\.[a-z_]+\.v\d+", tag)
    cls = EVENT_TYPES[tag]
    assert cls.__struct_config__.frozen
    assert "payload" in cls.__struct_fields__


@pytest.mark.parametrize("tag", sorted(EVENT_TYPES))
def test_every_event_version_has_a_golden_sample_that_the_current_code_decodes(tag: str) -> None:
    path = GOLDEN_DIR / f"{tag}.json"
    assert path.exists(), f"missing golden sample {path}; run `make golden`"
    event = decode_event(path.read_bytes())
    assert event.type == tag
    assert decode_event(encode_event(event)) == event


def test_every_golden_sample_belongs_to_a_known_or_upcastable_version() -> None:
    samples = sorted(GOLDEN_DIR.glob("*.json"))
    assert samples, f"no golden samples in {GOLDEN_DIR}"
    for path in samples:
        tag = path.stem
        assert msgspec.json.decode(path.read_bytes())["type"] == tag, f"{path.name} holds another type"
        assert tag in EVENT_TYPES or tag in UPCASTERS, (
            f"{path.name}: neither a known nor an upcastable version"
        )
        event = decode_event(path.read_bytes())
        # A current version decodes as itself; an old one as the current version it upcasts to.
        assert event.type == tag if tag in EVENT_TYPES else event.type in EVENT_TYPES, path.name


def test_the_committed_json_schemas_are_what_the_code_generates() -> None:
    stale = [str(p) for p, text in generate().items() if not p.exists() or p.read_text() != text]
    assert not stale, f"stale generated schemas (run `make schemas`): {stale}"
    generated = {p.name for p in generate() if p.parent.name == "json"}
    committed = {p.name for p in (Path(GOLDEN_DIR).parent / "json").glob("*.json")}
    assert committed == generated


def test_old_readers_skip_fields_added_later() -> None:
    raw = msgspec.json.decode((GOLDEN_DIR / "memory.created.v1.json").read_bytes())
    raw["a_field_from_the_future"] = 1
    raw["payload"]["another_one"] = {"x": 1}
    assert decode_event(msgspec.json.encode(raw)).type == "memory.created.v1"


def test_an_old_version_is_upcast_on_read_never_rewritten() -> None:
    def v0_to_v1(raw: dict[str, Any]) -> dict[str, Any]:
        payload = dict(raw["payload"])
        payload["content"] = payload.pop("text")
        return {**raw, "type": "observation.recorded.v1", "payload": payload}

    old = msgspec.json.decode((GOLDEN_DIR / "observation.recorded.v1.json").read_bytes())
    old["type"] = "observation.recorded.v0"
    old["payload"]["text"] = old["payload"].pop("content")
    data = msgspec.json.encode(old)
    UPCASTERS["observation.recorded.v0"] = v0_to_v1
    try:
        event = decode_event(data)
    finally:
        del UPCASTERS["observation.recorded.v0"]
    assert isinstance(event, ObservationRecorded)
    assert event.payload.content == old["payload"]["text"]
    assert msgspec.json.decode(data)["type"] == "observation.recorded.v0"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"{not json", "not valid JSON"),
        (b"[]", "JSON object"),
        (b'{"type": "no.such.v1"}', "unknown event type"),
        (b'{"content": 5}', r"not an event: no `type` field .*its fields: content$"),
        (b'{"type": 5}', r"`type` must be an event type \(text\), not int"),
        (b'{"type": "memory.created.v1", "id": "x"}', "missing required field"),
    ],
)
def test_undecodable_input_raises_a_readable_reason(data: bytes, reason: str) -> None:
    with pytest.raises(EventDecodeError, match=reason):
        decode_event(data)


def test_the_envelope_reports_name_and_version() -> None:
    event = decode_event((GOLDEN_DIR / "fact.proposed.v2.json").read_bytes())
    assert isinstance(event, Event)
    assert (event.name, event.version) == ("fact.proposed", 2)


@pytest.mark.parametrize("tag", ["observation.recorded.v1", "fact.proposed.v1"])
def test_whitespace_only_content_is_refused_with_the_field_named(tag: str) -> None:
    raw = msgspec.json.decode((GOLDEN_DIR / f"{tag}.json").read_bytes())
    raw["payload"]["content"] = " \n\t "
    with pytest.raises(EventDecodeError, match=r"payload\.content"):
        decode_event(msgspec.json.encode(raw))


def test_a_blank_memory_recorded_before_blank_content_was_refused_still_replays() -> None:
    raw = msgspec.json.decode((GOLDEN_DIR / "memory.created.v1.json").read_bytes())
    raw["payload"]["content"] = "   "
    assert decode_event(msgspec.json.encode(raw)).payload.content == "   "  # type: ignore[attr-defined]
