"""One mixed attention cycle pinned whole: given observations and recall proposals of two minds, with
duplicates, a weak candidate and more strong ones than the capacity admits, when the cycle is decided,
then exactly these events, in this order, with these ids and payloads.

The events are also compared with a golden file (``golden/attention_cycle.json``), so that a change to
any payload shows as a diff. Rewrite it (``python tests/unit/test_attention_cycle.py``) only when a
change to attention's output is intended.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from noema.client import build_observation
from noema.domain.attention import AttentionConfig, decide_cycle, memory_id_for
from noema.domain.knowledge import WorkingMemory, WorkingMemoryEntry, session_digest
from noema.ids import derive_id
from noema_events import Event, ObservationRecorded, RecallProposed, RecallProposedPayload, encode_event

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
GOLDEN = Path(__file__).parent / "golden" / "attention_cycle.json"
CONFIG = AttentionConfig(threshold=0.7, capacity=3)


def observation(n: int, content: str, mind: str = "ops", **kw: Any) -> ObservationRecorded:
    return build_observation(
        content,
        workspace="acme",
        mind=mind,
        observation_id=f"obs-{n}",
        occurred_at=NOW - timedelta(minutes=1),
        **kw,
    )


def recall(n: int, memory_id: str, content: str) -> RecallProposed:
    return RecallProposed(
        id=f"rec-{n}",
        workspace="acme",
        mind="ops",
        occurred_at=NOW,
        correlation_id=f"corr-{n}",
        actor="retrieve",
        payload=RecallProposedPayload(
            memory_id=memory_id,
            observation_id=f"obs-{n}",
            query="when do credentials rotate?",
            score=0.9,
            importance=0.7,
            components={"semantic": 0.5},
            content=content,
        ),
    )


def batch() -> list[ObservationRecorded | RecallProposed]:
    """ops: obs-1, rec-3 and obs-8 are admitted (rec-3 scores highest, but events follow input order),
    obs-4 is too weak, obs-5 and rec-6 repeat obs-1 and rec-3, obs-9 is strong but over the capacity.
    dev: both observations are admitted and chained in their session."""
    return [
        observation(1, "the deploy key rotates on Fridays", session="s1", salience=0.9),
        observation(2, "the billing service moved to the new cluster", mind="dev", session="s2"),
        recall(3, "m-vault", "the vault credentials rotate every Friday"),
        observation(4, "ok", channel="low"),
        observation(5, "The deploy key  rotates on Fridays", session="s1", salience=0.9),
        recall(6, "m-vault", "the vault credentials rotate every Friday"),
        observation(7, "the billing cluster runs three replicas in two zones", mind="dev", session="s2"),
        observation(
            8, "staging was rebuilt from the latest snapshot this morning", session="s1", salience=0.8
        ),
        observation(9, "the on-call rotation for the vault changes next week", salience=0.5),
    ]


def decide() -> tuple[list[Event], dict[tuple[str, str], WorkingMemory]]:
    earlier = NOW - timedelta(minutes=10)
    held = WorkingMemoryEntry(
        memory_id="m-held", weight=1.0, entered_at=earlier, gist="vault credentials rotation"
    )
    ops = WorkingMemory(sessions=((session_digest("s0"), "m-s0"), (session_digest("s1"), "m-earlier")))
    memories = {("acme", "ops"): ops.admit([held], earlier)}
    events = decide_cycle(batch(), NOW, CONFIG, memories, through_seq=42)
    return events, memories


def test_a_mixed_cycle_yields_these_events_in_this_order() -> None:
    events, memories = decide()
    ops = sorted(["obs-1", "rec-3", "obs-4", "obs-5", "rec-6", "obs-8", "obs-9"])
    m1, m2, m7, m8 = (memory_id_for(f"obs-{n}") for n in (1, 2, 7, 8))
    assert [(e.type, e.mind, e.id) for e in events] == [
        ("attention.decided.v1", "ops", derive_id("attention.decided", *ops)),
        ("memory.created.v1", "ops", derive_id("memory.created", "obs-1")),
        ("memory.retrieved.v2", "ops", derive_id("memory.retrieved", "rec-3")),
        ("memory.created.v1", "ops", derive_id("memory.created", "obs-8")),
        ("working_memory.updated.v1", "ops", derive_id("working_memory.updated", "acme", "ops", *ops)),
        ("relationship.added.v1", "ops", derive_id("episodic_next", "m-earlier", m1)),
        ("relationship.added.v1", "ops", derive_id("episodic_next", m1, m8)),
        ("attention.decided.v1", "dev", derive_id("attention.decided", "obs-2", "obs-7")),
        ("memory.created.v1", "dev", derive_id("memory.created", "obs-2")),
        ("memory.created.v1", "dev", derive_id("memory.created", "obs-7")),
        (
            "working_memory.updated.v1",
            "dev",
            derive_id("working_memory.updated", "acme", "dev", "obs-2", "obs-7"),
        ),
        ("relationship.added.v1", "dev", derive_id("episodic_next", m2, m7)),
    ]
    decided = events[0].payload.decisions  # type: ignore[attr-defined]
    assert [(d.candidate_id, d.candidate_kind, d.memory_id, d.reason) for d in decided] == [
        ("obs-1", "observation", m1, "admitted"),
        ("rec-3", "recall", "m-vault", "admitted"),
        ("obs-4", "observation", None, "score 0.445 below threshold 0.7"),
        ("obs-5", "observation", None, "duplicate within cycle"),
        ("rec-6", "recall", None, "duplicate within cycle"),
        ("obs-8", "observation", m8, "admitted"),
        ("obs-9", "observation", None, "over capacity"),
    ]
    # Each mind's sessions, most recently continued last: s1 moved on to m8, s0 stayed where it was.
    assert memories[("acme", "ops")].sessions == ((session_digest("s0"), "m-s0"), (session_digest("s1"), m8))
    assert memories[("acme", "dev")].sessions == ((session_digest("s2"), m7),)
    assert [i.memory_id for i in memories[("acme", "ops")].items] == ["m-vault", m1, m8, "m-held"]
    assert [i.memory_id for i in memories[("acme", "dev")].items] == [m7, m2]


def golden_text(events: list[Event]) -> str:
    """The events as encoded, one field a line (keys in their encoded order, which is compared too)."""
    return json.dumps([json.loads(encode_event(e)) for e in events], indent=2) + "\n"


def test_a_mixed_cycle_yields_exactly_the_golden_events() -> None:
    events, _ = decide()
    assert golden_text(events) == GOLDEN.read_text()


if __name__ == "__main__":
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(golden_text(decide()[0]))
