"""Contract of :class:`noema.ports.ExpectingSink` (optimistic concurrency on a subject) and the rules
of ``record_observation`` built on it: a timestamped line appended to the caller's private notes,
every one of several concurrent appends landing, and a clear refusal when the notes keep changing.

Two appends race for real here: a sink that makes each append's first read wait for the other's, so
both read the same notes before either publishes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import pytest

from noema.application import reads
from noema.application.access import Caller
from noema.application.knowledge import Knowledge
from noema.application.views import AuditQuery
from noema.errors import OperationError
from noema.ports import ConcurrentWrite, ExpectingSink
from noema_events import Event, NotesUpdated, NotesUpdatedPayload
from tests.contract.conftest import T0, Backend
from tests.support import envelope

ALICE = Caller("acme", "alice", "engineer")
BOB = Caller("acme", "bob", "engineer")


def _notes(agent: str, notes: str) -> NotesUpdated:
    return NotesUpdated(
        **envelope(mind=agent, actor=agent), payload=NotesUpdatedPayload(agent=agent, notes=notes)
    )


class _Watched:
    """A sink passing everything on, counting the reads and the refused publishes, and awaiting
    ``after_read`` after each read."""

    def __init__(self, inner: ExpectingSink, after_read: Callable[[], Awaitable[None]]) -> None:
        self._inner = inner
        self._after_read = after_read
        self.reads = 0
        self.refused = 0

    async def publish(self, events: Sequence[Event]) -> int:
        return await self._inner.publish(events)

    async def last_on_subject(self, like: Event) -> tuple[int, Event] | None:
        last = await self._inner.last_on_subject(like)
        self.reads += 1
        await self._after_read()
        return last

    async def publish_expecting(self, event: Event, expected_last: int) -> int:
        try:
            return await self._inner.publish_expecting(event, expected_last)
        except ConcurrentWrite:
            self.refused += 1
            raise


async def test_a_publish_expecting_the_last_sequence_lands_and_a_stale_one_is_refused(
    backend: Backend,
) -> None:
    first, second = _notes("alice", "one"), _notes("alice", "two")
    assert await backend.sink.last_on_subject(first) is None
    seq = await backend.sink.publish_expecting(first, 0)
    assert await backend.sink.last_on_subject(second) == (seq, first)
    with pytest.raises(ConcurrentWrite):
        await backend.sink.publish_expecting(second, 0)
    assert await backend.sink.last_on_subject(_notes("bob", "")) is None, "each subject on its own"
    later = await backend.sink.publish_expecting(second, seq)
    assert later > seq
    assert await backend.sink.last_on_subject(first) == (later, second)


async def test_recording_an_observation_appends_a_timestamped_line_to_the_caller_s_notes_only(
    backend: Backend,
) -> None:
    k = backend.knowledge()
    with pytest.raises(OperationError, match="content must not be blank"):
        await k.record_observation(ALICE, "   ")
    assert (
        await k.record_observation(ALICE, "  the pager went off  ") == "- 2026-03-02 09:00 the pager went off"
    )
    await k.update_my_notes(BOB, "bob's own")
    backend.clock[0] = T0.replace(hour=10, minute=5)
    assert await k.record_observation(ALICE, "it was the disk") == "- 2026-03-02 10:05 it was the disk"
    assert (
        await k.get_notes(ALICE)
        == "- 2026-03-02 09:00 the pager went off\n- 2026-03-02 10:05 it was the disk"
    )
    assert await k.get_notes(BOB) == "bob's own"
    log = await reads.audit(backend.records, AuditQuery(workspace="acme"))
    assert {e.type for e in log.items} == {"notes.updated.v1"}, "notes are private: nothing else is published"


async def test_an_observation_needs_a_sink_that_appends_optimistically(backend: Backend) -> None:
    without = Knowledge(backend.reads, backend.sink, lambda: backend.clock[0])
    with pytest.raises(OperationError, match=r"needs the event stream itself \(JetStream\)"):
        await without.record_observation(ALICE, "the pager went off")


async def test_two_racing_appends_both_land(backend: Backend) -> None:
    both_read = asyncio.Barrier(2)

    async def wait_for_the_other() -> None:
        if racing.reads <= 2:  # each append's first read
            await both_read.wait()

    racing = _Watched(backend.sink, wait_for_the_other)
    k = backend.knowledge(racing)
    await k.update_my_notes(ALICE, "- earlier")
    lines = await asyncio.gather(k.record_observation(ALICE, "first"), k.record_observation(ALICE, "second"))
    assert racing.refused == 1, "both read the same notes; the second write was refused and retried"
    notes = (await k.get_notes(ALICE)).split("\n")
    assert notes[0] == "- earlier"
    assert sorted(notes[1:]) == sorted(lines)


async def test_an_append_gives_up_when_the_notes_keep_changing(backend: Backend) -> None:
    k = backend.knowledge()

    async def someone_else_writes() -> None:
        await k.update_my_notes(ALICE, f"rewritten after read {contended.reads}")

    contended = _Watched(backend.sink, someone_else_writes)
    with pytest.raises(OperationError, match=r"^the notes kept changing under this write; try again$"):
        await backend.knowledge(contended).record_observation(ALICE, "never lands", attempts=3)
    assert (contended.reads, contended.refused) == (3, 3)
    assert await k.get_notes(ALICE) == "rewritten after read 3"


async def test_an_event_stored_already_is_refused_when_the_last_moved_and_else_answers_as_stored(
    backend: Backend,
) -> None:
    first, second = _notes("alice", "one"), _notes("alice", "two")
    seq = await backend.sink.publish_expecting(first, 0)
    later = await backend.sink.publish_expecting(second, seq)
    with pytest.raises(ConcurrentWrite):  # the expected last sequence is checked first
        await backend.sink.publish_expecting(first, seq)
    assert await backend.sink.publish_expecting(first, later) == seq, "a duplicate: not stored again"
    assert await backend.sink.last_on_subject(first) == (later, second)


class _Unanswered:
    """A sink whose first append gets no answer in time (TimeoutError), as when an ack is lost: the
    append was ``stored`` before (and ``overtaken``: another append of the agent's landed on it
    before the next read), is stored ``late`` (just before the next append reaches the server), or
    was ``lost`` on its way."""

    def __init__(self, inner: ExpectingSink, fate: str) -> None:
        self._inner = inner
        self._fate = fate
        self._late: tuple[Event, int] | None = None
        self.calls = 0

    async def publish(self, events: Sequence[Event]) -> int:
        return await self._inner.publish(events)

    async def last_on_subject(self, like: Event) -> tuple[int, Event] | None:
        return await self._inner.last_on_subject(like)

    async def publish_expecting(self, event: Event, expected_last: int) -> int:
        self.calls += 1
        if self.calls == 1:
            if self._fate in ("stored", "overtaken"):
                seq = await self._inner.publish_expecting(event, expected_last)
                if self._fate == "overtaken":
                    assert isinstance(event, NotesUpdated)
                    other = _notes("alice", f"{event.payload.notes}\n- another session's line")
                    await self._inner.publish_expecting(other, seq)
            elif self._fate == "late":
                self._late = (event, expected_last)
            raise TimeoutError("nats: timeout")
        if self._late is not None:
            await self._inner.publish_expecting(*self._late)
            self._late = None
        return await self._inner.publish_expecting(event, expected_last)


@pytest.mark.parametrize("fate", ["stored", "overtaken", "late", "lost"])
async def test_an_append_whose_answer_was_lost_lands_exactly_once(backend: Backend, fate: str) -> None:
    k = backend.knowledge()
    await k.update_my_notes(ALICE, "- earlier")
    unanswered = _Unanswered(backend.sink, fate)
    line = await backend.knowledge(unanswered).record_observation(ALICE, "the pager went off")
    assert unanswered.calls == (1 if fate == "stored" else 2), "a stored append is found by the next read"
    other = "\n- another session's line" if fate == "overtaken" else ""
    assert await k.get_notes(ALICE) == f"- earlier\n{line}{other}", "the line once"
    log = await reads.audit(backend.records, AuditQuery(workspace="acme"))
    versions = 3 if other else 2
    assert [e.type for e in log.items] == ["notes.updated.v1"] * versions, "one version per append"


async def test_an_append_that_is_never_answered_says_so(backend: Backend) -> None:
    class _Silent(_Unanswered):
        async def publish_expecting(self, event: Event, expected_last: int) -> int:
            self.calls += 1
            raise TimeoutError("nats: timeout")

    silent = _Silent(backend.sink, "lost")
    with pytest.raises(TimeoutError):
        await backend.knowledge(silent).record_observation(ALICE, "never lands", attempts=3)
    assert silent.calls == 3
