"""How ``noemactl why`` draws a history: each event under the step it follows from, causes that are
no events as steps of their own with attention's decision, and every payload's scores shown."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from noema.application.audit_views import AuditDiff, Change, ChangeGroup, Responsible, Why, WhyStep
from noema.application.views import EventRecord
from noema_cli.why_tree import diff_tables, payload_lines, tree_lines
from tests.support import T0


def event(seq: int, event_id: str, event_type: str, payload: dict[str, Any], **envelope: Any) -> EventRecord:
    return EventRecord(
        seq=seq,
        id=event_id,
        type=event_type,
        workspace="acme",
        mind="ops",
        occurred_at=T0 + timedelta(seconds=seq),
        causation_id=envelope.get("causation_id"),
        correlation_id=envelope.get("correlation_id", event_id),
        actor=envelope.get("actor", "attend"),
        subject="noema.evt",
        payload=payload,
    )


def step(e: EventRecord, parent: str | None = None, link: str | None = None) -> WhyStep:
    return WhyStep(id=e.id, kind="event", parent=parent, link=link, event=e, decision=None)  # type: ignore[arg-type]


DECISION = {
    "candidate_id": "obs-1",
    "admitted": True,
    "score": 0.712,
    "components": {"salience": 0.28, "novelty": 0.25},
    "reason": "admitted",
    "event_id": "ev-decided",
    "seq": 3,
}


def history() -> Why:
    decided = event(3, "ev-decided", "attention.decided.v1", {"decisions": [DECISION], "threshold": 0.5})
    created = event(4, "ev-created", "memory.created.v1", {"memory_id": "m-1", "content": "the key rotates"})
    retrieved = event(
        9,
        "ev-recalled",
        "memory.retrieved.v1",
        {"memory_id": "m-1", "score": 0.83, "components": {"lexical": 0.6, "recency": 0.23}},
        causation_id="rp-1",
        correlation_id="obs-2",
    )
    return Why(
        id="m-1",
        subject="memory",
        workspace="acme",
        truncated=False,
        steps=[
            WhyStep(id="obs-1", kind="observation", parent=None, link=None, event=None, decision=DECISION),
            step(decided, "obs-1", "causation"),
            step(created, "obs-1", "causation"),
            WhyStep(id="rp-1", kind="recall", parent=None, link=None, event=None, decision=None),
            step(retrieved, "rp-1", "causation"),
        ],
    )


def test_the_tree_puts_each_event_under_its_cause_with_what_it_recorded() -> None:
    assert tree_lines(history()) == [
        "memory m-1 in workspace acme: 3 event(s)",
        "observation (on the observation stream) obs-1",
        "│   attention: admitted · score 0.712 · salience=0.28 novelty=0.25"
        " · decided in attention.decided #3",
        "├── #3 attention.decided.v1 · attend · 2026-03-02T09:00:03+00:00 · ev-decided",
        "│       threshold=0.5",
        "│       decisions: 1",
        "│         - candidate_id=obs-1 admitted=True score=0.712 components=(salience=0.28 novelty=0.25)"
        " reason=admitted event_id=ev-decided seq=3",
        "└── #4 memory.created.v1 · attend · 2026-03-02T09:00:04+00:00 · ev-created",
        '        memory_id=m-1 content="the key rotates"',
        "recall proposal (on the observation stream) rp-1",
        "└── #9 memory.retrieved.v1 · attend · 2026-03-02T09:00:09+00:00 · ev-recalled",
        "        memory_id=m-1 score=0.83",
        "        components: lexical=0.6 recency=0.23",
    ]


def test_a_step_whose_parent_comes_later_or_is_missing_is_still_drawn_once() -> None:
    late = event(7, "ev-late", "memory.superseded.v1", {"memory_id": "m-1", "superseded_by": "m-2"})
    early = event(5, "ev-early", "conflict.recorded.v1", {"rule": "recency"}, causation_id="ev-late")
    why = Why(
        id="m-1",
        subject="fact",
        workspace="acme",
        truncated=True,
        steps=[step(early, "ev-late", "causation"), step(late, "gone", "correlation")],
    )
    lines = tree_lines(why)
    assert lines[0].endswith("2 event(s) (truncated: raise --limit to see more)")
    assert [line.split(" · ")[0] for line in lines if "#" in line] == [
        "#7 memory.superseded.v1 (by correlation)",
        "└── #5 conflict.recorded.v1",
    ]


def test_long_lists_of_records_show_those_about_the_steps_and_vectors_are_counted() -> None:
    decisions = [{"candidate_id": f"obs-{i}", "score": i / 10} for i in range(10)]
    lines = payload_lines({"decisions": decisions, "vector": [0.1] * 384, "model": "m"}, focus={"obs-7"})
    assert lines == [
        "vector=[384 numbers] model=m",
        "decisions: 10 (9 more not shown)",
        "  - candidate_id=obs-7 score=0.7",
    ]
    assert payload_lines({"decisions": decisions}) == [
        "decisions: 10 (7 more not shown)",
        "  - candidate_id=obs-0 score=0",
        "  - candidate_id=obs-1 score=0.1",
        "  - candidate_id=obs-2 score=0.2",
    ]


def test_the_diff_has_a_table_per_kind_with_the_events_responsible() -> None:
    responsible = Responsible(seq=12, id="ev", type="memory.superseded.v1", occurred_at=T0, actor="conflicts")
    change = Change(target="m-1", workspace="acme", summary="superseded by m-2", events=[responsible])
    diff = AuditDiff(
        from_="10",
        to="20",
        workspace="acme",
        groups=[ChangeGroup(kind="memory.superseded", title="memories superseded", changes=[change])],
        first_seq=12,
        last_seq=12,
        truncated=False,
    )
    heading, tables = diff_tables(diff)
    assert heading == "changes after 10 up to 20 in workspace acme (events #12–#12)"
    [table] = tables
    assert table.title == "memories superseded (1)"
    assert [list(column.cells) for column in table.columns] == [
        ["m-1"],
        ["acme"],
        ["superseded by m-2"],
        ["#12 memory.superseded.v1 conflicts 2026-03-02T09:00:00+00:00"],
    ]


def test_a_recency_temporal_score_shows_as_the_time_it_stands_for() -> None:
    payload = {"query": "deploys", "components": {"temporal_score": 1796594706.25, "lexical_score": 0.3}}
    _, line = payload_lines(payload)
    assert "temporal_score=2026-12-06T22:05:06Z" in line
    assert "1.797e+09" not in line
    # A question naming a time: the score is whether it happened then (0 or 1), shown as is.
    [line] = payload_lines({"components": {"temporal_score": 1.0}})
    assert "temporal_score=1" in line
