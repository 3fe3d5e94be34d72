"""A point of the event stream as an operator writes it: a stream sequence, or a time with its zone.

An audit asks about a moment ("what did Noema hold at 10:32 last Tuesday"), so the time must say
which 10:32: a time without a zone is refused rather than guessed (unlike the everyday filters of
:mod:`noema.instants`, which read it as UTC). The time is mapped to a sequence by the stream's own
clock (see :func:`noema.adapters.jetstream.last_seq_at`).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from noema.errors import Kind, NoemaError

__all__ = ["EXAMPLES", "POINT_FORMS", "InvalidStreamPoint", "StreamPoint", "parse_stream_point"]

StreamPoint = int | datetime
"""A stream sequence (from 1), or a time (aware, UTC)."""

EXAMPLES = (
    "a stream sequence (e.g. 1200) or an ISO-8601 time with its zone "
    "(e.g. 2026-03-02T10:32:00Z or 2026-03-02T10:32:00+01:00)"
)
"""What to write, as messages and help say it."""

POINT_FORMS = (
    "a stream sequence (e.g. 120) or an ISO-8601 time with its zone "
    "(e.g. 2026-03-01T09:30:00Z or 2026-03-01T09:30:00+01:00)"
)
"""What a point of ``audit diff`` may be, as written in messages and help
(:mod:`noema.application.audit_views`; here, for the help, without the views)."""


class InvalidStreamPoint(NoemaError, ValueError):
    """Neither a sequence nor a zoned time; the message says what to write."""

    kind = Kind.INVALID


def parse_stream_point(text: str, name: str) -> StreamPoint:
    """``text`` as a stream sequence or a time in UTC; ``name`` is the option as the user wrote it."""
    value = text.strip()
    if re.fullmatch(r"\d+", value, re.ASCII):
        seq = int(value)
        if seq < 1:
            raise InvalidStreamPoint(f"{name} {text!r}: stream sequences start at 1; write {EXAMPLES}")
        return seq
    try:
        when = datetime.fromisoformat(value.upper())  # ISO 8601 allows a lower-case t and z
    except ValueError:
        raise InvalidStreamPoint(f"{name} {text!r} is not {EXAMPLES}") from None
    if when.tzinfo is None:
        plain = when.isoformat()
        raise InvalidStreamPoint(
            f"{name} {text!r} has no time zone, so it names a different moment in every zone: "
            f"write it with one, e.g. {plain}Z (UTC) or {plain}+01:00"
        )
    return when.astimezone(UTC)
