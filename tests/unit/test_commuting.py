"""How the projection cuts a batch into runs: as few as possible, and always with the effect of
applying the events one by one in stream order (noema.adapters.postgres.commuting)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from noema.adapters.postgres.commuting import ANYTHING, Footprint, segments
from noema.adapters.postgres.projection import ReadModelProjection
from noema.adapters.postgres.registry import Handlers, Projected, Run
from noema_events import (
    ActivationDecayed,
    AttentionDecided,
    Event,
    MemoryCreated,
    MemoryEmbedded,
    MemoryRetrieved,
    WorkingMemoryUpdated,
)
from noema_events.catalog import (
    ActivationDecayedPayload,
    AttentionDecidedPayload,
    MemoryCreatedPayload,
    MemoryEmbeddedPayload,
    MemoryRetrievedPayload,
    WorkingMemoryUpdatedPayload,
)

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _envelope(seq: int, mind: str = "ops") -> dict[str, Any]:
    return {"id": f"ev-{seq}", "workspace": "acme", "mind": mind, "occurred_at": T0, "correlation_id": "c"}


def created(seq: int, memory: str) -> Projected:
    payload = MemoryCreatedPayload(
        memory_id=memory, kind="episodic", epistemic_kind="observation", content="x"
    )
    return Projected(seq, "s", MemoryCreated(**_envelope(seq), actor="attend", payload=payload))


def embedded(seq: int, memory: str) -> Projected:
    payload = MemoryEmbeddedPayload(memory_id=memory, model="m", dimensions=1, vector=[0.5])
    return Projected(seq, "s", MemoryEmbedded(**_envelope(seq), actor="embed", payload=payload))


def retrieved(seq: int, memory: str) -> Projected:
    payload = MemoryRetrievedPayload(memory_id=memory, boost=0.3, half_life_days=14.0, activation_floor=1e-6)
    return Projected(seq, "s", MemoryRetrieved(**_envelope(seq), actor="retrieve", payload=payload))


def working(seq: int, mind: str) -> Projected:
    payload = WorkingMemoryUpdatedPayload(items=[])
    return Projected(seq, "s", WorkingMemoryUpdated(**_envelope(seq, mind), actor="attend", payload=payload))


def tick(seq: int) -> Projected:
    payload = ActivationDecayedPayload(tick_at=T0, rewrite=True)  # an earlier release's tick
    return Projected(seq, "s", ActivationDecayed(**_envelope(seq, ""), actor="decay", payload=payload))


def decided(seq: int) -> Projected:
    payload = AttentionDecidedPayload(decisions=[], threshold=0.5, capacity=7)
    return Projected(seq, "s", AttentionDecided(**_envelope(seq), actor="attend", payload=payload))


TOUCHES = ReadModelProjection()._footprint  # what the projection itself uses


def shape(batch: list[Projected]) -> list[list[list[int]]]:
    """The seqs of each run of each segment."""
    return [[[p.seq for p in run] for run in segment] for segment in segments(batch, TOUCHES)]


def test_a_systems_interleaved_traffic_is_one_run_per_type() -> None:
    batch = []
    for i in range(50):  # what attend, embed and retrieve record, memory after memory
        base = i * 5
        batch += [
            created(base + 1, f"m{i}"),
            embedded(base + 2, f"m{i}"),
            retrieved(base + 3, f"m{i // 2}"),
            decided(base + 4),
            working(base + 5, "ops"),
        ]
    found = segments(batch, TOUCHES)
    assert len(found) == 1
    assert [type(run[0].event) for run in found[0]] == [
        MemoryCreated,
        MemoryEmbedded,
        MemoryRetrieved,
        WorkingMemoryUpdated,
        AttentionDecided,
    ]
    assert [len(run) for run in found[0]] == [50] * 5


def test_a_batch_that_starts_mid_cycle_still_needs_one_segment() -> None:
    batch = [embedded(1, "m0"), retrieved(2, "m0"), created(3, "m1"), embedded(4, "m1")]
    assert shape(batch) == [[[3], [1, 4], [2]]]


def test_an_event_never_moves_ahead_of_an_earlier_one_on_the_same_memory() -> None:
    # the recall of m1 comes before m1 exists (so it changes nothing): creating m1 first would let it count
    batch = [created(1, "m0"), retrieved(2, "m1"), created(3, "m1")]
    assert shape(batch) == [[[1], [2]], [[3]]]


def test_events_after_a_workspace_tick_wait_for_it_but_audit_only_events_do_not() -> None:
    batch = [created(1, "m0"), tick(2), decided(3), created(4, "m1")]
    assert shape(batch) == [[[1], [2], [3]], [[4]]]


def test_a_tick_that_rewrites_nothing_holds_up_nothing() -> None:
    listing = Projected(
        2,
        "s",
        ActivationDecayed(**_envelope(2, ""), actor="decay", payload=ActivationDecayedPayload(tick_at=T0)),
    )
    assert TOUCHES(listing.event) == frozenset()
    assert shape([created(1, "m0"), listing, created(3, "m1")]) == [[[1, 3], [2]]]


def test_consecutive_events_of_one_type_are_one_run_even_when_they_touch_the_same_row() -> None:
    assert shape([retrieved(1, "m0"), retrieved(2, "m0"), retrieved(3, "m0")]) == [[[1, 2, 3]]]


def test_an_event_type_without_a_declared_footprint_may_touch_anything() -> None:
    assert TOUCHES(tick(1).event) is ANYTHING  # an earlier release's tick: declared so
    assert TOUCHES(created(1, "m0").event) == frozenset({("memory", "m0")})
    table = Handlers()
    table.register(MemoryCreated)(_creates)  # a handler registered without its footprint
    table.register(MemoryEmbedded, touches=lambda ev: frozenset({("memory", ev.payload.memory_id)}))(_embeds)
    assert table.touches(created(1, "m0").event) is ANYTHING
    assert table.touches(embedded(2, "m0").event) == frozenset({("memory", "m0")})
    assert table.touches(decided(3).event) == frozenset()  # no handler: only kept in ``events``
    assert Handlers.joined(table).touches(embedded(2, "m0").event) == frozenset({("memory", "m0")})


async def _creates(conn: object, run: Run[MemoryCreated]) -> None:
    """A handler that only needs to exist."""


async def _embeds(conn: object, run: Run[MemoryEmbedded]) -> None:
    """A handler that only needs to exist."""


def _touched_keys(event: Event) -> Footprint:
    return TOUCHES(event)


KINDS = ("created", "embedded", "retrieved", "working", "tick", "decided")
EVENT = st.tuples(st.sampled_from(KINDS), st.integers(0, 3))


@given(st.lists(EVENT, max_size=40))
def test_every_two_events_that_share_a_row_keep_their_stream_order(spec: list[tuple[str, int]]) -> None:
    make = {
        "created": lambda seq, k: created(seq, f"m{k}"),
        "embedded": lambda seq, k: embedded(seq, f"m{k}"),
        "retrieved": lambda seq, k: retrieved(seq, f"m{k}"),
        "working": lambda seq, k: working(seq, f"mind{k}"),
        "tick": lambda seq, k: tick(seq),
        "decided": lambda seq, k: decided(seq),
    }
    batch = [make[kind](seq, k) for seq, (kind, k) in enumerate(spec, start=1)]
    applied = [p for segment in segments(batch, TOUCHES) for run in segment for p in run]
    assert sorted(p.seq for p in applied) == [p.seq for p in batch]  # each event once
    position = {p.seq: i for i, p in enumerate(applied)}
    for a in batch:
        for b in batch:
            if a.seq < b.seq and _shares_a_row(_touched_keys(a.event), _touched_keys(b.event)):
                assert position[a.seq] < position[b.seq], (a.seq, b.seq)


def _shares_a_row(a: Footprint, b: Footprint) -> bool:
    if a == frozenset() or b == frozenset():
        return False
    return a is None or b is None or bool(a & b)
