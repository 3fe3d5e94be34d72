"""Sealed content (noema.domain.sealing, noema.application.sealing): what a key opens, what an erased
key leaves, and which fields of which events are sealed under which item's key."""

from __future__ import annotations

from noema.application.sealing import is_sealed_event, key_requests, opened, sealed
from noema.domain.attention import memory_id_for
from noema.domain.sealing import ERASED, new_key, open_text, open_vector, seal_text, seal_vector
from noema_events import RecallProposed, RecallProposedPayload
from tests.support import envelope, memory_created


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
