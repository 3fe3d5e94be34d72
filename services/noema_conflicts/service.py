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

from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime

from noema.adapters.catch_up import ReadModelCatchUp
from noema.adapters.jetstream import DeadLetters, EventPublisher
from noema.adapters.metrics import Metrics
from noema.adapters.postgres import migrate
from noema.adapters.postgres.claims import AdvisoryClaim
from noema.adapters.postgres.knowledge import PostgresKnowledge
from noema.adapters.postgres.tenancy import ALL_WORKSPACES
from noema.adapters.pull import durable_puller
from noema.application.conflicts import Settling
from noema.ports import EventSink, FactReads, Sealer
from noema.runtime.claims import ClaimedService
from noema.runtime.consumer import EventConsumer, JetStream
from noema.runtime.partitions import PartitionedService
from noema.runtime.settings import Located
from noema.runtime.wiring import PartitionConsumer, Pool, open_bus, open_pool, partitioned_workers, sealer
from noema.runtime.worker import PullWorker
from noema.topology import Topology
from noema_events import Event, FactProposed

__all__ = ["ConflictsHandler", "build"]

PARTITION_BATCH = 32
"""Facts fetched at once by a partition's consumer (decided one by one, in order; the other
partitions' facts in the batch are only acked)."""


class ConflictsHandler(EventConsumer[Event]):
    """The NATS consumer around :class:`noema.application.conflicts.Settling` (:attr:`settling`): one
    fact at a time, each acked once its decisions are stored; the projector, owner of the event
    stream, dead-letters what does not decode."""

    def __init__(
        self,
        pool: Pool | None,
        publisher: EventSink,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        wait_timeout: float = 60.0,
        js: JetStream | None = None,
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
        # Without a pool there is no projector to wait for: the read model (in memory) applies as
        # it stores.
        catch_up = None if pool is None else ReadModelCatchUp(pool, js, topology, wait_timeout)
        self.settling = Settling(
            facts,
            publisher,
            clock,
            catch_up=catch_up,
            fence=fence,
            sealer=sealer,
            topology=topology,
            partition=partition,
        )
        super().__init__("conflicts", self.settling, dead_letters, owns=False, one_by_one=True)

    async def decide(self, ev: FactProposed) -> list[Event]:
        """The events that settle ``ev`` against its slot (none when nothing conflicts)."""
        return await self.settling.decide(ev)


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
