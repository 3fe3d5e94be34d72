"""The fact events built both here and by the ``conflicts`` worker: a fact mentioned again, a fact
superseded, and a decided conflict. Ids are derived where a redelivery must yield the same event."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import cast

from noema.domain.dynamics import CONFIDENCE_CAP, mention_rate
from noema.domain.knowledge import FactView, Verdict
from noema.ids import derive_id, new_id
from noema_events import (
    ConflictRecorded,
    ConflictRecordedPayload,
    Event,
    FactMentioned,
    FactMentionedPayload,
    MemorySuperseded,
    MemorySupersededPayload,
)
from noema_events.vocabulary import Veracity

__all__ = ["conflict_events", "mention_event", "superseded_event"]


def mention_event(
    workspace: str,
    actor: str,
    fact: FactView,
    veracity: str | None,
    sources: Sequence[str],
    now: datetime,
    *,
    merged_from: Sequence[str] = (),
    reason: str = "",
    event_id: str | None = None,
    mentions: int = 1,
) -> FactMentioned:
    """``fact`` mentioned again, ``mentions`` times (confidence and mention_count rise in the
    projection once per mention), with the confidence rate and cap decided here."""
    event_id = event_id or new_id()
    return FactMentioned(
        id=event_id,
        workspace=workspace,
        mind=fact.agent,
        occurred_at=now,
        correlation_id=event_id,
        actor=actor,
        payload=FactMentionedPayload(
            memory_id=fact.id,
            veracity=cast(Veracity, veracity or "stated"),
            source_observation_ids=list(sources),
            merged_from=list(merged_from),
            reason=reason,
            mentions=mentions,
            rate=mention_rate(veracity, mentions),
            confidence_cap=CONFIDENCE_CAP,
        ),
    )


def superseded_event(
    workspace: str, actor: str, old: FactView, by: str, reason: str, now: datetime
) -> MemorySuperseded:
    """``old`` superseded by ``by`` (the old record stays, pointing at its replacement)."""
    return MemorySuperseded(
        id=derive_id("memory.superseded", old.id, by),
        workspace=workspace,
        mind=old.agent,
        occurred_at=now,
        causation_id=by,
        correlation_id=by,
        actor=actor,
        payload=MemorySupersededPayload(memory_id=old.id, superseded_by=by, reason=reason),
    )


def conflict_events(
    workspace: str,
    verdict: Verdict,
    *,
    domain: str | None,
    topic: str | None,
    actor: str,
    now: datetime,
    cause: str,
    rule: str | None = None,
    detail: str | None = None,
) -> list[Event]:
    """The loser superseded by the winner, and the conflict row; ids derived from the pair.

    ``rule`` and ``detail`` default to the verdict's own.
    """
    winner, loser = verdict.winner, verdict.loser
    rule = rule or verdict.rule
    conflict_id = derive_id("conflict", winner.id, loser.id)
    return [
        superseded_event(workspace, actor, loser, winner.id, f"conflict: {rule}", now),
        ConflictRecorded(
            id=conflict_id,
            workspace=workspace,
            occurred_at=now,
            causation_id=cause,
            correlation_id=cause,
            actor=actor,
            payload=ConflictRecordedPayload(
                conflict_id=conflict_id,
                winner_id=winner.id,
                loser_id=loser.id,
                domain=domain,
                topic=topic,
                rule=rule,
                detail=verdict.detail if detail is None else detail,
            ),
        ),
    ]
