"""Attend's streams in memory (:class:`noema.application.attend.AttendLog`): the decisions and
working memories on an :class:`~noema.adapters.memory.stream.InMemoryEventStream`, fenced as
JetStream fences them (an expected last sequence per subject, the whole batch refused when one
does not hold), and the candidates' stream as a list."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from noema.adapters.memory.stream import InMemoryEventStream
from noema.ports import ConcurrentWrite
from noema_events import Event

__all__ = ["InMemoryAttendLog"]


class InMemoryAttendLog:
    """Attend's view of ``stream``; ``candidates`` is the observation stream (sequence = index + 1)."""

    def __init__(self, stream: InMemoryEventStream, candidates: Sequence[Event] = ()) -> None:
        self.stream = stream
        self.candidates = candidates

    async def last_of(self, kind: str, workspace: str = "*", mind: str = "*") -> tuple[int, Event] | None:
        for seq in range(len(self.stream.events), 0, -1):
            ev = self.stream.events[seq - 1]
            if ev.name == kind and workspace in ("*", ev.workspace) and mind in ("*", ev.mind):
                return seq, ev
        return None

    async def candidates_last_seq(self) -> int:
        return len(self.candidates)

    async def publish_fenced(self, events: Sequence[Event], fences: Mapping[str, int]) -> list[int]:
        for ev in events:
            if ev.id in fences:
                last = await self.stream.last_on_subject(ev)
                if (0 if last is None else last[0]) != fences[ev.id]:
                    raise ConcurrentWrite(f"wrong last sequence on {self.stream.topology.event_subject(ev)}")
        await self.stream.publish(events)
        seqs = {ev.id: seq for seq, ev in enumerate(self.stream.events, 1)}
        return [seqs[ev.id] for ev in events]
