"""Real upcasts: the v1 recalls, fact proposals and mentions every earlier release recorded are read
as v2 with the values the v1 projector applied to them — pinned in the upcasters, not taken from
today's constants — and are kept, for the audit copy, exactly as recorded."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from noema.application.reads import event_types
from noema.domain import dynamics
from noema_events import (
    FactMentioned,
    FactProposed,
    MemoryRetrieved,
    Recorded,
    decode_event,
    decode_recorded,
    encode_event,
)
from noema_events.golden import GOLDEN_DIR
from noema_events.vocabulary import VERACITY_WEIGHT
from tests.integration.recorded_stream import V1_STREAM


def v1(tag: str, **payload: Any) -> bytes:
    """The golden v1 sample of ``tag`` with ``payload`` fields set (None: removed)."""
    raw = msgspec.json.decode((GOLDEN_DIR / f"{tag}.v1.json").read_bytes())
    for field, value in payload.items():
        if value is None:
            raw["payload"].pop(field, None)
        else:
            raw["payload"][field] = value
    return msgspec.json.encode(raw)


@pytest.mark.parametrize(("given", "boost"), [(None, 0.3), (0.0, 0.3), (-1.0, 0.3), (0.5, 0.5)])
def test_a_v1_recall_reads_as_v2_with_the_reinforcement_the_v1_projector_gave_it(
    given: float | None, boost: float
) -> None:
    event = decode_event(v1("memory.retrieved", boost=given))
    assert isinstance(event, MemoryRetrieved)
    p = event.payload
    assert (event.type, p.boost, p.half_life_days, p.activation_floor) == (
        "memory.retrieved.v2",
        boost,
        14.0,
        1e-6,
    )


@pytest.mark.parametrize(
    ("veracity", "credibility"),
    [("stated", 1.0), ("inferred", 0.7), ("tool", 0.5), ("imported", 0.6), (None, 1.0)],
)
def test_a_v1_fact_reads_as_v2_with_the_credibility_and_weight_the_v1_projector_gave_it(
    veracity: str | None, credibility: float
) -> None:
    event = decode_event(v1("fact.proposed", veracity=veracity))
    assert isinstance(event, FactProposed)
    p = event.payload
    assert (event.type, p.credibility, p.importance, p.salience) == (
        "fact.proposed.v2",
        credibility,
        0.5,
        0.5,
    )


@pytest.mark.parametrize(
    ("veracity", "mentions", "rate"),
    [
        ("stated", 1, 0.25),
        ("inferred", 1, 0.25 * 0.7),
        ("tool", 1, 0.25 * 0.5),
        (None, 1, 0.25),
        ("imported", 3, 1.0 - (1.0 - 0.25 * 0.6) ** 3),
    ],
)
def test_a_v1_mention_reads_as_v2_with_the_rate_and_cap_the_v1_projector_applied(
    veracity: str | None, mentions: int, rate: float
) -> None:
    event = decode_event(v1("fact.mentioned", veracity=veracity, mentions=mentions))
    assert isinstance(event, FactMentioned)
    assert (event.type, event.payload.rate, event.payload.confidence_cap) == ("fact.mentioned.v2", rate, 0.99)


def test_upcasting_fills_the_values_of_its_time_whatever_todays_constants(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = [decode_event(data) for data in V1_STREAM]
    for name, value in [("RECALL_BOOST", 0.9), ("HALF_LIFE_DAYS", 2.0), ("ACTIVATION_FLOOR", 0.1)]:
        monkeypatch.setattr(dynamics, name, value)
    monkeypatch.setattr(dynamics, "MENTION_RATE", 0.9)
    monkeypatch.setattr(dynamics, "CONFIDENCE_CAP", 0.5)
    for veracity in list(VERACITY_WEIGHT):
        monkeypatch.setitem(VERACITY_WEIGHT, veracity, 0.1)
    assert [decode_event(data) for data in V1_STREAM] == before


def test_an_upcast_event_is_kept_as_recorded_as_the_code_of_its_version_encoded_it() -> None:
    raw = msgspec.json.decode(v1("fact.mentioned"))
    raw["payload"]["from_a_later_release"] = 1  # v1 readers skipped it; so did the v1 audit copy
    event, recorded = decode_recorded(msgspec.json.encode(raw))
    assert event.type == "fact.mentioned.v2"
    assert recorded == Recorded("fact.mentioned.v1", msgspec.json.encode(_without(raw["payload"])).decode())


def test_an_event_of_the_current_version_is_recorded_as_it_is_read() -> None:
    event, recorded = decode_recorded((GOLDEN_DIR / "memory.retrieved.v2.json").read_bytes())
    assert recorded is None
    assert decode_recorded(encode_event(event)) == (event, None)


def test_an_earlier_version_is_refused_where_its_own_code_refused_it() -> None:
    with pytest.raises(Exception, match=r"payload\.mentions"):
        decode_event(v1("fact.mentioned", mentions=0))


def _without(payload: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if k != "from_a_later_release"}


def test_the_audit_log_filter_names_every_version_the_audit_copy_keeps() -> None:
    assert event_types("memory.retrieved") == ["memory.retrieved.v1", "memory.retrieved.v2"]
    assert event_types("fact.proposed.v1") == ["fact.proposed.v1"]
