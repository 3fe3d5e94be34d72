"""The hot tier's consolidation as pure functions: which session-scoped items say the same thing, and
what becomes of each group of them — promoted to a fact, archived as stale, or left as it is.

The application (:meth:`noema.application.knowledge.maintenance.Maintenance.consolidate`) reads the
hot tier, asks these functions, and publishes what they decide.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from noema.domain.knowledge import equivalent

__all__ = [
    "PROMOTE_IMPORTANCE",
    "STALE_REASON",
    "HotItem",
    "HotVerdict",
    "Promotion",
    "decide_hot_group",
    "group_equivalent",
    "promotion",
]

PROMOTE_IMPORTANCE = 0.6
"""A hot-tier item at least this important is promoted to a fact by consolidate."""
STALE_REASON = "stale hot-tier item"


@dataclass(frozen=True)
class HotItem:
    """One active hot-tier item, as consolidate reads it."""

    id: str
    mind: str
    session: str | None
    content: str
    domain: str | None
    topic: str | None
    importance: float
    mention_count: int
    created_at: datetime
    source_observation_ids: tuple[str, ...] = ()


def group_equivalent(items: Sequence[HotItem]) -> list[list[HotItem]]:
    """The items grouped with the equivalent ones of the same mind and session (the same item
    remembered twice before the first was projected is two rows).

    An item joins the first group, in order of creation, whose first item it is equivalent to, else
    starts a group. Groups come in the order of their first item; each holds its items in input
    order. Only the groups of the item's own (mind, session) are compared with it.
    """
    groups: list[list[HotItem]] = []
    by_session: dict[tuple[str, str | None], list[list[HotItem]]] = {}
    for item in items:
        session = by_session.setdefault((item.mind, item.session), [])
        group = next((g for g in session if equivalent(g[0].content, item.content)), None)
        if group is None:
            group = []
            session.append(group)
            groups.append(group)
        group.append(item)
    return groups


@dataclass(frozen=True)
class HotVerdict:
    """What consolidate does with one group, and why."""

    action: Literal["promote", "archive", "leave"]
    reason: str


def decide_hot_group(group: Sequence[HotItem], now: datetime, stale_after: timedelta) -> HotVerdict:
    """Promote a group worth keeping (one of its items important enough, or mentioned twice in all);
    archive the others once the latest of their items is older than ``stale_after``; leave the rest."""
    importance = max(i.importance for i in group)
    if importance >= PROMOTE_IMPORTANCE:
        return HotVerdict("promote", f"importance {importance:g} reaches {PROMOTE_IMPORTANCE:g}")
    mentions = sum(i.mention_count for i in group)
    if mentions >= 2:
        return HotVerdict("promote", f"mentioned {mentions} times")
    if now - max(i.created_at for i in group) > stale_after:
        return HotVerdict("archive", STALE_REASON)
    return HotVerdict("leave", "not yet worth a fact, not yet stale")


@dataclass(frozen=True)
class Promotion:
    """The fact a promoted group becomes."""

    mind: str
    domain: str
    topic: str
    content: str
    source_observation_ids: list[str]
    """Every item's sources, then the items themselves."""


def promotion(group: Sequence[HotItem]) -> Promotion:
    """The fact of a group: its first item's content and mind, the first domain and topic an item
    names (else ``general``, and the session)."""
    head = group[0]
    return Promotion(
        mind=head.mind,
        domain=next((i.domain for i in group if i.domain), None) or "general",
        topic=next((i.topic for i in group if i.topic), None) or f"session {head.session}",
        content=head.content,
        source_observation_ids=[
            *(s for i in group for s in i.source_observation_ids),
            *(i.id for i in group),
        ],
    )
