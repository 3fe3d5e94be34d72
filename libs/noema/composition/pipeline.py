"""The whole pipeline in memory (:class:`InMemoryPipeline`): the workers' decisions — attend,
retrieve, conflicts, embed, the projector — over the in-memory observation stream, event stream and
read model, each reading the streams from a cursor as its durable consumer reads JetStream, run
until nothing is left to do (the projector's decision applies what the event stream stores as it
stores it, so a read after a write sees it at once), and decay ticks when asked; the facade it
builds (:meth:`InMemoryPipeline.noema`) reads as of a past point too, over the read model's history
and the times the stream stored each event. The same decisions run over NATS and PostgreSQL inside
their consumers (:class:`noema.runtime.consumer.EventConsumer`,
:class:`noema.runtime.consumer.ProjectionConsumer`), so a scenario run here and against the servers
checks one behaviour twice (tests/contract/test_pipeline_scenarios.py) — as eventsourcing's
in-memory runner and FastStream's ``TestNatsBroker`` stand in for the servers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from noema.adapters.memory import InMemoryKnowledge, InMemoryReads
from noema.adapters.memory.attend_log import InMemoryAttendLog
from noema.adapters.memory.stream import InMemoryEventStream
from noema.adapters.memory.voices import InMemoryVoices
from noema.application.attend import Attention
from noema.application.conflicts import Settling
from noema.application.deliveries import Delivered
from noema.application.embed import Embedding
from noema.application.facade import Noema
from noema.application.knowledge import Knowledge
from noema.application.projector import Projecting
from noema.application.retrieve import Recalling
from noema.application.search import Recall
from noema.application.upkeep import decay_tick
from noema.domain.attention import AttentionConfig
from noema.errors import Kind, NoemaError
from noema.observations import Stored
from noema.ports import Embedder, Projected
from noema.stream_points import StreamPoint
from noema.topology import Topology
from noema_events import Event, FactProposed, MemoryCreated, ObservationRecorded, RecallProposed

__all__ = ["DeadLetter", "InMemoryDeadLetters", "InMemoryPipeline", "Point"]

E = TypeVar("E", bound=Event)


def _utcnow() -> datetime:
    return datetime.now(UTC)


class _Opened:
    """The in-memory stream as embed's sink: nothing is sealed in memory, so opening is a no-op."""

    def __init__(self, stream: InMemoryEventStream) -> None:
        self._stream = stream

    async def publish(self, events: Sequence[Event]) -> int:
        return await self._stream.publish(events)

    async def opened(self, events: Sequence[E]) -> list[E]:
        return list(events)


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """An event the projector skipped: where it was stored, why, and of which kind."""

    seq: int
    reason: str
    kind: str


class InMemoryDeadLetters:
    """The dead-letter stream in memory (the projector's :class:`noema.application.projector.Rejections`):
    each sequence kept once, as the dead-letter ids make JetStream keep it."""

    def __init__(self) -> None:
        self.letters: list[DeadLetter] = []

    async def dead_letter(self, seq: int, reason: str, kind: str) -> None:
        if all(letter.seq != seq for letter in self.letters):
            self.letters.append(DeadLetter(seq, reason, kind))


@dataclass(frozen=True, slots=True)
class Point:
    """The point a view as of the past reflects (:class:`noema.ports.PastPoint`, as
    :class:`noema.composition.asof.AsOf` is over the servers): the state after ``seq``, read at ``time``."""

    seq: int
    time: datetime

    def describe(self) -> dict[str, Any]:
        return {"seq": self.seq, "time": self.time.isoformat()}


class _NotInStream(NoemaError, LookupError):
    """The point names no state the stream holds: ``not_found``, as
    :class:`noema.composition.asof.PointNotInStream` (which this module does not import: it loads nats-py)."""

    kind = Kind.NOT_FOUND


class _Candidates:
    """The observation stream in memory: observations and recall proposals, each id stored once
    (as ``Nats-Msg-Id`` makes JetStream store it); sequence = index + 1."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._ids: set[str] = set()

    def add(self, event: Event) -> None:
        if event.id not in self._ids:
            self._ids.add(event.id)
            self.events.append(event)

    async def propose(self, proposals: Sequence[RecallProposed]) -> None:
        for p in proposals:
            self.add(p)

    async def send(self, obs: ObservationRecorded) -> Stored:
        """As :class:`noema.client.JetStreamObservations` publishes: once per id."""
        duplicate = obs.id in self._ids
        self.add(obs)
        seq = next(i for i, ev in enumerate(self.events, 1) if ev.id == obs.id)
        return Stored(seq, duplicate)


class InMemoryPipeline:
    """Attend, retrieve (over ``recall``, by default the in-memory voices; none unless
    ``retrieve``), conflicts and embed (given an ``embedder``) over the in-memory streams; :meth:`run`
    until idle, :meth:`decay` for a tick."""

    def __init__(
        self,
        config: AttentionConfig | None = None,
        *,
        embedder: Embedder | None = None,
        recall: Recall | None = None,
        retrieve: bool = True,
        clock: Callable[[], datetime] = _utcnow,
        topology: Topology | None = None,
    ) -> None:
        self.clock = clock
        self.embedder = embedder
        self.knowledge = InMemoryKnowledge()
        """The read model (what the projector keeps)."""
        self.dead_letters = InMemoryDeadLetters()
        """What the projector skipped, with why."""
        self.projecting = Projecting(self.knowledge, self.dead_letters, 0)
        """The projector's decision, over the read model."""
        self.stream = InMemoryEventStream(topology=topology, projector=self._project)
        """The event stream, projected as it stores."""
        self.records = InMemoryReads(self.knowledge.tables, clock)
        """The memory records and the operators' reads of the read model."""
        self._candidates = _Candidates()
        self.attention = Attention(
            InMemoryAttendLog(self.stream, self._candidates.events), config or AttentionConfig(), clock
        )
        self.settling = Settling(self.knowledge, self.stream, clock)
        self.embedding = None if embedder is None else Embedding(_Opened(self.stream), embedder, clock)
        self.voices = InMemoryVoices(self.knowledge.tables, clock)
        """The recall voices over the read model (retrieve's and searches')."""
        if recall is None and retrieve:
            recall = Recall(self.voices, embedder)
        self.recalling = None if recall is None else Recalling(recall, self._candidates, clock)
        self._read: dict[str, int] = {"attend": 0, "retrieve": 0, "conflicts": 0, "embed": 0}
        """Each worker's cursor: the last sequence it has decided."""
        self.stored_at: list[datetime] = []
        """The time the stream stored each event (sequence = index + 1), by the pipeline's clock,
        as JetStream keeps a message's time: what a read as of a time resolves against."""

    async def _project(self, stored: Sequence[Projected]) -> None:
        """What the stream stored, handed to the projector as its consumer hands it a batch."""
        now = self.clock()
        self.stored_at.extend(now for _ in range(stored[-1].seq - len(self.stored_at)))
        await self.projecting([Delivered(p.seq, p) for p in stored], stored[-1].seq)

    @property
    def candidates(self) -> list[Event]:
        """The observation stream: observations and recall proposals, in order."""
        return self._candidates.events

    async def observe(self, observation: ObservationRecorded) -> None:
        """Store an observation on the observation stream (once per id)."""
        self._candidates.add(observation)

    async def run(self, max_rounds: int = 100) -> int:
        """Let every worker decide what its stream holds past its cursor, again until none has
        anything left; returns the rounds it took."""
        for rounds in range(1, max_rounds + 1):
            moved = await self._attend()
            moved |= await self._retrieve()
            moved |= await self._on_events("conflicts", self.settling, (FactProposed,))
            if self.embedding is not None:
                moved |= await self._on_events("embed", self.embedding, (MemoryCreated, FactProposed))
            if not moved:
                return rounds
        raise RuntimeError(f"the pipeline did not settle in {max_rounds} rounds")

    def _new(self, worker: str, events: Sequence[Event]) -> list[Delivered[Event]]:
        start = self._read[worker]
        self._read[worker] = len(events)
        return [Delivered(seq, ev) for seq, ev in enumerate(events[start:], start + 1)]

    async def _attend(self) -> bool:
        batch = self._new("attend", self.candidates)
        if not batch:
            return False
        mark = await self.attention.mark()
        fresh = [d for d in batch if d.seq > mark]
        good = [d for d in fresh if isinstance(d.event, ObservationRecorded | RecallProposed)]
        await self.attention(good, batch[-1].seq)  # type: ignore[arg-type]
        return True

    async def _retrieve(self) -> bool:
        if self.recalling is None:
            return False
        batch = [
            d for d in self._new("retrieve", self.candidates) if isinstance(d.event, ObservationRecorded)
        ]
        if batch:
            await self.recalling(batch, batch[-1].seq)
        return bool(batch)

    async def _on_events(
        self, worker: str, decide: Settling | Embedding, kinds: tuple[type[Event], ...]
    ) -> bool:
        batch = [d for d in self._new(worker, self.stream.events) if isinstance(d.event, kinds)]
        for d in batch:  # one at a time, as conflicts' consumer hands them (embed: chunk of one)
            await decide([d], d.seq)
        return bool(batch)

    def noema(self, decay_interval_s: float = 3600.0) -> Noema:
        """The application facade every surface calls, over this pipeline's streams and read model
        (what :class:`noema.composition.instance.Instance` is over the servers): observations
        recorded through it wait on the observation stream until :meth:`run`. Its
        :meth:`~noema.application.facade.Noema.as_of` views read the read model's history as of
        the point, with the clock pinned to the point's time, as the servers' views do."""

        async def load_embedder() -> Embedder | None:
            return self.embedder

        def facade(
            memories: InMemoryReads,
            knowledge: InMemoryKnowledge,
            voices: InMemoryVoices,
            clock: Callable[[], datetime],
            point: Point | None = None,
        ) -> Noema:
            return Noema(
                publisher=self.stream,
                memories=memories,
                knowledge=Knowledge(knowledge, self.stream, clock, appends=self.stream),
                voices=voices,
                observations=self._candidates,
                embedder=load_embedder,
                connected=lambda: True,
                decay_interval_s=decay_interval_s,
                clock=clock,
                point=point,
                as_of=view,
            )

        async def view(point: StreamPoint) -> Noema:
            at = self.resolve(point)
            tables = self.knowledge.tables.as_of(at.seq)
            pinned = lambda: at.time  # noqa: E731 - the view's "now"
            return facade(
                InMemoryReads(tables, pinned),
                InMemoryKnowledge(tables),
                InMemoryVoices(tables, pinned),
                pinned,
                at,
            )

        return facade(self.records, self.knowledge, self.voices, self.clock)

    def resolve(self, point: StreamPoint) -> Point:
        """The sequence and time ``point`` names, as :func:`noema.composition.asof.resolve` finds
        them on the stream: a time's sequence is the last event stored by then, a sequence's time
        the time it was stored; a point with no state is ``not_found``."""
        last = len(self.stored_at)
        if isinstance(point, datetime):
            now = self.clock()
            if point > now:
                raise _NotInStream(
                    f"as of {point.isoformat()}: that is in the future (now is {now.isoformat()}); "
                    f"write a past time or a sequence up to {last}"
                )
            seq = sum(1 for stored in self.stored_at if stored <= point)
            if seq == 0:
                raise _NotInStream(
                    f"as of {point.isoformat()}: the event stream had stored nothing by then; "
                    f"write a later time or a sequence from 1 to {last}"
                )
            return Point(seq, point)
        if not 1 <= point <= last:
            raise _NotInStream(
                f"as of seq {point}: the event stream ends at seq {last}; write a sequence from 1 to "
                f"{last}, or a past time with its zone (e.g. 2026-03-02T10:32:00Z)"
            )
        return Point(point, self.stored_at[point - 1])

    async def decay(self, at: datetime | None = None, interval: timedelta = timedelta(hours=1)) -> list[str]:
        """One decay tick at ``at`` (default: now), aligned down to ``interval``, as the decay worker
        ticks (noema_decay.service)."""
        seconds = interval.total_seconds()
        aligned = datetime.fromtimestamp((at or self.clock()).timestamp() // seconds * seconds, UTC)
        return await decay_tick(self.records, self.stream, aligned, since=aligned - interval)
