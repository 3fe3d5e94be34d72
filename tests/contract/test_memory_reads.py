"""Contract of :class:`noema.ports.MemoryReads` and the operators' reads built on it
(:mod:`noema.application.reads`): listings, the timeline, one memory's detail with its provenance and
the audit log read alike from both adapters.

Memories are published as the attend worker publishes them (``memory.created`` with the times and
sources an observation gives), operators' changes through the application's own operations.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from noema.adapters.memory.reads import MEMORY_KEYS
from noema.application import curation, reads, upkeep
from noema.application.views import AuditQuery, ListQuery, TimelineQuery
from noema.domain.dynamics import (
    ACTIVATION_FLOOR,
    HALF_LIFE_DAYS,
    RECALL_BOOST,
    decay_activation,
    reinforce_activation,
)
from noema.errors import InvalidQuery, NotFound
from noema.ids import new_id
from noema.ports import Fading, RecallFilters
from noema_events import (
    ActivationDecayed,
    ActivationDecayedPayload,
    AttentionDecision,
    MemoryCreated,
    MemoryEmbedded,
    MemoryEmbeddedPayload,
    MemoryReinforced,
    MemoryReinforcedPayload,
    MemoryRetrieved,
    MemoryRetrievedPayload,
    RelationshipAdded,
    RelationshipAddedPayload,
)
from tests.contract.conftest import T0, Backend
from tests.support import attention_decided, envelope, memory_created

ACTOR = "operator:root"
MINUTE = timedelta(minutes=1)


def _id(ev: MemoryCreated) -> str:
    return ev.payload.memory_id


async def _listed(backend: Backend, **query: Any) -> list[str]:
    page = await reads.list_memories(backend.records, ListQuery(**{"workspace": "acme", **query}))
    return [m.id for m in page.items]


async def test_a_listing_filters_by_each_field_newest_first_and_pages(backend: Backend) -> None:
    billing = memory_created("A billing fact", kind="semantic", epistemic_kind="fact", domain="billing")
    episode = memory_created("An episode seen by qa", mind="qa", at=T0 + MINUTE)
    hr = memory_created("An hr fact", kind="semantic", epistemic_kind="fact", domain="hr", at=T0 + MINUTE)
    elsewhere = memory_created("Another workspace's memory", workspace="globex", at=T0 + 2 * MINUTE)
    await backend.sink.publish([billing, episode, hr, elsewhere])
    await curation.retract(backend.records, backend.sink, _id(hr), actor=ACTOR, reason="wrong", now=T0)
    b, e, h = _id(billing), _id(episode), _id(hr)

    assert await _listed(backend) == [h, e, b], "newest first; recorded at once: later in the stream first"
    assert await _listed(backend, workspace=None) == [_id(elsewhere), h, e, b]
    assert await _listed(backend, kind="episodic") == [e]
    assert await _listed(backend, epistemic_kind="fact") == [h, b]
    assert await _listed(backend, domain="billing") == [b]
    assert await _listed(backend, mind="qa") == [e]
    assert await _listed(backend, status="retracted") == [h]
    assert await _listed(backend, status="active") == [e, b]
    assert await _listed(backend, since=T0 + MINUTE) == [h, e]
    assert await _listed(backend, until=T0 + MINUTE) == [b]
    assert await _listed(backend, limit=2) == [h, e]
    assert await _listed(backend, limit=2, offset=2) == [b]
    assert await _listed(backend, offset=3) == []
    page = await reads.list_memories(backend.records, ListQuery(workspace="acme", status="retracted"))
    (retracted,) = page.items
    assert (retracted.content, retracted.status, retracted.domain, retracted.mind) == (
        "An hr fact",
        "retracted",
        "hr",
        "ops",
    )
    assert (page.limit, page.offset) == (50, 0)


async def test_a_page_honours_every_recall_filter(backend: Backend) -> None:
    hidden = memory_created("In a hidden domain", domain="secret")
    shared = memory_created("In a readable domain", domain="open", at=T0 + MINUTE)
    plain = memory_created("In no domain", at=T0 + 2 * MINUTE)
    expired = memory_created(
        "No longer valid", valid_until=datetime(2020, 1, 1, tzinfo=UTC), at=T0 + 3 * MINUTE
    )
    await backend.sink.publish([hidden, shared, plain, expired])
    h, s, p, x = (_id(ev) for ev in (hidden, shared, plain, expired))

    async def page(**filters: Any) -> list[str]:
        rows = await backend.records.page(RecallFilters(workspace="acme", **filters), "newest", 10, 0)
        assert all(set(r) == set(MEMORY_KEYS) for r in rows)
        return [r["id"] for r in rows]

    assert await page() == [p, s, h], "active and unexpired by default"
    assert await page(include_expired=True) == [x, p, s, h]
    assert await page(hidden_domains=["secret"]) == [p, s]
    assert await page(readable_domains=["open"]) == [p, s], "memories without a domain stay readable"
    assert await page(exclude_ids=[p, s]) == [h]
    assert await page(statuses=["retracted"]) == []


async def test_the_timeline_orders_by_when_things_happened_in_either_direction(backend: Backend) -> None:
    late = memory_created("Second", happened_at=datetime(2024, 6, 1, tzinfo=UTC))
    early = memory_created("First", happened_at=datetime(2024, 1, 1, tzinfo=UTC))
    also_early = memory_created("Also first", mind="qa", happened_at=datetime(2024, 1, 1, tzinfo=UTC))
    undated = memory_created("Happened when recorded")  # T0, in 2026
    await backend.sink.publish([late, early, also_early, undated])
    await curation.retract(backend.records, backend.sink, _id(undated), actor=ACTOR, reason="x", now=T0)
    ordered = [_id(ev) for ev in (early, also_early, late, undated)]

    async def timeline(**query: Any) -> list[str]:
        page = await reads.timeline(backend.records, TimelineQuery(**{"workspace": "acme", **query}))
        return [m.id for m in page.items]

    assert await timeline(order="asc") == ordered, "ties in stream order; every status"
    assert await timeline() == ordered[::-1]
    assert await timeline(mind="qa") == [_id(also_early)]
    assert await timeline(order="asc", since=datetime(2024, 3, 1, tzinfo=UTC)) == ordered[2:]
    assert await timeline(order="asc", until=datetime(2024, 3, 1, tzinfo=UTC)) == ordered[:2]
    assert await timeline(order="asc", limit=2, offset=1) == ordered[1:3]


async def test_a_memory_s_detail_gives_its_provenance_edges_vectors_and_citing_events(
    backend: Backend,
) -> None:
    made = memory_created("Bob keeps the vault credentials", source_observation_ids=["obs-1", "obs-2"])
    other = memory_created("The vault is in room 4")
    third = memory_created("Room 4 is locked at night")
    await backend.sink.publish([made, other, third])
    m, o, t = _id(made), _id(other), _id(third)
    decided = attention_decided(
        [
            AttentionDecision(candidate_id="obs-1", memory_id=m, admitted=True, score=0.9),
            AttentionDecision(candidate_id="obs-9", admitted=False, score=0.1),
        ]
    )
    decided_seq = await backend.sink.publish([decided])
    await upkeep.relate(backend.records, backend.sink, m, o, "supports", now=T0)
    await upkeep.relate(backend.records, backend.sink, t, m, "related_to", now=T0 + MINUTE)
    embedded = upkeep.embedded_event(m, "acme", "ops", [0.1, 0.2, 0.3], "tiny", T0, made.id)
    wrong_size = MemoryEmbedded(
        **envelope(actor="embed"),
        payload=MemoryEmbeddedPayload(memory_id=m, model="broken", dimensions=4, vector=[0.1, 0.2, 0.3]),
    )
    recalled_at = T0 + timedelta(days=1)
    recall = MemoryRetrievedPayload(
        memory_id=m, boost=RECALL_BOOST, half_life_days=HALF_LIFE_DAYS, activation_floor=ACTIVATION_FLOOR
    )
    recalled = MemoryRetrieved(**envelope(at=recalled_at, actor="retrieve"), payload=recall)
    # Another workspace's event naming the memory is not among its citing events.
    foreign = attention_decided(
        [AttentionDecision(candidate_id="obs-1", memory_id=m, admitted=True, score=1.0)], "globex"
    )
    await backend.sink.publish([embedded, wrong_size, recalled, foreign])

    detail = await reads.memory_detail(backend.records, m[:8])
    assert (detail.memory.id, detail.memory.content, detail.memory.recall_count) == (
        m,
        "Bob keeps the vault credentials",
        1,
    )
    assert detail.memory.activation == pytest.approx(reinforce_activation(decay_activation(1.0, 1.0, 0.5)))
    assert detail.origin is not None
    assert (detail.origin.id, detail.origin.type, detail.origin.subject) == (
        made.id,
        "memory.created.v1",
        backend.topology.event_subject(made),
    )
    assert detail.origin.payload["content"] == "Bob keeps the vault credentials"
    sources = [(s.id, s.decision["event_id"] if s.decision else None) for s in detail.source_observations]
    assert sources == [("obs-1", decided.id), ("obs-2", None)], "with the decision that admitted it"
    assert detail.source_observations[0].decision == {
        "candidate_id": "obs-1",
        "memory_id": m,
        "admitted": True,
        "score": 0.9,
        "event_id": decided.id,
        "seq": decided_seq,
    }
    assert [(r.direction, r.relation, r.other_content) for r in detail.relationships] == [
        ("out", "supports", "The vault is in room 4"),
        ("in", "related_to", "Room 4 is locked at night"),
    ]
    assert [(r.from_id, r.to_id) for r in detail.relationships] == [(m, o), (t, m)]
    assert [(e.model, e.dimensions) for e in detail.embeddings] == [("tiny", 3)], "wrong size skipped"
    cited = detail.citing_events
    assert [e.type for e in cited] == [
        "memory.retrieved.v2",
        "memory.embedded.v1",
        "memory.embedded.v1",
        "relationship.added.v1",
        "relationship.added.v1",
        "attention.decided.v1",
        "memory.created.v1",
    ]
    assert [e.seq for e in cited] == sorted((e.seq for e in cited), reverse=True)
    assert (cited[0].id, cited[-1].id) == (recalled.id, made.id)
    assert cited[0].payload == msgspec.to_builtins(recall), "the reinforcement recorded with it"

    row = await backend.records.get(m)
    assert row is not None
    assert set(row) == {*MEMORY_KEYS, "origin", "relationships", "embeddings"}


async def test_recall_reinforcement_and_an_earlier_release_s_tick_move_activation_as_the_projector_does(
    backend: Backend,
) -> None:
    kept, elsewhere = (
        memory_created("Kept in mind", importance=0.9),
        memory_created("Elsewhere", workspace="globex"),
    )
    await backend.sink.publish([kept, elsewhere])
    day = timedelta(days=1)
    await backend.sink.publish(
        [
            MemoryRetrieved(
                **envelope(at=T0 + day, actor="retrieve"),
                payload=MemoryRetrievedPayload(
                    memory_id=_id(kept), boost=0.5, half_life_days=HALF_LIFE_DAYS, activation_floor=1e-6
                ),
            ),
            MemoryReinforced(
                **envelope(at=T0 + 2 * day, actor=ACTOR),
                payload=MemoryReinforcedPayload(memory_id=_id(kept), amount=0.2),
            ),
            # A v1 tick (read as one that rewrites) decays the workspace's rows as its projector did.
            ActivationDecayed(
                **envelope(mind="", at=T0 + 5 * day, actor="decay"),
                payload=ActivationDecayedPayload(tick_at=T0 + 5 * day, half_life_days=7.0, rewrite=True),
            ),
        ]
    )
    expected = reinforce_activation(decay_activation(1.0, 1.0, 0.9), 0.5)
    expected = decay_activation(
        reinforce_activation(decay_activation(expected, 1.0, 0.9), 0.2), 3.0, 0.9, 7.0
    )
    row, other = await backend.records.memory(_id(kept)), await backend.records.memory(_id(elsewhere))
    assert row is not None
    assert other is not None
    assert (row["activation"], row["recall_count"]) == (pytest.approx(expected), 1), (
        "a reinforcement is no recall"
    )
    assert (row["activation_at"], row["updated_at"]) == (T0 + 5 * day, T0 + 2 * day)
    assert (other["activation"], other["activation_at"]) == (1.0, T0), "the tick is the workspace's"
    assert (row["half_life_days"], other["half_life_days"]) == (7.0, HALF_LIFE_DAYS), (
        "it decays on with the tick's"
    )


async def test_activation_is_read_at_the_clock_from_the_last_reinforcement_and_a_tick_rewrites_nothing(
    backend: Backend,
) -> None:
    kept, plain = memory_created("Kept in mind", importance=0.9), memory_created("Plain", importance=0.0)
    day = timedelta(days=1)
    reinforced = MemoryReinforced(
        **envelope(at=T0 + day, actor=ACTOR),
        payload=MemoryReinforcedPayload(memory_id=_id(kept), amount=0.2, half_life_days=7.0),
    )
    tick = ActivationDecayed(
        **envelope(mind="", at=T0 + 5 * day, actor="decay"),
        payload=ActivationDecayedPayload(tick_at=T0 + 5 * day, since=T0 + 4 * day),
    )
    await backend.sink.publish([kept, plain, reinforced, tick])

    stored = await backend.records.memory(_id(kept))
    assert stored is not None
    at_reinforcement = reinforce_activation(decay_activation(1.0, 1.0, 0.9, 7.0), 0.2)
    assert (stored["activation"], stored["activation_at"], stored["half_life_days"]) == (
        pytest.approx(at_reinforcement, rel=1e-12),
        T0 + day,
        7.0,
    ), "the tick changed no row"

    backend.clock[0] = T0 + 30 * day
    expected = decay_activation(at_reinforcement, 29.0, 0.9, 7.0)
    assert (await reads.memory_detail(backend.records, _id(kept))).memory.activation == pytest.approx(
        expected
    )
    listed = {
        m["id"]: m["activation"] for m in await backend.records.page(RecallFilters("acme"), "newest", 9, 0)
    }
    assert listed == {
        _id(kept): pytest.approx(expected),
        _id(plain): pytest.approx(decay_activation(1.0, 30.0, 0.0)),
    }
    backend.clock[0] = T0 + 3000 * day
    assert (await reads.memory_detail(backend.records, _id(plain))).memory.activation == pytest.approx(
        ACTIVATION_FLOOR
    ), "never below the floor"


async def test_a_tick_finds_the_memories_that_faded_or_expired_since_the_previous_one(
    backend: Backend,
) -> None:
    day = timedelta(days=1)
    # At importance 0 activation falls below 0.05 after 14 · log2(20) ≈ 60.5 days; at 1, twice that.
    old, important = memory_created("Old news", importance=0.0), memory_created("Important", importance=1.0)
    expiring = memory_created("The offer ends", importance=1.0, valid_until=T0 + 10 * day)
    await backend.sink.publish([old, important, expiring])

    assert await backend.records.fading("acme", T0 + 60 * day, T0 + 61 * day, 0.05, 10) == Fading(
        [_id(old)], 1, [], 0
    )
    assert await backend.records.fading("acme", T0 + 61 * day, T0 + 62 * day, 0.05, 10) == Fading(
        [], 0, [], 0
    ), "faded before this interval"
    assert await backend.records.fading("acme", T0 + 9 * day, T0 + 10 * day, 0.05, 10) == Fading(
        [], 0, [_id(expiring)], 1
    )
    assert await backend.records.fading("globex", T0, T0 + 999 * day, 0.05, 10) == Fading([], 0, [], 0)
    listed = await backend.records.fading("acme", T0, T0 + 200 * day, 0.05, 1)
    assert (listed.faded_total, len(listed.faded)) == (3, 1), "at most `limit` ids, all counted"

    # The decay worker publishes that as its tick (which rewrites no row).
    await upkeep.decay_tick(backend.records, backend.sink, T0 + 61 * day, ["acme"], since=T0 + 60 * day)
    ticks = await backend.records.audit("acme", ["activation.decayed.v2"], None, None, 5)
    payloads = [json.loads(t["payload"]) if isinstance(t["payload"], str) else t["payload"] for t in ticks]
    assert [(p["faded"], p["faded_total"], p["since"]) for p in payloads] == [
        ([_id(old)], 1, (T0 + 60 * day).isoformat().replace("+00:00", "Z"))
    ]

    # Recalled after it faded, it is above the threshold again and fades anew later.
    await backend.sink.publish(
        [
            MemoryReinforced(
                **envelope(at=T0 + 62 * day, actor=ACTOR),
                payload=MemoryReinforcedPayload(memory_id=_id(old), amount=1.0),
            )
        ]
    )
    assert await backend.records.fading(
        "acme", T0 + 61 * day, T0 + 62 * day + timedelta(hours=1), 0.05, 10
    ) == Fading([], 0, [], 0)
    assert _id(old) in (await backend.records.fading("acme", T0 + 100 * day, T0 + 130 * day, 0.05, 10)).faded


async def test_an_unknown_or_ambiguous_memory_is_refused(backend: Backend) -> None:
    one = memory_created("One", memory_id="abcdef00-0000-4000-8000-000000000001")
    two = memory_created("Two", memory_id="abcdef00-0000-4000-8000-000000000002", workspace="globex")
    await backend.sink.publish([one, two])

    assert await backend.records.get("abcdef00-0000-4000-8000-000000000009") is None
    with pytest.raises(NotFound, match="no memory abcdef00-0000-4000-8000-000000000009"):
        await reads.memory_detail(backend.records, "abcdef00-0000-4000-8000-000000000009")
    with pytest.raises(InvalidQuery, match="matches several memories"):
        await reads.memory_detail(backend.records, "abcdef00")
    with pytest.raises(InvalidQuery, match="give at least 6 characters"):
        await reads.memory_detail(backend.records, "abc")
    with pytest.raises(NotFound):
        await reads.memory_detail(backend.records, _id(one), "globex")
    assert (await reads.memory_detail(backend.records, "abcdef00", "globex")).memory.content == "Two"


async def test_the_audit_log_filters_by_workspace_type_and_actor_and_pages_back(backend: Backend) -> None:
    made = [memory_created(f"Memory {i}", at=T0 + i * MINUTE) for i in range(3)]
    elsewhere = memory_created("Another workspace's memory", workspace="globex")
    await backend.sink.publish([*made, elsewhere])
    target = _id(made[0])
    await curation.retract(backend.records, backend.sink, target, actor=ACTOR, reason="wrong", now=T0)
    # An edge across minds is refused by the read model: it is not in the audit copy either.
    across = memory_created("In another mind", mind="qa")
    await backend.sink.publish([across])
    refused = RelationshipAdded(
        **envelope(),
        payload=RelationshipAddedPayload(
            relationship_id=new_id(), from_id=target, to_id=_id(across), relation="supports"
        ),
    )
    await backend.sink.publish([refused])

    async def audit(**query: Any) -> tuple[list[str], int | None]:
        page = await reads.audit(backend.records, AuditQuery(**query))
        return [e.id for e in page.items], page.next_before

    newest, next_before = await audit(workspace="acme", limit=2)
    action_id = newest[1]
    assert newest[0] == across.id
    assert next_before is not None
    older, end = await audit(workspace="acme", before=next_before)
    assert (older, end) == ([ev.id for ev in reversed(made)], None)
    everything, _ = await audit()
    assert everything == [across.id, action_id, elsewhere.id, *older]
    by_type = await reads.audit(backend.records, AuditQuery(type="operator.action"))
    assert [(e.id, e.actor, e.payload["target_id"]) for e in by_type.items] == [(action_id, ACTOR, target)]
    assert (await audit(actor=ACTOR))[0] == [action_id]
    assert (await audit(workspace="globex"))[0] == [elsewhere.id]
    assert (await audit(type="memory.created.v1", workspace="acme", limit=1))[0] == [across.id]
    row = await backend.records.get(target)
    assert row is not None
    assert row["relationships"] == []
    assert await reads.workspace_exists(backend.records, "globex")
    assert not await reads.workspace_exists(backend.records, "nowhere")
