"""Attention as pure functions: given observations, when a cycle is decided, then these events."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

from noema.client import build_observation
from noema.domain.attention import (
    AttentionConfig,
    decide_cycle,
    estimate_salience,
    memory_id_for,
)
from noema.domain.documents import memory_document, observation_document
from noema.domain.knowledge import SESSION_HEADS, WorkingMemory, WorkingMemoryEntry, session_digest
from noema_events import (
    AttentionDecided,
    MemoryCreated,
    RecallProposed,
    RecallProposedPayload,
    WorkingMemoryUpdated,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def obs(content: str, **kw: object):  # type: ignore[no-untyped-def]
    return build_observation(content, workspace=kw.pop("workspace", "acme"), mind=kw.pop("mind", "ops"), **kw)  # type: ignore[arg-type]


def test_a_salient_observation_becomes_an_episodic_memory_linked_to_its_cause() -> None:
    o = obs("the deploy key rotates on Fridays", correlation_id="corr-1")
    decided, created, wm = decide_cycle([o], NOW, AttentionConfig())
    assert isinstance(decided, AttentionDecided)
    assert isinstance(wm, WorkingMemoryUpdated)
    assert isinstance(created, MemoryCreated)
    assert [i.memory_id for i in wm.payload.items] == [created.payload.memory_id]
    assert decided.payload.decisions[0].admitted
    assert created.payload.kind == "episodic"
    assert created.payload.content == o.payload.content
    assert created.payload.source_observation_ids == [o.id]
    assert created.causation_id == o.id
    assert created.correlation_id == "corr-1"
    assert created.payload.memory_id == memory_id_for(o.id)
    assert created.occurred_at == NOW


def test_an_operator_change_to_a_mind_becomes_autobiographical() -> None:
    _, created, _ = decide_cycle(
        [obs("you now own the billing service", channel="operator")], NOW, AttentionConfig()
    )
    assert isinstance(created, MemoryCreated)
    assert created.payload.kind == "autobiographical"
    assert created.payload.credibility == 1.0


def test_low_salience_is_rejected_with_its_reason_and_no_memory() -> None:
    events = decide_cycle([obs("ok", channel="low")], NOW, AttentionConfig(threshold=0.5))
    assert len(events) == 1
    decision = events[0].payload.decisions[0]  # type: ignore[attr-defined]
    assert not decision.admitted
    assert "below threshold" in decision.reason
    assert decision.memory_id is None


def test_a_repeat_within_one_cycle_is_not_novel_and_not_admitted_twice() -> None:
    events = decide_cycle(
        [obs("the build is red again"), obs("The build is  red again")], NOW, AttentionConfig()
    )
    created = [e for e in events if isinstance(e, MemoryCreated)]
    assert len(created) == 1


def test_candidates_compete_for_a_limited_number_of_admissions() -> None:
    batch = [obs(f"incident {i} " + "word " * i, salience=i / 10) for i in range(1, 10)]
    events = decide_cycle(batch, NOW, AttentionConfig(threshold=0.0, capacity=3))
    admitted = [e.payload.content for e in events if isinstance(e, MemoryCreated)]
    assert len(admitted) == 3
    assert all(c.startswith(("incident 9", "incident 8", "incident 7")) for c in admitted)
    reasons = {d.reason for d in events[0].payload.decisions if not d.admitted}  # type: ignore[attr-defined]
    assert reasons == {"over capacity"}


def test_decisions_are_grouped_per_workspace_and_mind() -> None:
    events = decide_cycle(
        [obs("alpha beta gamma", mind="a"), obs("delta epsilon zeta", mind="b")], NOW, AttentionConfig()
    )
    decided = [e for e in events if isinstance(e, AttentionDecided)]
    assert {(e.workspace, e.mind) for e in decided} == {("acme", "a"), ("acme", "b")}


def test_the_same_observation_always_yields_the_same_event_ids() -> None:
    o = obs("the deploy key rotates on Fridays")
    first = decide_cycle([o], NOW, AttentionConfig())
    again = decide_cycle([o], datetime(2027, 1, 1, tzinfo=UTC), AttentionConfig())
    assert [e.id for e in first] == [e.id for e in again]


def test_salience_grows_with_substance_and_is_bounded() -> None:
    assert estimate_salience("ok") < estimate_salience("the deploy key rotates on Fridays")
    assert estimate_salience("word " * 10_000) <= 0.9


def test_derived_ids_are_standard_uuid5s() -> None:
    import uuid

    from noema.ids import _NAMESPACE, derive_id

    for parts in [("memory", "abc"), ("attention.decided", "x", "y"), ("é", "")]:
        assert derive_id(*parts) == str(uuid.uuid5(_NAMESPACE, "\x1f".join(parts)))


def test_admitted_episodes_of_a_session_are_chained_across_cycles() -> None:
    from noema_events import RelationshipAdded

    memories: dict[tuple[str, str], WorkingMemory] = {}
    first = [obs(f"turn {i} of the standup meeting", session="s1") for i in range(3)]
    events = decide_cycle(first, NOW, AttentionConfig(threshold=0.0), memories)
    edges = [e.payload for e in events if isinstance(e, RelationshipAdded)]
    ids = [memory_id_for(o.id) for o in first]
    assert [(p.from_id, p.to_id, p.relation) for p in edges] == [
        (ids[0], ids[1], "episodic_next"),
        (ids[1], ids[2], "episodic_next"),
    ]
    later = obs("turn 3 of the standup meeting", session="s1")
    events = decide_cycle(
        [later, obs("unrelated note without a session")], NOW, AttentionConfig(threshold=0.0), memories
    )
    edges = [e.payload for e in events if isinstance(e, RelationshipAdded)]
    assert [(p.from_id, p.to_id) for p in edges] == [(ids[2], memory_id_for(later.id))]
    assert events.index(next(e for e in events if isinstance(e, RelationshipAdded))) == len(events) - 1


def test_a_mind_decided_from_its_last_recorded_working_memory_continues_exactly() -> None:
    """Whoever decides a mind next (attend restarted, or another instance that took the mind over)
    starts from its last working_memory.updated: the events it makes are byte-identical to those of
    the instance that kept the mind in memory, episode chains included."""
    from noema.domain.attention import working_memory_of
    from noema_events import Event, RelationshipAdded, encode_event

    config = AttentionConfig(threshold=0.0)
    cycles = [
        [obs(f"turn {i} of the standup meeting", session="standup") for i in range(3)],
        [
            obs("a note from the retro", session="retro"),
            obs("turn 3 of the standup meeting", session="standup"),
        ],
        [obs("turn 4 of the standup meeting", session="standup"), obs("retro action items", session="retro")],
    ]
    kept: dict[tuple[str, str], WorkingMemory] = {}
    kept_events = [decide_cycle(c, NOW, config, kept) for c in cycles]

    reloaded_events: list[list[Event]] = []
    for cycle in cycles:
        last = None  # each cycle by a fresh instance, which knows only the stream
        for earlier in reloaded_events:
            last = next((e for e in reversed(earlier) if isinstance(e, WorkingMemoryUpdated)), last)
        memories = {} if last is None else {("acme", "ops"): working_memory_of(last, config.wm_capacity)}
        reloaded_events.append(decide_cycle(cycle, NOW, config, memories))

    assert [[encode_event(e) for e in c] for c in reloaded_events] == [
        [encode_event(e) for e in c] for c in kept_events
    ]
    edges = [
        (e.payload.from_id, e.payload.to_id)
        for c in reloaded_events
        for e in c
        if isinstance(e, RelationshipAdded)
    ]
    standup = [memory_id_for(o.id) for o in (*cycles[0], cycles[1][1], cycles[2][0])]
    retro = [memory_id_for(cycles[1][0].id), memory_id_for(cycles[2][1].id)]
    assert set(edges) == {*itertools.pairwise(standup), (retro[0], retro[1])}


def test_a_mind_keeps_the_heads_of_its_most_recent_sessions_only() -> None:
    wm = WorkingMemory()
    for n in range(SESSION_HEADS + 2):
        wm = wm.continued([(session_digest(f"s{n}"), f"m{n}")])
    assert len(wm.sessions) == SESSION_HEADS
    assert wm.head(session_digest("s0")) is None
    assert wm.head(session_digest("s1")) is None
    assert wm.head(session_digest("s2")) == "m2"
    # Continuing an old session moves it to the end, so it is the last to be forgotten.
    wm = wm.continued([(session_digest("s2"), "m2b"), (session_digest("new"), "mnew")])
    assert wm.sessions[-2:] == ((session_digest("s2"), "m2b"), (session_digest("new"), "mnew"))
    assert wm.head(session_digest("s3")) is None


def test_a_session_is_recorded_by_digest_whatever_its_name() -> None:
    long = "x" * 10_000
    events = decide_cycle([obs("the first turn", session=long)], NOW, AttentionConfig(threshold=0.0))
    (updated,) = [e for e in events if isinstance(e, WorkingMemoryUpdated)]
    assert [(h.session, len(h.session)) for h in updated.payload.sessions] == [(session_digest(long), 16)]


def recall_proposal(query: str, content: str = "") -> RecallProposed:
    return RecallProposed(
        id="p1",
        workspace="acme",
        mind="ops",
        occurred_at=NOW,
        correlation_id="c1",
        actor="retrieve",
        payload=RecallProposedPayload(
            memory_id="m-key", observation_id="o1", query=query, score=0.9, content=content
        ),
    )


def holding(gist: str) -> dict[tuple[str, str], WorkingMemory]:
    entry = WorkingMemoryEntry(memory_id="m-held", weight=1.0, entered_at=NOW, gist=gist)
    return {("acme", "ops"): WorkingMemory().admit([entry], NOW)}


def test_a_recalled_memory_is_weighed_and_held_by_its_own_content_not_the_question() -> None:
    """Given the mind holds the vault procedure, a recall of the vault memory is relevant to it
    though the question it answers shares none of its words; and the memory's content is its gist."""
    memories = holding("vault credentials rotation procedure")
    proposal = recall_proposal(
        query="who is on call tonight?", content="the vault credentials rotate every Friday"
    )
    events = decide_cycle([proposal], NOW, AttentionConfig(threshold=0.0), memories=memories)
    [decision] = events[0].payload.decisions  # type: ignore[attr-defined]
    assert decision.components["context"] > 0
    wm = next(e for e in events if isinstance(e, WorkingMemoryUpdated))
    gists = {i.memory_id: i.gist for i in wm.payload.items}
    assert gists["m-key"] == "the vault credentials rotate every Friday"


def test_a_recall_recorded_without_the_memory_content_falls_back_to_its_question() -> None:
    memories = holding("vault credentials rotation procedure")
    events = decide_cycle(
        [recall_proposal(query="where are the vault credentials?")],
        NOW,
        AttentionConfig(threshold=0.0),
        memories=memories,
    )
    [decision] = events[0].payload.decisions  # type: ignore[attr-defined]
    assert decision.components["context"] > 0
    wm = next(e for e in events if isinstance(e, WorkingMemoryUpdated))
    assert {i.memory_id: i.gist for i in wm.payload.items}["m-key"] == "where are the vault credentials?"


def test_an_observation_and_the_memory_it_becomes_are_embedded_as_the_same_document() -> None:
    # retrieve embeds the observation as its memory's passage and leaves the vector for embed,
    # which finds it only if the two texts are identical (noema.adapters.vector_cache).
    for extra in ({}, {"participants": ["Caroline"]}, {"happened_at": datetime(2023, 5, 8, tzinfo=UTC)}):
        o = obs("I went to a support group yesterday", **extra)
        _, created, _ = decide_cycle([o], NOW, AttentionConfig())
        assert isinstance(created, MemoryCreated)
        p = created.payload
        assert observation_document(o) == memory_document(p.content, p.participants, p.happened_at)
