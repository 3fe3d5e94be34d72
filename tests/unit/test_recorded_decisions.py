"""Decisions are recorded where they are made: each producer writes into its event the values it
decided with (today's constants), and the in-memory read model, like the projector's, applies only
the recorded values, so a changed constant changes no state built from events already stored."""

from __future__ import annotations

import pytest

from noema.adapters.memory import Tables
from noema.adapters.postgres.registry import Projected
from noema.domain.dynamics import (
    ACTIVATION_FLOOR,
    CONFIDENCE_CAP,
    FACT_IMPORTANCE,
    FACT_SALIENCE,
    FADE_THRESHOLD,
    HALF_LIFE_DAYS,
    RECALL_BOOST,
    mention_rate,
)
from noema.topology import Topology
from noema_events import (
    ActivationDecayed,
    FactMentioned,
    FactProposed,
    MemoryCreated,
    MemoryRetrieved,
    decode_event,
    decode_recorded,
)
from noema_events.vocabulary import VERACITY_WEIGHT
from tests.integration.recorded_stream import CONSTANT_CHANGES, V1_STREAM, fresh_events


def projected(data: list[bytes]) -> Tables:
    """The in-memory read model of a stream holding ``data`` (sequence = index + 1)."""
    tables, topology = Tables(), Topology()
    for seq, raw in enumerate(data, 1):
        event, recorded = decode_recorded(raw)
        tables.apply(Projected(seq, topology.event_subject(event), event, recorded))
    return tables


async def test_every_producer_records_the_values_it_decided_with() -> None:
    events = [decode_event(data) for data in await fresh_events()]
    seen = set()
    for ev in events:
        seen.add(type(ev))
        match ev:
            case MemoryRetrieved(payload=p):
                assert (p.boost, p.half_life_days, p.activation_floor) == (
                    RECALL_BOOST,
                    HALF_LIFE_DAYS,
                    ACTIVATION_FLOOR,
                )
            case ActivationDecayed(payload=p):
                assert (p.half_life_days, p.activation_floor) == (HALF_LIFE_DAYS, ACTIVATION_FLOOR)
                assert (p.fade_threshold, p.rewrite) == (FADE_THRESHOLD, False)
            case FactProposed(payload=p):
                assert (p.credibility, p.importance, p.salience) == (
                    VERACITY_WEIGHT[p.veracity],
                    FACT_IMPORTANCE,
                    FACT_SALIENCE,
                )
                assert (p.half_life_days, p.activation_floor) == (HALF_LIFE_DAYS, ACTIVATION_FLOOR)
            case MemoryCreated(payload=p):
                assert (p.half_life_days, p.activation_floor) == (HALF_LIFE_DAYS, ACTIVATION_FLOOR)
            case FactMentioned(payload=p):
                assert (p.rate, p.confidence_cap) == (mention_rate(p.veracity, p.mentions), CONFIDENCE_CAP)
    assert {MemoryRetrieved, ActivationDecayed, FactProposed, FactMentioned, MemoryCreated} <= seen


@pytest.mark.parametrize("change", sorted(CONSTANT_CHANGES))
async def test_the_in_memory_read_model_of_stored_events_does_not_depend_on_todays_constants(
    change: str,
) -> None:
    data = [*V1_STREAM, *await fresh_events()]
    held = projected(data)
    assert len(held.memories) > 10
    with pytest.MonkeyPatch.context() as mp:
        CONSTANT_CHANGES[change](mp)
        assert projected(data) == held, f"changing the {change} changed history"
