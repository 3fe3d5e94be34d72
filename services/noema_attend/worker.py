"""Attend worker: observations in, ``attention.decided`` and ``memory.created`` events out.

Each fetched batch is one attention cycle. Malformed observations are dead-lettered with the reason
(never turned into memory) and the worker keeps going; events are stored before the observations
are acked, and their ids are derived from the observations, so a crash between the two is harmless.
"""

from __future__ import annotations

from collections import ChainMap, OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime

import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from noema.adapters.jetstream import EventPublisher, dead_letter, last_on_subject
from noema.domain.attention import AttentionConfig, decide_cycle
from noema.domain.knowledge import WorkingMemory, WorkingMemoryEntry
from noema.topology import Topology
from noema_events import (
    EventDecodeError,
    ObservationRecorded,
    RecallProposed,
    WorkingMemoryUpdated,
    decode_event,
)

__all__ = ["AttendHandler"]

log = structlog.get_logger("noema.attend")

MAX_SESSIONS = 100_000


def _utcnow() -> datetime:
    return datetime.now(UTC)


class AttendHandler:
    """Handles one batch of observation messages (one attention cycle)."""

    def __init__(
        self,
        nc: NATS,
        topology: Topology,
        config: AttentionConfig,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self._js = nc.jetstream()
        self._topology = topology
        self._config = config
        self._clock = clock
        self._publisher = EventPublisher(nc, topology)
        # Latest memory per session, to chain episodes. In memory only: after a restart a session's
        # next episode starts a new chain (edges are derived from events, so replay is unaffected).
        self._heads: OrderedDict[tuple[str, str, str], str] = OrderedDict()
        # Each mind's working memory. Loaded on first sight from the last working_memory.updated
        # event of that mind on the stream (so it survives restarts exactly), then kept here.
        self._memories: OrderedDict[tuple[str, str], WorkingMemory] = OrderedDict()

    async def _load_working_memory(self, workspace: str, mind: str) -> WorkingMemory:
        subject = self._topology.event_subject_for(workspace, mind, "working_memory.updated")
        last = await last_on_subject(self._js, self._topology.event_stream, subject)
        if last is None:
            return WorkingMemory(capacity=self._config.wm_capacity)
        event = decode_event(last[1])
        assert isinstance(event, WorkingMemoryUpdated)
        items = tuple(
            WorkingMemoryEntry(i.memory_id, i.weight, i.entered_at, i.gist) for i in event.payload.items
        )
        # The configured capacity, not the one recorded: a changed NOEMA_WM_CAPACITY applies to every
        # mind from its next admission (which trims a set over the new capacity, in a recorded event).
        return WorkingMemory(items, event.occurred_at, self._config.wm_capacity)

    def _validate(self, msg: Msg) -> ObservationRecorded | RecallProposed:
        event = decode_event(msg.data)
        if isinstance(event, RecallProposed):
            expected = self._topology.recall_subject(event.workspace, event.mind)
        elif isinstance(event, ObservationRecorded):
            expected = self._topology.observation_subject(event.workspace, event.mind)
        else:
            raise EventDecodeError(f"expected observation.recorded or recall.proposed, got {event.type}")
        if msg.subject != expected:
            raise EventDecodeError(f"subject {msg.subject} does not match the observation's scope {expected}")
        return event

    async def dead_letter(self, msg: Msg, reason: str) -> None:
        """Keep a rejected message, with why, on the dead-letter stream."""
        await dead_letter(self._js, self._topology, "attend", msg, reason)
        log.warning(
            "observation dead-lettered", seq=msg.metadata.sequence.stream, subject=msg.subject, reason=reason
        )

    async def __call__(self, msgs: list[Msg]) -> None:
        """Validate, decide, publish the decision events, then ack every message."""
        good: list[ObservationRecorded | RecallProposed] = []
        for msg in msgs:
            try:
                good.append(self._validate(msg))
            except EventDecodeError as exc:
                await self.dead_letter(msg, str(exc))
        for key in {(c.workspace, c.mind) for c in good} - self._memories.keys():
            self._memories[key] = await self._load_working_memory(*key)
        # Working memory changes only once the cycle's events are stored: a redelivered batch (after a
        # failed publish) is then scored against the same working memory and yields the same events.
        staged: dict[tuple[str, str], WorkingMemory] = {}
        memories = ChainMap(staged, self._memories)  # reads fall through; writes stay staged
        events = decide_cycle(good, self._clock(), self._config, self._heads, memories) if good else []
        while len(self._heads) > MAX_SESSIONS:  # bounded: the oldest sessions are forgotten first
            self._heads.popitem(last=False)
        if events:
            await self._publisher.publish(events)
        self._memories.update(staged)
        while len(self._memories) > MAX_SESSIONS:  # reloaded from the stream when seen again
            self._memories.popitem(last=False)
        for msg in msgs:
            await msg.ack()
        admitted = sum(1 for e in events if e.name == "memory.created")
        log.info(
            "cycle decided",
            observations=len(msgs),
            valid=len(good),
            admitted=admitted,
            first_seq=msgs[0].metadata.sequence.stream,
            last_seq=msgs[-1].metadata.sequence.stream,
        )
