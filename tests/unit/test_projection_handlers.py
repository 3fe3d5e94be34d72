"""How projection handlers are registered: one handler per event type, each handed only events of
its type, and every event the read model depends on handled."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from noema.adapters.postgres.erasure_handlers import ERASURE_HANDLERS
from noema.adapters.postgres.handlers import HANDLERS
from noema.adapters.postgres.knowledge_handlers import KNOWLEDGE_HANDLERS
from noema.adapters.postgres.projection import PROJECTION_HANDLERS, ReadModelProjection
from noema.adapters.postgres.registry import Handlers, Projected, Run
from noema_events import (
    EVENT_TYPES,
    AttentionDecided,
    DomainCreated,
    Event,
    NotesUpdated,
    ObservationRecorded,
    RecallProposed,
)
from noema_events.catalog import DomainCreatedPayload, NotesUpdatedPayload

AUDIT_ONLY: frozenset[type[Event]] = frozenset({ObservationRecorded, AttentionDecided, RecallProposed})
"""Events that change no table of the read model: the projection only keeps their copy in ``events``."""

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def envelope(seq: int) -> dict[str, Any]:
    return {"id": f"ev-{seq}", "workspace": "acme", "occurred_at": T0, "correlation_id": "c", "actor": "ann"}


def notes(seq: int) -> Projected:
    payload = NotesUpdatedPayload(agent="alice", notes=f"note {seq}")
    return Projected(seq, "noema.acme.notes", NotesUpdated(**envelope(seq), payload=payload))


def domain(seq: int) -> Projected:
    payload = DomainCreatedPayload(domain="billing")
    return Projected(seq, "noema.acme.domain", DomainCreated(**envelope(seq), payload=payload))


async def first_notes(conn: object, run: Run[NotesUpdated]) -> None:
    """A handler that only needs to exist."""


async def second_notes(conn: object, run: Run[NotesUpdated]) -> None:
    """A handler that only needs to exist."""


def test_a_second_handler_of_one_event_type_is_refused_naming_both() -> None:
    table = Handlers()
    table.register(NotesUpdated)(first_notes)

    with pytest.raises(ValueError) as refused:
        table.register(NotesUpdated)(second_notes)

    message = str(refused.value)
    assert "NotesUpdated" in message
    assert "first_notes" in message
    assert "second_notes" in message
    assert table[NotesUpdated].__wrapped__ is first_notes  # type: ignore[attr-defined]


def test_joining_two_tables_that_handle_one_type_is_refused() -> None:
    one, other = Handlers(), Handlers()
    one.register(NotesUpdated)(first_notes)
    other.register(NotesUpdated)(second_notes)

    with pytest.raises(ValueError, match="NotesUpdated"):
        Handlers.joined(one, other)


def test_a_projection_refuses_a_handler_for_a_type_it_already_handles() -> None:
    projection = ReadModelProjection()

    with pytest.raises(ValueError, match="NotesUpdated"):
        projection.register(NotesUpdated, PROJECTION_HANDLERS[DomainCreated])


async def test_a_handler_gets_its_run_as_items_beside_events_of_its_type() -> None:
    table = Handlers()
    seen: list[tuple[int, str]] = []

    @table.register(NotesUpdated)
    async def record(conn: object, run: Run[NotesUpdated]) -> None:
        seen.extend((item.seq, ev.payload.notes) for item, ev in run)

    await table[NotesUpdated](None, [notes(3), notes(4)])

    assert seen == [(3, "note 3"), (4, "note 4")]


async def test_a_handler_handed_an_event_of_another_type_fails_before_it_runs() -> None:
    table = Handlers()
    called = False

    @table.register(NotesUpdated)
    async def record(conn: object, run: Run[NotesUpdated]) -> None:
        nonlocal called
        called = True

    with pytest.raises(TypeError) as wrong:
        await table[NotesUpdated](None, [notes(3), domain(4)])

    assert not called
    assert "NotesUpdated" in str(wrong.value)
    assert "DomainCreated at stream seq 4" in str(wrong.value)


async def test_the_projections_handlers_check_the_type_before_touching_the_database() -> None:
    # conn=None: a handler that got as far as a statement would fail with AttributeError instead.
    with pytest.raises(TypeError, match="notes_updated handles NotesUpdated"):
        await PROJECTION_HANDLERS[NotesUpdated](None, [domain(1)])


def test_every_event_but_the_audit_only_ones_has_exactly_one_projection_handler() -> None:
    assert set(PROJECTION_HANDLERS) == set(EVENT_TYPES.values()) - AUDIT_ONLY
    assert not set(HANDLERS) & set(KNOWLEDGE_HANDLERS)
    assert len(PROJECTION_HANDLERS) == len(HANDLERS) + len(KNOWLEDGE_HANDLERS) + len(ERASURE_HANDLERS)
