"""Reads as of a past point of the event stream (``--as-of TIME|SEQ``, ``as_of``).

The read model keeps its own history (:mod:`noema.adapters.postgres.history`, migration 0016):
every version of every row, with the stream sequences from which and until which it held, written
by the projector from the events. A read as of a sequence runs the same application code that
reads the present over the versions valid at that sequence, with the clock pinned to the point's
time: the answer is what a live read at that moment would have answered (the oracle is
``replay --until-seq N --keep`` and the same query there). Nothing is built first: any point from
the history's start to the projector's position answers at once, on every surface.

A point is a sequence, whose time is the time the stream stored that event, or a time, whose
sequence is the last event the stream had stored by then and whose time is the time asked:
activation decays with time, so a search as of 10:32 ranks with 10:32 as its "now".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nats.aio.client import Client as NATS
from nats.js.errors import NotFoundError

from noema.adapters.jetstream import last_seq_at, stream_last_seq
from noema.errors import Kind, NoemaError
from noema.stream_points import StreamPoint
from noema.topology import Topology

__all__ = ["AsOf", "PointBeforeHistory", "PointNotInStream", "resolve"]


class PointBeforeHistory(NoemaError):
    """The point is older than the read model's history: its versions are past the retention
    (``NOEMA_HISTORY_DAYS``), or the read model was migrated from a release that kept none and its
    history begins at the upgrade. The message says how to ask (the forensic replay, or a projection
    rebuild, which rebuilds the whole history)."""

    kind = Kind.CONFLICT


class PointNotInStream(NoemaError, LookupError):
    """The point names no state the stream holds (before its first event, beyond its end, in the
    future): ``not_found``, as a well-formed id that names nothing is; the message says what to
    write. (A point that is no sequence or zoned time at all is
    :class:`~noema.stream_points.InvalidStreamPoint`, ``invalid``.)"""

    kind = Kind.NOT_FOUND


@dataclass(frozen=True)
class AsOf:
    """The point an answer reflects: the state after stream sequence ``seq``, read at ``time``."""

    seq: int
    time: datetime
    """The answer's "now": the time asked, or the time the stream stored event ``seq``."""

    def describe(self) -> dict[str, Any]:
        """How every surface says it: ``{"seq": N, "time": "…"}``."""
        return {"seq": self.seq, "time": self.time.isoformat()}


async def resolve(nc: NATS, topology: Topology, point: StreamPoint, now: datetime) -> AsOf:
    """The sequence and time ``point`` names (:class:`PointNotInStream` when it names none)."""
    js = nc.jetstream()
    last = await stream_last_seq(js, topology.event_stream)
    if isinstance(point, datetime):
        if point > now:
            raise PointNotInStream(
                f"as of {point.isoformat()}: that is in the future (now is {now.isoformat()}); "
                f"write a past time or a sequence up to {last}"
            )
        seq = await last_seq_at(js, topology.event_stream, topology.event_subjects, point)
        if seq == 0:
            raise PointNotInStream(
                f"as of {point.isoformat()}: the event stream had stored nothing by then; "
                f"write a later time or a sequence from 1 to {last}"
            )
        return AsOf(seq, point)
    if point > last:
        raise PointNotInStream(
            f"as of seq {point}: the event stream ends at seq {last}; write a sequence from 1 to "
            f"{last}, or a past time with its zone (e.g. 2026-03-02T10:32:00Z)"
        )
    try:
        msg = await js.get_msg(topology.event_stream, seq=point)
    except NotFoundError:
        raise PointNotInStream(f"as of seq {point}: the event stream no longer holds it") from None
    assert msg.time is not None
    return AsOf(point, msg.time)
