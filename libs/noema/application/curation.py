"""What an operator may do to memory: retract, archive, restore, correct, and enter knowledge.

Each operation validates up front against the read model, raises :class:`OperationError` (or one of
its kinds below) with a message fit to show as is, and then publishes its events: always an
``operator.action`` naming the actor and the reason, beside the events that carry the change. Nothing
here writes the read model (the projector applies the events), and nothing here knows about HTTP, so
the API, the CLI and the MCP server share these functions.

The checks read the projected state, which trails the stream by the projector's lag: two operators
racing on one memory may both pass them. That is harmless — the projector applies status changes in
stream order and never revives a superseded record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal, Protocol

import msgspec

from noema.application.upkeep import refuse_erased
from noema.domain.dynamics import ACTIVATION_FLOOR, HALF_LIFE_DAYS
from noema.errors import Conflict, NotFound, OperationError
from noema.ids import new_id
from noema.instants import Instant
from noema.ports import EventSink, MemoryRecords, Row
from noema_events import (
    Event,
    MemoryCreated,
    MemoryCreatedPayload,
    MemorySuperseded,
    MemorySupersededPayload,
    OperatorAction,
    OperatorActionPayload,
)
from noema_events.envelope import Name
from noema_events.messages import humanize
from noema_events.vocabulary import CHANNEL_CREDIBILITY, EpistemicKind, MemoryKind, MemoryType

__all__ = [
    "Conflict",
    "KnowledgeEntry",
    "NotFound",
    "OperationError",
    "OperatorReceipt",
    "SubjectLinks",
    "archive",
    "correct",
    "create_memory",
    "restore",
    "retract",
]

StatusAction = Literal["retract", "archive", "restore"]


@dataclass(frozen=True)
class OperatorReceipt:
    """What an operation published: the operator_action event and the memory it concerns."""

    action_event_id: str
    memory_id: str
    workspace: str
    events: tuple[str, ...]
    """Ids of every event published, the operator_action first."""


_Label = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
_Unit = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]


class KnowledgeEntry(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A memory an operator writes directly (channel ``operator``, full credibility).

    A msgspec Struct so that surfaces can decode their input straight into it (the HTTP body
    extends it with the reason); its constraints are the event schema's.
    """

    workspace: Name
    content: Annotated[str, msgspec.Meta(min_length=1, max_length=32_000, pattern=r"\S")]
    mind: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]{0,64}$")] = ""
    kind: MemoryKind = "semantic"
    epistemic_kind: EpistemicKind = "fact"
    memory_type: MemoryType = "fact"
    domain: _Label | None = None
    topic: _Label | None = None
    repo: _Label | None = None
    confidence: _Unit = 1.0
    importance: _Unit = 0.5
    participants: Annotated[list[_Label], msgspec.Meta(max_length=50)] = msgspec.field(default_factory=list)
    happened_at: Instant | None = None
    valid_until: Instant | None = None


# Which statuses each status action may start from (anything else is a Conflict).
_FROM: dict[str, tuple[str, ...]] = {
    "retract": ("active", "archived"),
    "archive": ("active",),
    "restore": ("retracted", "archived"),
    "correct": ("active", "archived"),
}


def _valid(events: Sequence[Event]) -> list[Event]:
    """Validate events against their schemas (constraints are checked on decode, not construction)."""
    out = []
    for ev in events:
        try:
            data = msgspec.json.encode(ev)
            out.append(msgspec.json.decode(data, type=type(ev)))
        except msgspec.ValidationError as exc:
            raise OperationError(humanize(exc, msgspec.json.decode(data), struct=type(ev))) from None
    return out


def _reason(reason: str) -> str:
    reason = reason.strip()
    if not reason:
        raise OperationError("a reason is required")
    return reason


async def _target(reads: MemoryRecords, memory_id: str, action: str) -> Row:
    row = await reads.memory(memory_id)
    if row is None:
        raise NotFound(f"no memory {memory_id}")
    refuse_erased(row, action)
    if row["status"] not in _FROM[action]:
        raise Conflict(
            f"cannot {action} memory {memory_id}: it is {row['status']} "
            f"(only {' or '.join(_FROM[action])} memories can be)"
        )
    return row


class SubjectLinks(Protocol):
    """Which subjects an item's content is about (the keyring's links, :mod:`noema.composition.erasure`)."""

    async def subjects(self, workspace: str, key_id: str) -> list[str]: ...


def _action(
    row: Row,
    action: str,
    *,
    actor: str,
    reason: str,
    now: datetime,
    details: dict[str, str] | None = None,
) -> OperatorAction:
    event_id = new_id()
    return OperatorAction(
        id=event_id,
        workspace=row["workspace"],
        mind=row["mind"],
        occurred_at=now,
        correlation_id=event_id,
        actor=actor,
        payload=OperatorActionPayload(
            action=action,  # type: ignore[arg-type]
            target_id=row["id"],
            reason=reason,
            details=details or {},
        ),
    )


def _caused_by(action: OperatorAction) -> dict[str, Any]:
    """Envelope fields of an event the operator action caused (same scope, actor and time)."""
    return {
        "id": new_id(),
        "workspace": action.workspace,
        "mind": action.mind,
        "occurred_at": action.occurred_at,
        "causation_id": action.id,
        "correlation_id": action.id,
        "actor": action.actor,
    }


async def _publish(publisher: EventSink, events: Sequence[Event], memory_id: str) -> OperatorReceipt:
    checked = _valid(events)
    await publisher.publish(checked)
    return OperatorReceipt(checked[0].id, memory_id, checked[0].workspace, tuple(e.id for e in checked))


async def _change_status(
    action: StatusAction,
    reads: MemoryRecords,
    publisher: EventSink,
    memory_id: str,
    *,
    actor: str,
    reason: str,
    now: datetime,
) -> OperatorReceipt:
    reason = _reason(reason)
    row = await _target(reads, memory_id, action)
    return await _publish(publisher, [_action(row, action, actor=actor, reason=reason, now=now)], memory_id)


async def retract(
    reads: MemoryRecords, publisher: EventSink, memory_id: str, *, actor: str, reason: str, now: datetime
) -> OperatorReceipt:
    """Mark a memory inaccurate: it stays visible (status ``retracted``) and leaves normal recall."""
    return await _change_status("retract", reads, publisher, memory_id, actor=actor, reason=reason, now=now)


async def archive(
    reads: MemoryRecords, publisher: EventSink, memory_id: str, *, actor: str, reason: str, now: datetime
) -> OperatorReceipt:
    """Set a memory aside (status ``archived``): kept, out of normal recall, restorable."""
    return await _change_status("archive", reads, publisher, memory_id, actor=actor, reason=reason, now=now)


async def restore(
    reads: MemoryRecords, publisher: EventSink, memory_id: str, *, actor: str, reason: str, now: datetime
) -> OperatorReceipt:
    """Bring a retracted or archived memory back to ``active``."""
    return await _change_status("restore", reads, publisher, memory_id, actor=actor, reason=reason, now=now)


async def correct(
    reads: MemoryRecords,
    publisher: EventSink,
    memory_id: str,
    *,
    actor: str,
    reason: str,
    content: str,
    now: datetime,
    links: SubjectLinks | None = None,
) -> OperatorReceipt:
    """Supersede a memory by a corrected copy; the receipt's ``memory_id`` is the new memory's.

    The copy keeps the old record's classification and scope, takes the operator channel's
    credibility, and cites the old record's sources; the old record stays, marked superseded. It is
    about what the old record was about: it carries its subjects (from ``links``), so an erasure of
    one of them erases the copy too (docs/privacy.md).
    """
    reason = _reason(reason)
    content = content.strip()
    row = await _target(reads, memory_id, "correct")
    if content == row["content"]:
        raise OperationError("the corrected content is the same as the current content")
    new_memory = new_id()
    action = _action(
        row, "correct", actor=actor, reason=reason, now=now, details={"new_memory_id": new_memory}
    )
    created = MemoryCreated(
        **_caused_by(action),
        payload=MemoryCreatedPayload(
            memory_id=new_memory,
            half_life_days=HALF_LIFE_DAYS,
            activation_floor=ACTIVATION_FLOOR,
            kind=row["kind"],
            epistemic_kind=row["epistemic_kind"],
            content=content,
            memory_type=row["memory_type"],
            domain=row["domain"],
            topic=row["topic"],
            repo=row["repo"],
            importance=row["importance"],
            salience=row["salience"],
            credibility=CHANNEL_CREDIBILITY["operator"],
            veracity=row["veracity"],
            channel="operator",
            source=f"correction of {memory_id}",
            participants=list(row["participants"]),
            source_observation_ids=list(row["source_observation_ids"]),
            happened_at=row["happened_at"],
            valid_until=row["valid_until"],
            session=row["session"],
            subjects=await links.subjects(row["workspace"], memory_id) if links else [],
        ),
    )
    superseded = MemorySuperseded(
        **_caused_by(action),
        payload=MemorySupersededPayload(memory_id=memory_id, superseded_by=new_memory, reason=reason),
    )
    receipt = await _publish(publisher, [action, created, superseded], memory_id)
    return OperatorReceipt(receipt.action_event_id, new_memory, receipt.workspace, receipt.events)


async def create_memory(
    publisher: EventSink,
    entry: KnowledgeEntry,
    *,
    actor: str,
    reason: str,
    now: datetime,
    domain_events: Sequence[Event] = (),
) -> OperatorReceipt:
    """Enter knowledge as an operator: a memory on the operator channel, and the action that made it.

    The entry's domain must already be in its stored form
    (:meth:`noema.application.facade.Noema.enter_knowledge`
    parses it and passes the ``domain.created`` events of a first use as ``domain_events``).
    """
    reason = _reason(reason)
    memory_id = new_id()
    target = {"id": memory_id, "workspace": entry.workspace, "mind": entry.mind}
    action = _action(target, "create", actor=actor, reason=reason, now=now)
    created = MemoryCreated(
        **_caused_by(action),
        payload=MemoryCreatedPayload(
            memory_id=memory_id,
            half_life_days=HALF_LIFE_DAYS,
            activation_floor=ACTIVATION_FLOOR,
            kind=entry.kind,
            epistemic_kind=entry.epistemic_kind,
            content=entry.content.strip(),
            memory_type=entry.memory_type,
            domain=entry.domain,
            topic=entry.topic,
            repo=entry.repo,
            confidence=entry.confidence,
            importance=entry.importance,
            credibility=CHANNEL_CREDIBILITY["operator"],
            channel="operator",
            source=actor,
            participants=list(entry.participants),
            happened_at=entry.happened_at or now,
            valid_until=entry.valid_until,
        ),
    )
    return await _publish(publisher, [action, *domain_events, created], memory_id)
