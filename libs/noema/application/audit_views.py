"""What the audit questions take and return: ``why`` (the chain of events behind an id) and
``audit diff`` (what changed between two points of the stream), as msgspec Structs.

As with :mod:`noema.application.views`, the HTTP API decodes its query strings into the queries and
answers with the records (they are its OpenAPI schemas), and ``noemactl`` builds the same queries
with :func:`~noema.application.views.parse` and prints the same records as JSON.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from noema.application.views import EventRecord, Name
from noema.stream_points import POINT_FORMS

__all__ = [
    "POINT_FORMS",
    "POINT_PATTERN",
    "AuditDiff",
    "Change",
    "ChangeGroup",
    "DiffQuery",
    "Responsible",
    "StepKind",
    "Subject",
    "Why",
    "WhyQuery",
    "WhyStep",
]

POINT_PATTERN = (
    "^([0-9]{1,18}|[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])[Tt ]([01][0-9]|2[0-3]):[0-5][0-9]"
    "(:[0-5][0-9](\\.[0-9]{1,9})?)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9]))$"
)
"""The points the OpenAPI document declares: every one is read, and the server reads a few more
(days past the 28th, which a pattern cannot tell from impossible ones; longer sequences). Only the
document has it: the server's own refusal (:func:`noema.application.changes.stream_point`) says
what to write."""
Point = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=64,
        description=f"A point: {POINT_FORMS}.",
        extra_json_schema={"pattern": POINT_PATTERN},
    ),
]
StepKind = Literal["event", "observation", "recall", "cause"]
Subject = Literal["event", "memory", "fact", "policy", "observation", "recall", "reference"]


class _In(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of inputs: unknown fields are refused."""


class _Out(msgspec.Struct, frozen=True, kw_only=True):
    """Base of outputs."""


# --- why ----------------------------------------------------------------------------------------


class WhyQuery(_In, frozen=True, kw_only=True):
    """Where to look for the id (default: the one workspace that has it), and how much to show."""

    workspace: Name | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=5_000)] = 500
    """At most this many events name the id, and at most this many more follow from them."""


class WhyStep(_Out, frozen=True, kw_only=True):
    """One step of an id's history: an event of the audit copy, or what an event names as its cause
    without being one of them (``observation``, ``recall``: the observation stream carries those;
    ``cause``: an id nothing recorded explains)."""

    id: str
    """The event's id, or the id its effects name as their cause."""
    kind: StepKind
    parent: str | None
    """The id of the step it follows from; None for a first cause."""
    link: Literal["causation", "correlation"] | None
    """How the parent was found: the step's causation id names it, or names the correlation the
    parent starts (for a cause that is no event: the correlation of its first effect)."""
    event: EventRecord | None
    """The event, with every score and decision its payload records (None for a cause that is none)."""
    decision: dict[str, Any] | None
    """An observation's or recall proposal's attention decision (admitted, score, components,
    reason), with the ``event_id`` and ``seq`` of the ``attention.decided`` that recorded it."""


class Why(_Out, frozen=True, kw_only=True):
    """The chain of events behind an id, in stream order: the events that name it, the causes they
    follow from and the events they caused. ``parent`` links make it a tree."""

    id: str
    """The id asked about (a memory's unique prefix given: the full id)."""
    subject: Subject
    """What the id is, as the events tell."""
    workspace: str
    steps: list[WhyStep]
    truncated: bool
    """The limit left events out (the first ones in stream order are shown)."""


# --- audit diff ---------------------------------------------------------------------------------


class DiffQuery(_In, frozen=True, kw_only=True):
    """The changes after ``from`` up to ``to`` (included): each a stream sequence or a time with its
    zone (a time is compared with each event's ``occurred_at``). A ``from`` at or after ``to`` has
    nothing between them."""

    from_: Point = msgspec.field(name="from")
    to: Point
    workspace: Name | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 1_000
    """At most this many change events are read (``truncated`` says so; go on from ``last_seq``)."""


class Responsible(_Out, frozen=True, kw_only=True):
    """An event that made or explains a change."""

    seq: int
    id: str
    type: str
    occurred_at: datetime
    actor: str


class Change(_Out, frozen=True, kw_only=True):
    """One change: what it touched, what it did, and the events responsible (the one that made it
    first, then those that explain it: an operator's action, the conflict that decided)."""

    target: str
    """A memory, fact or policy id, ``role on domain`` for a grant, a domain key or a workspace."""
    workspace: str
    summary: str
    events: list[Responsible]


class ChangeGroup(_Out, frozen=True, kw_only=True):
    """The changes of one kind, in stream order."""

    kind: str
    """``memory.created``, ``memory.retracted``, ``memory.superseded``, ``memory.archived``,
    ``memory.restored``, ``fact.proposed``, ``fact.mentioned``, ``conflict.recorded``,
    ``policy.proposed``, ``policy.superseded``, ``domain.created``, ``grant.changed`` or
    ``access_mode.changed``."""
    title: str
    changes: list[Change]


class AuditDiff(_Out, frozen=True, kw_only=True):
    """What changed after ``from`` up to ``to``, grouped by kind (kinds without changes left out)."""

    from_: str = msgspec.field(name="from")
    to: str
    workspace: str | None
    groups: list[ChangeGroup]
    first_seq: int | None
    """The first and last stream sequences of the events read (None: nothing changed)."""
    last_seq: int | None
    truncated: bool
