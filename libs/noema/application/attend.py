"""Attend's decision: one batch of candidates (observations and recall proposals) is one attention
cycle, decided over what the streams hold (:class:`AttendLog`), without any transport.

The rules this keeps (marks, fences, atomic cycles, partitions) are told in :mod:`noema_attend.worker`
and docs/reliability.md ("Claims, failover and fencing"); the NATS consumer around it
(:class:`noema.runtime.consumer.EventConsumer`) decodes, validates subjects, dead-letters, acks and
carries the traces.
"""

from __future__ import annotations

from collections import ChainMap, OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Protocol, TypeVar

import structlog

from noema.application.deliveries import Delivered
from noema.domain.attention import AttentionConfig, decide_cycle, working_memory_of
from noema.domain.knowledge import WorkingMemory
from noema.ports import ConcurrentWrite, Sealer
from noema.topology import MAX_ATOMIC_BATCH
from noema_events import (
    AttentionDecided,
    Event,
    EventDecodeError,
    ObservationRecorded,
    RecallProposed,
    WorkingMemoryUpdated,
)

__all__ = [
    "FENCE_ATTEMPTS",
    "MAX_ATOMIC_BATCH",
    "MAX_MINDS",
    "AttendLog",
    "Attention",
    "Candidate",
    "decided_through",
]

log = structlog.get_logger("noema.attend")

MAX_MINDS = 100_000
"""Minds whose working memory is kept in process; one seen again after that is reloaded."""

FENCE_ATTEMPTS = 5
"""Cycles tried, each after reading the minds again, before a refused fence is raised (to retry the
batch): only an instance that keeps losing to another refuses that often."""

Candidate = ObservationRecorded | RecallProposed
E = TypeVar("E", bound=Event)
Decided = tuple[list[Event], dict[tuple[str, str], WorkingMemory]]


class AttendLog(Protocol):
    """What attend reads and writes on the streams (:class:`noema.adapters.attend_log.JetStreamAttendLog`,
    :class:`noema.adapters.memory.stream.InMemoryEventStream`)."""

    async def last_of(self, kind: str, workspace: str = "*", mind: str = "*") -> tuple[int, Event] | None:
        """The stream sequence and the event (as stored: sealed) last stored of type ``kind`` for a
        mind (``*``: any); None when there is none. Raises :class:`~noema_events.EventDecodeError`
        when that event does not decode."""
        ...

    async def candidates_last_seq(self) -> int:
        """The last sequence of the stream the candidates are read from (0: empty)."""
        ...

    async def publish_fenced(self, events: Sequence[Event], fences: Mapping[str, int]) -> list[int]:
        """Store ``events`` all or none; each event whose id ``fences`` names only if the last
        sequence on its subject is still the one given (else :class:`~noema.ports.ConcurrentWrite`,
        nothing stored). Returns each event's stream sequence."""
        ...


def _utcnow() -> datetime:
    return datetime.now(UTC)


async def decided_through(stream: AttendLog) -> int:
    """The highest candidate-stream sequence already decided, from the last stored decision (0 when
    there is none, or it was written before decisions recorded it)."""
    try:
        last = await stream.last_of("attention.decided")
    except EventDecodeError:
        return 0
    if last is None:
        return 0
    event = last[1]
    through = event.payload.through_seq if isinstance(event, AttentionDecided) else None
    newest = await stream.candidates_last_seq()
    if through is None or not 0 < through <= newest:
        return 0  # written before the mark existed, or not a mark this stream could have made
    return int(through)


class Attention:
    """Decides attention cycles: each mind's working memory and mark are read from ``stream`` the
    first time the mind is met, then kept (see :mod:`noema_attend.worker`)."""

    def __init__(
        self,
        stream: AttendLog,
        config: AttentionConfig,
        clock: Callable[[], datetime] = _utcnow,
        decided: int | None = None,
        fence: Callable[[], Awaitable[None]] | None = None,
        sealer: Sealer | None = None,
        partitioned: bool = False,
    ) -> None:
        self._stream = stream
        self._sealer = sealer
        # Raises when this instance may no longer publish (noema.runtime.claims): a former owner
        # whose claim was taken stops before storing a decision the new owner makes too.
        self._fence = fence
        self._config = config
        self._clock = clock
        # Each mind's working memory, with the latest memory of each of its recent sessions (to
        # chain episodes). Loaded on first sight from the last working_memory.updated event of that
        # mind on the stream (so it survives restarts and changes of owner exactly), then kept here.
        self._memories: OrderedDict[tuple[str, str], WorkingMemory] = OrderedDict()
        self.decided_through = decided
        """Everything of the candidate stream up to this is decided (None: not read yet)."""
        if partitioned:
            self.decided_through = 0  # the stream-wide mark means nothing for one partition
        # Each known mind's mark, and the stream sequence of its last attention.decided: the fence
        # its next decision is published against.
        self._marks: dict[tuple[str, str], int] = {}
        self._fences: dict[tuple[str, str], int] = {}
        self.admitted = 0
        """Memories admitted by the last batch (for its log line)."""

    async def mark(self) -> int:
        """The stream-wide mark, read from the stream the first time."""
        if self.decided_through is None:
            self.decided_through = await decided_through(self._stream)
        return self.decided_through

    async def _load_decided(self, workspace: str, mind: str) -> tuple[int, int]:
        """The stream sequence of the mind's last decision and its ``through_seq`` (0 for either
        when there is none, or a decision written without the mark)."""
        last = await self._stream.last_of("attention.decided", workspace, mind)
        if last is None:
            return 0, 0
        event = last[1]
        through = event.payload.through_seq if isinstance(event, AttentionDecided) else None
        return last[0], int(through or 0)

    async def _load_minds(self, keys: Iterable[tuple[str, str]]) -> None:
        """Read from the stream the state of each mind not known here: its last decision (fence and
        mark) first, then its working memory — so a decision stored between the two reads leaves a
        fence that no longer holds (the cycle is refused and the mind read again), never a working
        memory older than the fence."""
        for key in set(keys) - self._memories.keys():
            self._fences[key], self._marks[key] = await self._load_decided(*key)
            self._memories[key] = await self._load_working_memory(*key)

    def _forget(self, keys: Iterable[tuple[str, str]]) -> None:
        """Drop what is known of these minds: it is read from the stream again when next needed."""
        for key in keys:
            self._memories.pop(key, None)
            self._marks.pop(key, None)
            self._fences.pop(key, None)

    async def _load_working_memory(self, workspace: str, mind: str) -> WorkingMemory:
        last = await self._stream.last_of("working_memory.updated", workspace, mind)
        if last is None:
            return WorkingMemory(capacity=self._config.wm_capacity)
        (event,) = await self._opened([last[1]])
        assert isinstance(event, WorkingMemoryUpdated)
        return working_memory_of(event, self._config.wm_capacity)

    async def _opened(self, events: list[E]) -> list[E]:
        """``events`` with their sealed content opened (recall candidates and working memories
        carry memories' text sealed, docs/privacy.md)."""
        return events if self._sealer is None else await self._sealer.open(events)

    def _decide(self, good: Sequence[Candidate], through: int) -> Decided:
        """One cycle's events and the working memories they leave, applied to nothing yet: they are
        kept only once the events are stored (a retried cycle then starts from the same state)."""
        staged: dict[tuple[str, str], WorkingMemory] = {}
        events = decide_cycle(
            good,
            self._clock(),
            self._config,
            ChainMap(staged, self._memories),  # reads fall through; writes stay staged
            through_seq=through,
        )
        return events, staged

    async def _run_cycle(self, cycle: Sequence[Delivered[Candidate]], through: int) -> list[Event]:
        events, staged = self._decide([c.event for c in cycle], through)
        if len(events) > MAX_ATOMIC_BATCH and len(cycle) > 1:
            # Too many events to store atomically: two smaller cycles, in stream order.
            half = len(cycle) // 2
            first = await self._run_cycle(cycle[:half], cycle[half - 1].seq)
            return first + await self._run_cycle(cycle[half:], through)
        if self._fence is not None:
            await self._fence()
        # Each mind's decision is stored only if the mind's last decision is still the one this
        # instance read: the server refuses the whole cycle otherwise (ConcurrentWrite).
        decisions = {ev.id: (ev.workspace, ev.mind) for ev in events if isinstance(ev, AttentionDecided)}
        fences = {event_id: self._fences[key] for event_id, key in decisions.items()}
        seqs = await self._stream.publish_fenced(events, fences)
        for ev, seq in zip(events, seqs, strict=True):
            if ev.id in decisions:
                self._fences[decisions[ev.id]] = seq
                self._marks[decisions[ev.id]] = through
        self.decided_through = max(self.decided_through or 0, through)
        for key, held in staged.items():  # most recently decided last, so evicted last
            self._memories[key] = held
            self._memories.move_to_end(key)
        while len(self._memories) > MAX_MINDS:  # reloaded from the stream when seen again
            key, _ = self._memories.popitem(last=False)
            self._forget([key])
        return events

    async def _decide_fenced(self, good: Sequence[Delivered[Candidate]], through: int) -> list[Event]:
        """Decide and publish the undecided of ``good``. When another instance decided some of these
        minds since this one read them (a former or a new owner), their state is read again and what
        that instance decided is left out."""
        keys = {(c.event.workspace, c.event.mind) for c in good}
        for attempt in range(1, FENCE_ATTEMPTS + 1):
            await self._load_minds(keys)
            marks = self._marks  # each mind's candidates up to its own mark were decided
            todo = [c for c in good if c.seq > marks[(c.event.workspace, c.event.mind)]]
            if not todo:
                return []
            try:
                return await self._run_cycle(todo, through)
            except ConcurrentWrite as exc:
                if attempt == FENCE_ATTEMPTS:
                    raise
                log.warning(
                    "another instance decided these minds meanwhile; reading them again", reason=str(exc)
                )
                self._forget(keys)
        raise AssertionError("unreachable")

    async def __call__(self, batch: Sequence[Delivered[Candidate]], through: int) -> None:
        """Decide one cycle (the candidates past the mark, in stream order; ``through``: the highest
        sequence of the batch) and store its events; sealed content is opened first."""
        opened = await self._opened([c.event for c in batch])
        good = [Delivered(c.seq, ev) for c, ev in zip(batch, opened, strict=True)]
        events = await self._decide_fenced(good, through) if good else []
        self.admitted = sum(1 for e in events if e.name == "memory.created")
