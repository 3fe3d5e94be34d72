"""Attend worker: observations in, ``attention.decided`` and ``memory.created`` events out.

Each fetched batch is one attention cycle. Malformed observations are dead-lettered with the reason
(never turned into memory) and the worker keeps going; events are stored before the observations
are acked, and their ids are derived from the observations, so a crash between the two is harmless.

A cycle's events are stored all or none (one atomic batch: a cycle too big for one is split into
smaller cycles), and its decisions record the highest stream sequence they cover
(``through_seq``). Cycles are decided in stream order, so everything up to the mark is decided. On
start the worker reads the mark from the last ``attention.decided`` and recreates its consumer to
deliver from just after it, in order (a crashed process's unacked candidates would otherwise come
back only after their ack wait, behind newer ones); a candidate at or below the mark that arrives
anyway is acked without being decided again. So a redelivered observation never yields a second,
different decision, whatever was killed when.

With partitions (``NOEMA_PARTITIONS`` > 1) each partition has its own consumer, and the decisions of
several partitions interleave on the event stream, so the stream-wide mark says nothing about one
partition. Each mind's own mark is exact instead: a cycle decides its partition's candidates in
stream order, so every candidate of a mind at or below the ``through_seq`` of that mind's last
``attention.decided`` was decided. The handler of a partition reads that mark with the mind's
working memory, the first time it meets the mind, and acks a candidate at or below it without
deciding it again; it also acks, undecided, a candidate of a workspace of another partition (read
from the subjects of an earlier partition count, see noema.adapters.partition_consumers).

Each mind's mark is kept with a fence: the stream sequence of the mind's last decision, as this
instance read or stored it. A cycle's decisions are published with it as the expected last sequence
of their subjects (one ``attention.decided`` per mind decided), so the server stores the cycle only
if no other instance decided any of its minds since — a former owner that stalled after its claim
check cannot store a stale cycle, and a new owner whose cycle lost to one reads the minds again and
decides what is left (docs/reliability.md, "Claims, failover and fencing").
"""

from __future__ import annotations

from collections import ChainMap, OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import TypeVar

import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from noema.adapters import tracing
from noema.adapters.jetstream import (
    MAX_ATOMIC_BATCH,
    DeadLetters,
    EventPublisher,
    last_on_subject,
    stream_last_seq,
)
from noema.adapters.metrics import Metrics
from noema.domain.attention import AttentionConfig, decide_cycle, working_memory_of
from noema.domain.knowledge import WorkingMemory
from noema.ports import ConcurrentWrite, Sealer
from noema.runtime.worker import decode_each
from noema.topology import Topology
from noema_events import (
    AttentionDecided,
    Event,
    EventDecodeError,
    ObservationRecorded,
    RecallProposed,
    WorkingMemoryUpdated,
    decode_event,
)

__all__ = ["AttendHandler", "decided_through"]

log = structlog.get_logger("noema.attend")

MAX_MINDS = 100_000
"""Minds whose working memory is kept in process; one seen again after that is reloaded."""

FENCE_ATTEMPTS = 5
"""Cycles tried, each after reading the minds again, before a refused fence is raised (to retry the
batch): only an instance that keeps losing to another refuses that often."""

Candidate = ObservationRecorded | RecallProposed
E = TypeVar("E", bound=Event)
Decided = tuple[list[Event], dict[tuple[str, str], WorkingMemory]]


def _utcnow() -> datetime:
    return datetime.now(UTC)


async def decided_through(js: JetStreamContext, topology: Topology) -> int:
    """The highest observation-stream sequence already decided, from the last stored decision (0
    when there is none, or it was written before decisions recorded it)."""
    subject = topology.event_subject_for("*", "*", "attention.decided")
    last = await last_on_subject(js, topology.event_stream, subject)
    if last is None:
        return 0
    try:
        event = decode_event(last[1])
    except EventDecodeError:
        event = None
    through = event.payload.through_seq if isinstance(event, AttentionDecided) else None
    newest = await stream_last_seq(js, topology.observation_stream)
    if through is None or not 0 < through <= newest:
        return 0  # written before the mark existed, or not a mark this stream could have made
    return int(through)


class AttendHandler:
    """Handles one batch of observation messages (one attention cycle)."""

    def __init__(
        self,
        nc: NATS,
        topology: Topology,
        config: AttentionConfig,
        clock: Callable[[], datetime] = _utcnow,
        decided: int | None = None,
        fence: Callable[[], Awaitable[None]] | None = None,
        sealer: Sealer | None = None,
        metrics: Metrics | None = None,
        partition: int | None = None,
    ) -> None:
        self._js = nc.jetstream()
        self._sealer = sealer
        # Raises when this instance may no longer publish (noema.runtime.claims): a former owner
        # whose claim was taken stops before storing a decision the new owner makes too.
        self._fence = fence
        self._topology = topology
        self._config = config
        self._clock = clock
        self._publisher = EventPublisher(nc, topology, sealer)
        self._dead_letters = DeadLetters(self._js, topology, "attend", metrics)
        # Each mind's working memory, with the latest memory of each of its recent sessions (to
        # chain episodes). Loaded on first sight from the last working_memory.updated event of that
        # mind on the stream (so it survives restarts and changes of owner exactly), then kept here.
        self._memories: OrderedDict[tuple[str, str], WorkingMemory] = OrderedDict()
        self._decided_through = decided  # None: read from the stream on the first batch
        # Partitioned: the partition handled (see the module doc).
        self._partition = partition
        if partition is not None:
            self._decided_through = 0  # the stream-wide mark means nothing for one partition
        # Each known mind's mark, and the stream sequence of its last attention.decided: the fence
        # its next decision is published against (see the module doc).
        self._marks: dict[tuple[str, str], int] = {}
        self._fences: dict[tuple[str, str], int] = {}

    async def _load_decided(self, workspace: str, mind: str) -> tuple[int, int]:
        """The stream sequence of the mind's last decision and its ``through_seq`` (0 for either
        when there is none, or a decision written without the mark)."""
        subject = self._topology.event_subject_for(workspace, mind, "attention.decided")
        last = await last_on_subject(self._js, self._topology.event_stream, subject)
        if last is None:
            return 0, 0
        event = decode_event(last[1])
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

    def _elsewhere(self, msg: Msg) -> bool:
        """A candidate of a workspace of another partition (stored under an earlier layout)."""
        if self._partition is None:
            return False
        workspace = self._topology.workspace_of_subject(msg.subject) or ""
        return self._topology.partition(workspace) != self._partition

    async def _load_working_memory(self, workspace: str, mind: str) -> WorkingMemory:
        subject = self._topology.event_subject_for(workspace, mind, "working_memory.updated")
        last = await last_on_subject(self._js, self._topology.event_stream, subject)
        if last is None:
            return WorkingMemory(capacity=self._config.wm_capacity)
        (event,) = await self._opened([decode_event(last[1])])
        assert isinstance(event, WorkingMemoryUpdated)
        return working_memory_of(event, self._config.wm_capacity)

    def _validate(self, msg: Msg) -> Candidate:
        event = decode_event(msg.data)
        if isinstance(event, RecallProposed):
            expected = self._topology.recall_subject(event.workspace, event.mind)
        elif isinstance(event, ObservationRecorded):
            expected = self._topology.observation_subject(event.workspace, event.mind)
        else:
            raise EventDecodeError(f"expected observation.recorded or recall.proposed, got {event.type}")
        if self._topology.published_subject(msg.subject) != expected:
            raise EventDecodeError(f"subject {msg.subject} does not match the observation's scope {expected}")
        return event

    async def _opened(self, events: list[E]) -> list[E]:
        """``events`` with their sealed content opened (recall candidates and working memories
        carry memories' text sealed, docs/privacy.md)."""
        return events if self._sealer is None else await self._sealer.open(events)

    async def reject(self, msg: Msg, reason: str, kind: str) -> None:
        """Dead-letter a candidate that cannot be decided, and ack it."""
        await self._dead_letters.reject(msg, reason, kind)

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

    async def _run_cycle(self, cycle: Sequence[tuple[Msg, Candidate]], through: int) -> list[Event]:
        events, staged = self._decide([c for _, c in cycle], through)
        if len(events) > MAX_ATOMIC_BATCH and len(cycle) > 1:
            # Too many events to store atomically: two smaller cycles, in stream order.
            half = len(cycle) // 2
            first = await self._run_cycle(cycle[:half], cycle[half - 1][0].metadata.sequence.stream)
            return first + await self._run_cycle(cycle[half:], through)
        if self._fence is not None:
            await self._fence()
        # Each mind's decision is stored only if the mind's last decision is still the one this
        # instance read: the server refuses the whole cycle otherwise (ConcurrentWrite).
        decisions = {ev.id: (ev.workspace, ev.mind) for ev in events if isinstance(ev, AttentionDecided)}
        fences = {event_id: self._fences[key] for event_id, key in decisions.items()}
        seqs = await self._publisher.publish_fenced(events, fences)
        for ev, seq in zip(events, seqs, strict=True):
            if ev.id in decisions:
                self._fences[decisions[ev.id]] = seq
                self._marks[decisions[ev.id]] = through
        self._decided_through = max(self._decided_through or 0, through)
        for key, held in staged.items():  # most recently decided last, so evicted last
            self._memories[key] = held
            self._memories.move_to_end(key)
        while len(self._memories) > MAX_MINDS:  # reloaded from the stream when seen again
            key, _ = self._memories.popitem(last=False)
            self._forget([key])
        return events

    async def _decide_fenced(self, good: Sequence[tuple[Msg, Candidate]], through: int) -> list[Event]:
        """Decide and publish the undecided of ``good``. When another instance decided some of these
        minds since this one read them (a former or a new owner, see the module doc), their state is
        read again and what that instance decided is left out."""
        keys = {(c.workspace, c.mind) for _, c in good}
        for attempt in range(1, FENCE_ATTEMPTS + 1):
            await self._load_minds(keys)
            marks = self._marks  # each mind's candidates up to its own mark were decided
            todo = [(m, c) for m, c in good if m.metadata.sequence.stream > marks[(c.workspace, c.mind)]]
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

    async def __call__(self, msgs: list[Msg]) -> None:
        """Validate, decide, publish the decision events, then ack every message; each event carries
        the trace context of the candidate that caused it (:mod:`noema.adapters.tracing`)."""
        with tracing.batch("noema.attend") as traces:
            await self._handle(msgs, traces)

    async def _handle(self, msgs: list[Msg], traces: tracing.Batch) -> None:
        if self._decided_through is None:
            self._decided_through = await decided_through(self._js, self._topology)
        # Candidates up to the mark were decided before a restart: their events are stored.
        fresh = [
            m for m in msgs if m.metadata.sequence.stream > self._decided_through and not self._elsewhere(m)
        ]
        good, malformed = decode_each(fresh, self._validate)
        good = list(zip([m for m, _ in good], await self._opened([c for _, c in good]), strict=True))
        for msg, exc in malformed:  # attend owns the observation stream: it dead-letters them
            await self._dead_letters.write(msg, str(exc))
        for msg, candidate in good:
            traces.carry(candidate.id, msg.headers, **{"messaging.destination.name": msg.subject})
        events = await self._decide_fenced(good, fresh[-1].metadata.sequence.stream) if good else []
        for msg in msgs:
            await msg.ack()
        admitted = sum(1 for e in events if e.name == "memory.created")
        log.info(
            "cycle decided",
            observations=len(msgs),
            redelivered_decided=len(msgs) - len(fresh),
            valid=len(good),
            admitted=admitted,
            first_seq=msgs[0].metadata.sequence.stream,
            last_seq=msgs[-1].metadata.sequence.stream,
        )
