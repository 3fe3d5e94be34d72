"""What changed between two points of the stream (``noemactl audit diff FROM TO``,
``GET /v1/audit/diff``): memories created, retracted, superseded, archived or restored; facts
proposed and mentioned, conflicts; policies; domains, grants and the access mode — each with the
events responsible.

A point is a stream sequence or a time with its zone; the changes are the events after ``from``
up to ``to`` (included) of the types that make them, read from the audit copy of the stream and
grouped by kind. An event that only explains another (the ``operator.action`` recording who entered
or corrected something, or changed a grant; the ``conflict.recorded`` behind a supersession) is
listed with the change it explains.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from noema.application.audit_views import (
    POINT_FORMS,
    AuditDiff,
    Change,
    ChangeGroup,
    DiffQuery,
    Responsible,
)
from noema.application.lineage import name_of
from noema.application.reads import event_records
from noema.application.views import EventRecord
from noema.errors import InvalidQuery
from noema.instants import InvalidInstant, parse_instant
from noema.ports import EventReads, StreamPoint
from noema_events import EVENT_TYPES
from noema_events.codec import UPCASTERS

__all__ = ["KINDS", "ChangeKind", "audit_diff", "changes", "diff_points", "stream_point"]

_SEQ = re.compile(r"[0-9]{1,19}")
_ZONED = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?([Zz]|[+-]\d{2}:\d{2})")


def stream_point(given: str, name: str) -> StreamPoint:
    """``given`` as a point of the stream: digits are a sequence, an ISO-8601 time must carry its
    zone. Anything else is an :class:`InvalidQuery` saying what to write."""
    text = given.strip()
    if _SEQ.fullmatch(text) and int(text) < 2**63:
        return StreamPoint(seq=int(text))
    if _ZONED.fullmatch(text):
        try:
            return StreamPoint(at=parse_instant(text, name))
        except InvalidInstant:
            pass  # e.g. month 13: refused below, with the same advice
    plus = " (in a URL, write the '+' of a time zone as %2B)" if re.search(r"\d \d{2}:\d{2}$", text) else ""
    raise InvalidQuery(
        f"{name} {given!r} is neither a stream sequence nor a time with its zone{plus}; give {POINT_FORMS}"
    )


def diff_points(q: DiffQuery) -> tuple[StreamPoint, StreamPoint]:
    """The two points of a diff, read by :func:`stream_point` (an :class:`InvalidQuery` names the
    one it cannot read). A ``from`` at or after ``to`` is no error: nothing is between them."""
    return stream_point(q.from_, "from"), stream_point(q.to, "to")


# --- what each event changes --------------------------------------------------------------------

Describe = Callable[[EventRecord], tuple[str, str]]
"""(target, summary) of the change an event makes."""


def _clip(text: object, width: int = 80) -> str:
    line = " ".join(str(text or "").split())
    return line if len(line) <= width else line[: width - 1] + "…"


class _Blank(dict[str, Any]):
    """A payload for a summary's template: a field it leaves out reads as empty."""

    def __missing__(self, key: str) -> str:
        return ""


def _about(key: str, template: str, **defaults: Any) -> Describe:
    """Describes a change by the payload's ``key`` and a summary filled from the payload (where
    ``defaults`` say what a payload leaves out when it is the default)."""

    def describe(e: EventRecord) -> tuple[str, str]:
        return str(e.payload.get(key) or ""), _clip(template.format_map(_Blank({**defaults, **e.payload})))

    return describe


_memory = _about("memory_id", "{kind}: {content}")
_status = _about("target_id", "{reason}")
_superseded = _about("memory_id", "superseded by {superseded_by}: {reason}")
_fact = _about("memory_id", "{domain} / {topic}: {content}")
_mention = _about("memory_id", "{mentions} mention(s) {reason}", mentions=1)
_conflict = _about("conflict_id", "{rule}: {winner_id} kept over {loser_id}")
_policy = _about("policy_id", "{domain}: {rule}")


def _retired(e: EventRecord) -> tuple[str, str]:
    p, by = e.payload, e.payload.get("superseded_by")
    return str(p["policy_id"]), _clip(
        f"{f'superseded by {by}' if by else 'deactivated'}: {p.get('reason', '')}"
    )


def _domain(e: EventRecord) -> tuple[str, str]:
    repo = e.payload.get("repo")
    return str(e.payload["domain"]), f"repository {repo}" if repo else "workspace domain"


def _grant(e: EventRecord) -> tuple[str, str]:
    p = e.payload
    seeded = " (seeded with the domain)" if p.get("seeded") else ""
    return f"{p['role']} on {p['domain']}", f"{p.get('previous') or 'unset'} → {p['access']}{seeded}"


def _mode(e: EventRecord) -> tuple[str, str]:
    return e.workspace, str(e.payload["access_mode"])


@dataclass(frozen=True)
class ChangeKind:
    """A kind of change: the event (and operator action) that makes it, and how it is described."""

    kind: str
    title: str
    event: str
    action: str | None
    describe: Describe


KINDS = (
    ChangeKind("memory.created", "memories created", "memory.created", None, _memory),
    ChangeKind("memory.retracted", "memories retracted", "operator.action", "retract", _status),
    ChangeKind("memory.superseded", "memories superseded", "memory.superseded", None, _superseded),
    ChangeKind("memory.archived", "memories archived", "operator.action", "archive", _status),
    ChangeKind("memory.restored", "memories restored", "operator.action", "restore", _status),
    ChangeKind("fact.proposed", "facts proposed", "fact.proposed", None, _fact),
    ChangeKind("fact.mentioned", "facts mentioned again", "fact.mentioned", None, _mention),
    ChangeKind("conflict.recorded", "conflicts recorded", "conflict.recorded", None, _conflict),
    ChangeKind("policy.proposed", "policies proposed", "policy.proposed", None, _policy),
    ChangeKind(
        "policy.superseded", "policies superseded or deactivated", "policy.superseded", None, _retired
    ),
    ChangeKind("domain.created", "domains created", "domain.created", None, _domain),
    ChangeKind("grant.changed", "grants changed", "grant.changed", None, _grant),
    ChangeKind("access_mode.changed", "access mode changed", "workspace.configured", None, _mode),
)
"""Every kind of change, in the order they are listed."""

_EXPLAINS = {"create", "correct", "grant_change"}
"""Operator actions that record who made a change another event makes (and why)."""
_NAMES = sorted({k.event for k in KINDS})


def _tags(names: Sequence[str]) -> list[str]:
    """Every version of each event name: the current ones and those upcast on read."""
    return sorted(t for t in (*EVENT_TYPES, *UPCASTERS) if name_of(t) in names)


def _kind(e: EventRecord) -> ChangeKind | None:
    name, action = name_of(e.type), e.payload.get("action")
    return next((k for k in KINDS if k.event == name and k.action in (None, action)), None)


def _responsible(e: EventRecord) -> Responsible:
    return Responsible(seq=e.seq, id=e.id, type=e.type, occurred_at=e.occurred_at, actor=e.actor)


class _Explanations:
    """The events that explain others' changes, indexed: the operator action recorded with a change
    (it causes, or is caused by, the event that makes it; a correction explains the supersession of
    its target) and the conflict behind a supersession."""

    def __init__(self, events: Sequence[EventRecord]) -> None:
        self._actions: dict[str, EventRecord] = {}
        """Action id → the action (what it caused follows from it)."""
        self._recording: dict[str, list[EventRecord]] = {}
        """Event id → the actions caused by it (they record who made its change)."""
        self._corrections: dict[str, list[EventRecord]] = {}
        """Memory id → the operator's corrections of it (a supersession it asked for)."""
        self._losers: dict[str, list[EventRecord]] = {}
        for e in events:
            name = name_of(e.type)
            if name == "operator.action" and e.payload.get("action") in _EXPLAINS:
                self._actions[e.id] = e
                if e.causation_id:
                    self._recording.setdefault(e.causation_id, []).append(e)
                if e.payload.get("action") == "correct" and e.payload.get("target_id"):
                    self._corrections.setdefault(str(e.payload["target_id"]), []).append(e)
            elif name == "conflict.recorded":
                self._losers.setdefault(str(e.payload.get("loser_id")), []).append(e)

    def of(self, e: EventRecord) -> list[EventRecord]:
        """What explains ``e`` (never ``e`` itself), in stream order."""
        found = list(self._recording.get(e.id, []))
        if e.causation_id in self._actions:
            found.append(self._actions[e.causation_id])
        if name_of(e.type) == "memory.superseded":
            superseded = str(e.payload.get("memory_id"))
            found += [*self._corrections.get(superseded, []), *self._losers.get(superseded, [])]
        unique = {x.seq: x for x in found if x.seq != e.seq}
        return [unique[seq] for seq in sorted(unique)]


def changes(events: Sequence[EventRecord]) -> list[ChangeGroup]:
    """The changes ``events`` (in stream order) make, grouped by kind in :data:`KINDS` order."""
    explanations = _Explanations(events)
    grouped: dict[str, list[Change]] = {}
    for e in events:
        kind = _kind(e)
        if kind is None:
            continue
        target, summary = kind.describe(e)
        responsible = [e, *explanations.of(e)]
        grouped.setdefault(kind.kind, []).append(
            Change(
                target=target,
                workspace=e.workspace,
                summary=summary,
                events=[_responsible(x) for x in responsible],
            )
        )
    return [
        ChangeGroup(kind=k.kind, title=k.title, changes=grouped[k.kind]) for k in KINDS if k.kind in grouped
    ]


async def audit_diff(reads: EventReads, q: DiffQuery) -> AuditDiff:
    """What changed after ``q.from_`` up to ``q.to`` (in ``q.workspace`` when given)."""
    after, through = diff_points(q)
    rows = await reads.events_between(q.workspace, _tags(_NAMES), after, through, q.limit)
    events = event_records(rows)
    return AuditDiff(
        from_=q.from_,
        to=q.to,
        workspace=q.workspace,
        groups=changes(events),
        first_seq=events[0].seq if events else None,
        last_seq=events[-1].seq if events else None,
        truncated=len(events) >= q.limit,
    )
