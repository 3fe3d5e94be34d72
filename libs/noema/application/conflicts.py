"""The conflicts worker's decision: each proposed fact settled against the current facts of its
slot, in stream order, over the read model and the event stream (ports), without any transport.
The rules are told in :mod:`noema_conflicts.service`; the NATS consumer around it
(:class:`noema.runtime.consumer.EventConsumer`, one fact at a time) decodes, acks and dead-letters.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Protocol

import structlog

from noema.application.deliveries import Delivered
from noema.application.knowledge import conflict_events, mention_event, superseded_event
from noema.domain.knowledge import Verdict, decide_conflict, slot_relation
from noema.ids import derive_id
from noema.ports import EventSink, FactReads, Sealer
from noema.topology import Topology
from noema_events import Event, FactProposed

__all__ = ["ACTOR", "CatchUp", "Settling"]

log = structlog.get_logger("noema.conflicts")
ACTOR = "conflicts"


class CatchUp(Protocol):
    """How far the read model the facts are read from has come
    (:class:`noema.adapters.catch_up.ReadModelCatchUp`; in memory the read model applies as the
    stream stores, so there is nothing to wait for)."""

    async def workspace_last_seq(self, workspace: str) -> int:
        """The stream sequence of the last event stored for ``workspace`` (0: none)."""
        ...

    async def caught_up(self, seq: int) -> None:
        """Return once the read model has applied the stream through ``seq``; raise
        :class:`TimeoutError` when it does not in time."""
        ...


class Settling:
    """Decides each proposed fact against its slot, in stream order."""

    def __init__(
        self,
        facts: FactReads,
        publisher: EventSink,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        catch_up: CatchUp | None = None,
        fence: Callable[[], Awaitable[None]] | None = None,
        sealer: Sealer | None = None,
        topology: Topology | None = None,
        partition: int | None = None,
    ) -> None:
        self._facts = facts
        self._publisher = publisher
        self._clock = clock
        self._catch_up = catch_up
        # Raises once this instance's claim is lost (noema.runtime.claims): checked before publishing.
        self._fence = fence
        self._sealer = sealer
        self._topology = topology
        self._partition = partition  # None: every workspace's facts
        self._published_seq = 0

    async def decide(self, ev: FactProposed) -> list[Event]:
        """The events that settle ``ev`` against its slot (none when nothing conflicts)."""
        p = ev.payload
        involved = [p.memory_id, p.supersedes or p.memory_id]
        by_id = await self._facts.facts_with_status(involved)
        new_row = by_id.get(p.memory_id)
        if new_row is None or new_row[1] != "active":
            return []  # already settled (a redelivery)
        new = new_row[0]
        now = self._clock()
        events: list[Event] = []

        def settle(verdict: Verdict) -> list[Event]:
            return conflict_events(
                ev.workspace, verdict, domain=p.domain, topic=p.topic, actor=ACTOR, now=now, cause=ev.id
            )

        old_row = by_id.get(p.supersedes) if p.supersedes else None
        if old_row is not None and old_row[1] == "active":
            events += settle(decide_conflict(new, old_row[0], explicit=True))
        if p.valid_until is not None and p.valid_until <= ev.occurred_at:
            return events  # expired on arrival: it contends for nothing
        slot = await self._facts.slot_rivals(
            ev.workspace, p.domain, p.topic, before_seq=new.seq, exclude=involved, at=ev.occurred_at
        )
        for other in slot:
            relation = slot_relation(new.content, other.content)
            if relation == "coexist":
                continue
            if relation == "mention":
                events += [
                    superseded_event(ev.workspace, ACTOR, new, other.id, "same fact as an active one", now),
                    mention_event(
                        ev.workspace,
                        ACTOR,
                        other,
                        p.veracity,
                        new.sources,
                        now,
                        merged_from=[new.id],
                        reason="mentioned again",
                        event_id=derive_id("fact.mentioned", new.id, other.id),
                    ),
                ]
                break
            v = decide_conflict(new, other)
            events += settle(v)
            if v.loser.id == new.id:
                break
        return events

    def _ours(self, workspace: str) -> bool:
        """Whether this decides ``workspace``'s facts (its partition's, or all)."""
        if self._partition is None or self._topology is None:
            return True
        return self._topology.partition(workspace) == self._partition

    async def __call__(self, batch: Sequence[Delivered[Event]], through: int) -> None:
        """Decide each fact in order; decisions are stored before this returns."""
        facts = [d.event for d in batch]
        if self._sealer is not None:
            facts = await self._sealer.open(facts)  # content comes sealed (docs/privacy.md)
        for delivered, ev in zip(batch, facts, strict=True):
            if isinstance(ev, FactProposed) and self._ours(ev.workspace):
                await self._settle(delivered.seq, ev)

    async def _settle(self, seq: int, ev: FactProposed) -> None:
        if self._catch_up is not None:
            # Everything of its workspace stored before this fact was delivered — including
            # decisions another replica (or this one before a restart) published — must be in
            # the read model; other workspaces' events are not waited for.
            last = await self._catch_up.workspace_last_seq(ev.workspace)
            await self._catch_up.caught_up(max(seq, self._published_seq, last))
        events = await self.decide(ev)
        if events:
            if self._fence is not None:
                await self._fence()
            self._published_seq = max(self._published_seq, await self._publisher.publish(events))
            log.info("fact settled", memory_id=ev.payload.memory_id, events=[e.type for e in events])
