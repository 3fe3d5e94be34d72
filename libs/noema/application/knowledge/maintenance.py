"""Upkeep of what agents know: the session-scoped hot tier (remember), consolidate (promote hot-tier
items worth keeping, merge near-duplicate facts, archive stale items), harmonize (reconcile beliefs
that diverged between agents) and a meeting's decisions recorded as facts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from noema.application.access import Caller, InsufficientMemoryPermission
from noema.application.knowledge.context import KnowledgeContext, domain_ref
from noema.application.knowledge.events import conflict_events, mention_event, superseded_event
from noema.application.knowledge.facts import FactOutcome, Facts
from noema.domain.dynamics import ACTIVATION_FLOOR, HALF_LIFE_DAYS
from noema.domain.hot_tier import (
    PROMOTE_IMPORTANCE,
    STALE_REASON,
    HotItem,
    decide_hot_group,
    group_equivalent,
    promotion,
)
from noema.domain.knowledge import FactView, clusters, compare, decide_conflict, equivalent, keeper
from noema.errors import OperationError
from noema.ids import derive_id, new_id
from noema.ports import Row
from noema_events import Event, MemoryCreated, MemoryCreatedPayload, OperatorAction, OperatorActionPayload

__all__ = ["DECISIONS_DOMAIN", "PROMOTE_IMPORTANCE", "ConsolidateReport", "HarmonizeReport", "Maintenance"]

DECISIONS_DOMAIN = "decisions"


@dataclass
class ConsolidateReport:
    """What consolidate changed (memory ids)."""

    promoted: list[dict[str, Any]] = field(default_factory=list)
    merged: list[dict[str, Any]] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    """Hot-tier items worth promoting into a domain the caller may not write (strict mode)."""


@dataclass
class HarmonizeReport:
    """What harmonize changed (memory and conflict ids)."""

    corroborated: list[dict[str, Any]] = field(default_factory=list)
    conflicts: list[dict[str, str]] = field(default_factory=list)


class Maintenance:
    """The hot tier, consolidate, harmonize and meeting decisions."""

    def __init__(self, ctx: KnowledgeContext, facts: Facts) -> None:
        self._ctx = ctx
        self._facts = facts

    async def remember(
        self,
        caller: Caller,
        session: str,
        content: str,
        *,
        domain: str | None = None,
        topic: str | None = None,
        importance: float | None = None,
    ) -> FactOutcome:
        """A session-scoped hot-tier item (the same item remembered again is mentioned instead)."""
        content, session = content.strip(), session.strip()
        if not content or not session:
            raise OperationError("session and content must not be empty")
        if importance is not None and not 0.0 <= importance <= 1.0:
            raise OperationError("importance must be between 0 and 1")
        ref = domain_ref(domain, None) if domain else None
        if ref is not None and await self._ctx.access_mode(caller.workspace) == "strict":
            await self._ctx.require(caller, ref.key, "write", "remembering into a domain")
        now = self._ctx.clock()
        for item in await self._ctx.reads.hot_items(caller.workspace, caller.agent, session):
            if equivalent(item.content, content):
                await self._ctx.publish(
                    [mention_event(caller.workspace, caller.actor, item, "stated", (), now)]
                )
                return FactOutcome("mentioned", item.id, ref.key if ref else "", topic or "")
        memory_id = new_id()
        await self._ctx.publish(
            [
                MemoryCreated(
                    id=derive_id("memory.created", memory_id),
                    workspace=caller.workspace,
                    mind=caller.agent,
                    occurred_at=now,
                    correlation_id=memory_id,
                    actor=caller.actor,
                    payload=MemoryCreatedPayload(
                        memory_id=memory_id,
                        half_life_days=HALF_LIFE_DAYS,
                        activation_floor=ACTIVATION_FLOOR,
                        kind="episodic",
                        epistemic_kind="memory",
                        content=content,
                        domain=ref.key if ref else None,
                        topic=topic.strip().lower() if topic else None,
                        repo=ref.repo if ref else None,
                        importance=0.5 if importance is None else importance,
                        channel="system",
                        source=caller.agent,
                        session=session,
                        tier="hot",
                    ),
                )
            ]
        )
        return FactOutcome("remembered", memory_id, ref.key if ref else "", topic or "")

    async def consolidate(
        self, caller: Caller, domain: str | None = None, *, stale_after: timedelta = timedelta(days=1)
    ) -> ConsolidateReport:
        """Promote hot-tier items worth keeping to facts, merge near-duplicate facts (the kept one
        records every merged one; they stay, superseded by it), archive stale hot-tier items."""
        report = ConsolidateReport()
        key = domain_ref(domain, None).key if domain else None
        now = self._ctx.clock()
        await self._consolidate_hot_tier(caller, key, now, stale_after, report)
        await self._merge_near_duplicates(caller, key, now, report)
        return report

    async def _consolidate_hot_tier(
        self,
        caller: Caller,
        key: str | None,
        now: datetime,
        stale_after: timedelta,
        report: ConsolidateReport,
    ) -> None:
        """Promote the hot-tier items worth keeping (important, or mentioned again) to facts; archive
        the others once stale (:mod:`noema.domain.hot_tier` decides, group by group)."""
        for group in group_equivalent(await self._hot_tier(caller, key)):
            match decide_hot_group(group, now, stale_after).action:
                case "promote":
                    await self._promote(caller, group, now, report)
                case "archive":
                    await self._ctx.publish(_archived(caller, group, now))
                    report.archived += [i.id for i in group]
                case "leave":
                    pass  # until a later consolidate finds it stale, or it is mentioned again

    async def _hot_tier(self, caller: Caller, key: str | None) -> list[HotItem]:
        """The active hot-tier items of domain ``key`` (every domain if ``None``) in stream order."""
        # An agent consolidates its own hot tier; an operator every agent's.
        rows = await self._ctx.reads.hot_tier(
            caller.workspace, key, None if caller.operator else caller.agent
        )
        return [_hot_item(r) for r in rows]

    async def _promote(
        self, caller: Caller, group: Sequence[HotItem], now: datetime, report: ConsolidateReport
    ) -> None:
        """The group's fact proposed (or mentioned), and its items superseded by it; skipped where
        the caller may not write the fact's domain."""
        fact = promotion(group)
        try:
            outcome = await self._facts.propose_fact(
                caller,
                fact.domain,
                fact.topic,
                fact.content,
                source_observation_ids=fact.source_observation_ids,
                mind=fact.mind,
            )
        except InsufficientMemoryPermission as exc:
            report.skipped.append({"hot_id": group[0].id, "reason": str(exc)})
            return
        await self._ctx.publish(
            [
                superseded_event(
                    caller.workspace,
                    caller.actor,
                    FactView(i.id, i.content, None, 0.0, i.created_at, 0, agent=i.mind),
                    outcome.memory_id,
                    "promoted to a fact",
                    now,
                )
                for i in group
            ]
        )
        report.promoted.append(
            {
                "hot_id": group[0].id,
                "hot_ids": [i.id for i in group],
                "fact_id": outcome.memory_id,
                "outcome": outcome.outcome,
            }
        )

    async def _merge_near_duplicates(
        self, caller: Caller, key: str | None, now: datetime, report: ConsolidateReport
    ) -> None:
        """Merge each cluster of near-duplicate current facts into its keeper (the merged ones stay,
        superseded by it), in the domains the caller may maintain."""
        facts = await self._facts_by_domain(caller.workspace, key, now)
        for group_facts in (await self._maintainable(caller, facts)).values():
            for group in clusters(group_facts):
                kept = keeper(group)
                merged = [f for f in group if f.id != kept.id]
                sources = sorted({s for f in merged for s in f.sources})
                events: list[Event] = [
                    mention_event(
                        caller.workspace,
                        caller.actor,
                        kept,
                        "stated",
                        sources,
                        now,
                        merged_from=[f.id for f in merged],
                        reason="merged near-duplicates",
                        mentions=len(merged),
                    )
                ]
                events += [
                    superseded_event(caller.workspace, caller.actor, f, kept.id, "merged near-duplicate", now)
                    for f in merged
                ]
                await self._ctx.publish(events)
                report.merged.append({"kept": kept.id, "merged": [f.id for f in merged]})

    async def _maintainable(
        self, caller: Caller, facts: dict[str, list[FactView]]
    ) -> dict[str, list[FactView]]:
        """The domains whose facts the caller may merge or supersede: in strict mode an agent needs
        write on the domain (operators may maintain every domain)."""
        if caller.operator or await self._ctx.access_mode(caller.workspace) != "strict":
            return facts
        allowed = await self._ctx.access_control.writable(caller, facts)
        return {d: f for d, f in facts.items() if d in allowed}

    async def _facts_by_domain(
        self, workspace: str, domain: str | None, at: datetime
    ) -> dict[str, list[FactView]]:
        """Current facts (active, not expired at ``at``) by domain: an expired fact neither absorbs
        merged ones nor wins a conflict."""
        out: dict[str, list[FactView]] = {}
        for fact in await self._ctx.reads.current_facts(workspace, at=at, domain=domain, long_only=True):
            out.setdefault(fact.domain, []).append(fact)
        return out

    async def harmonize(self, caller: Caller, domain: str | None = None) -> HarmonizeReport:
        """Reconcile beliefs that diverged between agents: the same statement held by several agents
        becomes one corroborated fact (confidence raised once per corroborating agent); contradicting
        statements of different agents are decided by the conflict rules and recorded as conflicts."""
        report = HarmonizeReport()
        key = domain_ref(domain, None).key if domain else None
        now = self._ctx.clock()
        domains = await self._maintainable(caller, await self._facts_by_domain(caller.workspace, key, now))
        for facts in domains.values():
            gone: set[str] = set()
            for i, a in enumerate(facts):
                for b in facts[i + 1 :]:
                    if a.agent == b.agent or a.id in gone or b.id in gone:
                        continue
                    relation = compare(a.content, b.content, same_topic=a.topic == b.topic)
                    if relation == "same":
                        kept = keeper((a, b))
                        other = b if kept is a else a
                        await self._ctx.publish(
                            [
                                mention_event(
                                    caller.workspace,
                                    caller.actor,
                                    kept,
                                    other.veracity,
                                    other.sources,
                                    now,
                                    merged_from=[other.id],
                                    reason=f"corroborated by {other.agent}",
                                ),
                                superseded_event(
                                    caller.workspace,
                                    caller.actor,
                                    other,
                                    kept.id,
                                    f"corroborates {kept.id}",
                                    now,
                                ),
                            ]
                        )
                        gone.add(other.id)
                        report.corroborated.append(
                            {"kept": kept.id, "merged": [other.id], "agents": [a.agent, b.agent]}
                        )
                    elif relation == "contradicts":
                        verdict = decide_conflict(b, a) if b.seq > a.seq else decide_conflict(a, b)
                        events = conflict_events(
                            caller.workspace,
                            verdict,
                            domain=a.domain or None,
                            topic=verdict.loser.topic or None,
                            actor=caller.actor,
                            now=now,
                            cause=verdict.loser.id,
                            rule=f"harmonize/{verdict.rule}",
                            detail=f"{verdict.detail}; {verdict.winner.agent} vs {verdict.loser.agent}",
                        )
                        await self._ctx.publish(events)
                        gone.add(verdict.loser.id)
                        report.conflicts.append(
                            {"winner": verdict.winner.id, "loser": verdict.loser.id, "rule": verdict.rule}
                        )
        return report

    async def record_meeting_decisions(
        self, caller: Caller, meeting: str, decisions: Sequence[str], *, repo: str | None = None
    ) -> list[FactOutcome]:
        """Each decision becomes a fact in the ``decisions`` domain. ``"topic: text"`` names the
        decision's topic (a later decision on the same topic supersedes it); otherwise the topic is
        the meeting and the decision's position."""
        meeting = meeting.strip()
        if not meeting or not decisions:
            raise OperationError("a meeting name and at least one decision are needed")
        outcomes = []
        for n, text in enumerate(decisions, start=1):
            head, sep, rest = text.partition(":")
            if sep and rest.strip() and 0 < len(head.strip()) <= 60 and " " not in head.strip():
                topic, content = head.strip(), rest.strip()
            else:
                topic, content = f"{meeting} #{n}", text
            outcomes.append(
                await self._facts.propose_fact(
                    caller, DECISIONS_DOMAIN, topic, content, memory_type="decision", repo=repo
                )
            )
        return outcomes


def _hot_item(row: Row) -> HotItem:
    """A hot-tier row (:meth:`noema.ports.FactReads.hot_tier`) as the domain reads it."""
    return HotItem(
        id=row["id"],
        mind=row["mind"],
        session=row["session"],
        content=row["content"],
        domain=row["domain"],
        topic=row["topic"],
        importance=row["importance"],
        mention_count=row["mention_count"],
        created_at=row["created_at"],
        source_observation_ids=tuple(row["source_observation_ids"]),
    )


def _archived(caller: Caller, group: Sequence[HotItem], now: datetime) -> list[Event]:
    """Each stale item of the group archived (correlated with the group's first item)."""
    return [
        OperatorAction(
            id=derive_id("consolidate.archive", i.id),
            workspace=caller.workspace,
            mind=i.mind,
            occurred_at=now,
            correlation_id=group[0].id,
            actor=caller.actor,
            payload=OperatorActionPayload(
                action="archive", target_id=i.id, reason=f"consolidate: {STALE_REASON}"
            ),
        )
        for i in group
    ]
