"""Conflicts worker: every ``fact.proposed`` is checked against the current facts of its domain and
topic (requirements §7).

Only facts earlier in the stream are compared (a later one is settled when its own turn comes), so
the outcome follows stream order whatever the read model already holds. "Current" means active and
not expired at the proposal's ``occurred_at`` (never the wall clock, so the decision depends on the
event alone); an expired fact neither absorbs a restatement nor takes part in a conflict, and a
fact proposed already expired is compared with nothing (an explicit supersession still applies).
How the new fact relates to each one is :func:`noema.domain.knowledge.slot_relation`:

- ``mention`` (an equivalent statement): the new record is a duplicate; it is superseded by the
  existing one, which is mentioned again (confidence and mention_count rise).
- ``conflict`` (a contradiction: a differing value or negation about the same thing): decided by the
  rules of :func:`noema.domain.knowledge.decide_conflict` (explicit > veracity > confidence >
  recency); the loser is superseded and a ``conflict.recorded`` keeps both sides and the rule.
- ``coexist`` (another point about the topic): both stay active; nothing is recorded.

The worker is the single decider: its durable consumer delivers one fact at a time
(``max_ack_pending=1``, so replicas never decide concurrently), and before deciding it waits until
the read model has applied everything of the fact's workspace stored when the fact was delivered
(the last sequence on the workspace's subjects then), which includes every earlier decision about
it, its own or another replica's. A slot belongs to one workspace, so nothing another workspace
stores can change the decision, and a busy tenant's backlog does not hold up another's facts.
Two agents racing to write contradicting facts therefore get exactly one winner. Decision events have ids
derived from the facts involved, so a redelivered fact yields the same events, stored once.

With partitions (``NOEMA_PARTITIONS`` > 1) each partition has a consumer and a claim of its own,
shared among the instances (noema.runtime.partitions): the owner of partition p decides the facts of
p's workspaces, in stream order, and acks the others undecided. The event stream's subjects carry no
partition (the projector, replay and every reader use them as they are), so each partition's
consumer reads every ``fact.proposed`` and skips the others' — facts are a small share of the
events; observations, the bulk, are partitioned by the stream itself.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime

import asyncpg
import structlog
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from noema.adapters.jetstream import DeadLetters, EventPublisher, last_on_subject
from noema.adapters.metrics import Metrics
from noema.adapters.postgres import ReadModelProjection, migrate
from noema.adapters.postgres.claims import AdvisoryClaim
from noema.adapters.postgres.knowledge import PostgresKnowledge
from noema.adapters.postgres.tenancy import ALL_WORKSPACES
from noema.adapters.pull import durable_puller
from noema.application.knowledge import conflict_events, mention_event, superseded_event
from noema.domain.knowledge import Verdict, decide_conflict, slot_relation
from noema.ids import derive_id
from noema.ports import EventSink, FactReads, Sealer
from noema.runtime.claims import ClaimedService
from noema.runtime.partitions import PartitionedService
from noema.runtime.settings import Located
from noema.runtime.wiring import PartitionConsumer, open_bus, open_pool, partitioned_workers, sealer
from noema.runtime.worker import PullWorker, decode_each
from noema.topology import Topology
from noema_events import Event, FactProposed

__all__ = ["ConflictsHandler", "build"]

log = structlog.get_logger("noema.conflicts")
ACTOR = "conflicts"
PARTITION_BATCH = 32
"""Facts fetched at once by a partition's consumer (decided one by one, in order; the other
partitions' facts in the batch are only acked)."""


class ConflictsHandler:
    """Decides each proposed fact against its slot, in stream order."""

    def __init__(
        self,
        pool: asyncpg.Pool | None,
        publisher: EventSink,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        wait_timeout: float = 60.0,
        js: JetStreamContext | None = None,
        topology: Topology | None = None,
        dead_letters: DeadLetters | None = None,
        facts: FactReads | None = None,
        fence: Callable[[], Awaitable[None]] | None = None,
        sealer: Sealer | None = None,
        partition: int | None = None,
    ) -> None:
        if facts is None:
            assert pool is not None, "the facts are read from the pool's read model unless given"
            facts = PostgresKnowledge(pool)
        self._facts = facts
        # Raises once this instance's claim is lost (noema.runtime.claims): checked before publishing.
        self._fence = fence
        self._partition = partition  # None: every workspace's facts
        self._js = js
        self._dead_letters = dead_letters
        self._topology = topology
        self._pool = pool
        self._publisher = publisher
        self._sealer = sealer
        self._clock = clock
        self._wait_timeout = wait_timeout
        self._published_seq = 0
        self._position = ReadModelProjection()

    async def _caught_up(self, seq: int) -> None:
        """Wait until the projector has applied the stream through ``seq``."""
        if self._pool is None:
            return  # no projector to wait for: the read model (in memory) applies as it stores
        deadline = time.monotonic() + self._wait_timeout
        while True:
            async with self._pool.acquire() as conn:
                if await self._position.position(conn) >= seq:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the read model did not reach seq {seq} in {self._wait_timeout:.0f} s")
            await asyncio.sleep(0.02)

    async def _workspace_last_seq(self, workspace: str) -> int:
        """The stream sequence of the last event stored for ``workspace`` (0 without a stream)."""
        if self._js is None or self._topology is None:
            return 0
        t = self._topology
        last = await last_on_subject(self._js, t.event_stream, t.workspace_event_subjects(workspace))
        return 0 if last is None else last[0]

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
        """Whether this handler decides ``workspace``'s facts (its partition's, or all)."""
        if self._partition is None or self._topology is None:
            return True
        return self._topology.partition(workspace) == self._partition

    async def __call__(self, msgs: list[Msg]) -> None:
        """Decide each fact in order; decisions are stored before the fact is acked."""
        decoded, undecodable = decode_each(msgs)
        for msg, _ in undecodable:
            await msg.ack()  # the projector, owner of the event stream, dead-letters it
        facts = [ev for _, ev in decoded]
        if self._sealer is not None:
            facts = await self._sealer.open(facts)  # content comes sealed (docs/privacy.md)
        for (msg, _), ev in zip(decoded, facts, strict=True):
            if isinstance(ev, FactProposed) and self._ours(ev.workspace):
                # Everything of its workspace stored before this fact was delivered — including
                # decisions another replica (or this one before a restart) published — must be in
                # the read model; other workspaces' events are not waited for.
                last = await self._workspace_last_seq(ev.workspace)
                await self._caught_up(max(msg.metadata.sequence.stream, self._published_seq, last))
                events = await self.decide(ev)
                if events:
                    if self._fence is not None:
                        await self._fence()
                    self._published_seq = max(self._published_seq, await self._publisher.publish(events))
                    log.info("fact settled", memory_id=ev.payload.memory_id, events=[e.type for e in events])
            await msg.ack()

    async def reject(self, msg: Msg, reason: str, kind: str) -> None:
        """Dead-letter a fact that cannot be settled (it stays active, unsettled), and ack it."""
        if self._dead_letters is not None:
            await self._dead_letters.write(msg, reason, kind)
        await msg.ack()


async def build(
    settings: Located, stack: AsyncExitStack, *, metrics: Metrics | None = None
) -> ClaimedService | PartitionedService:
    """Connect, migrate, bind the durable ``conflicts`` consumer (fact.proposed events only)."""
    await migrate(settings.database_url, settings.db_schema)
    # Read-only; it settles facts of every workspace, so it sees them all under row security.
    # One more connection than it reads with: the claim's, held while this instance owns it.
    pool = await open_pool(
        settings, stack, "reader", app="noema-conflicts", workspace=ALL_WORKSPACES, max_size=3
    )
    nc, js, topology = await open_bus(settings, stack, "noema-conflicts")
    facts = topology.event_subject_for("*", "*", "fact.proposed")
    seals = sealer(pool)

    def handler(fence: Callable[[], Awaitable[None]], partition: int | None = None) -> ConflictsHandler:
        return ConflictsHandler(
            pool,
            EventPublisher(nc, topology, seals),
            sealer=seals,
            js=js,
            topology=topology,
            dead_letters=DeadLetters(js, topology, "conflicts", metrics),
            fence=fence,
            partition=partition,
        )

    if topology.partitioned:
        consumer = PartitionConsumer(
            topology.event_stream,
            lambda _: facts,
            PARTITION_BATCH,
            ack_wait=120.0,
            max_ack_pending=PARTITION_BATCH,
        )
        return partitioned_workers(
            settings, nc, pool, "conflicts", consumer, lambda p, f: handler(f, p), metrics
        )
    claim = AdvisoryClaim(pool, settings.db_schema, "conflicts")

    async def start() -> PullWorker:
        puller = await durable_puller(
            nc,
            topology.event_stream,
            topology.durable("conflicts"),
            facts,
            1,
            ack_wait=120.0,
            max_ack_pending=1,
        )
        return PullWorker("conflicts", puller, handler(claim.check), 1, metrics=metrics)

    return ClaimedService("conflicts", nc, claim, start)
