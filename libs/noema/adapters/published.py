"""Which stream sequences a piece of work published: read-your-writes for the operator API.

A write through the API goes down through the application layer to :class:`EventPublisher`, which
knows the JetStream ack's sequence but is shared by every request. Rather than thread that number
back up through every application call, the publisher notes it in the current task's recorder (a
context variable, so concurrent requests never see each other's), and the API hands the highest one
to the client, which can then read with ``after_seq`` and see its own write.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["Published", "note_published", "recording_published"]


@dataclass
class Published:
    """The highest stream sequence published while recording (0: nothing published)."""

    seq: int = 0


_current: ContextVar[Published | None] = ContextVar("noema_published", default=None)


def note_published(seq: int) -> None:
    """Record that ``seq`` was stored (a no-op outside :func:`recording_published`)."""
    recorder = _current.get()
    if recorder is not None and seq > recorder.seq:
        recorder.seq = seq


@contextmanager
def recording_published() -> Iterator[Published]:
    """Collect the sequences published inside the block."""
    recorder = Published()
    token = _current.set(recorder)
    try:
        yield recorder
    finally:
        _current.reset(token)
