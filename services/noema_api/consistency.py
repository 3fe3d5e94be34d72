"""Read-your-writes over an eventually consistent read model.

A write answers once JetStream stored its events; the projector applies them to the read model a
moment later. So every write names the stream sequence it reached (the ``Noema-Stream-Seq`` header)
and every authenticated read takes ``after_seq=N``: the API first waits, at most
:data:`AFTER_SEQ_WAIT` seconds, until the read model has applied sequence N. The answer says how far
the read model was (``Noema-Read-Seq``) and whether it had reached N (``Noema-Caught-Up``): when the
projector is behind (stopped, or catching up after an outage) the read answers with what there is
rather than failing, and the client decides whether that is good enough (the explorer says so).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from noema.adapters.postgres.position import wait_for_projection
from noema.application.audit_views import POINT_PATTERN
from noema.errors import Kind
from noema.runtime.wiring import Pool

from .errors import ApiError

__all__ = [
    "AFTER_SEQ",
    "AFTER_SEQ_PARAMETER",
    "AFTER_SEQ_WAIT",
    "AS_OF",
    "AS_OF_HEADERS",
    "AS_OF_PARAMETER",
    "AS_OF_SEQ_HEADER",
    "AS_OF_TIME_HEADER",
    "CAUGHT_UP_HEADER",
    "READ_HEADERS",
    "READ_SEQ_HEADER",
    "SEQ_HEADER",
    "WRITE_HEADERS",
    "caught_up",
    "parse_after_seq",
]

AFTER_SEQ = "after_seq"
AFTER_SEQ_WAIT = 5.0
"""The longest a read waits for the projector (seconds); then it answers with what there is."""
SEQ_HEADER = "Noema-Stream-Seq"
READ_SEQ_HEADER = "Noema-Read-Seq"
CAUGHT_UP_HEADER = "Noema-Caught-Up"
_MAX_SEQ = 2**63 - 1

AFTER_SEQ_PARAMETER: dict[str, Any] = {
    "name": AFTER_SEQ,
    "in": "query",
    "required": False,
    "description": "Read after this event-stream sequence (a write's `Noema-Stream-Seq`): wait, at most "
    f"{AFTER_SEQ_WAIT:g} s, until the read model has applied it. `Noema-Caught-Up` says whether it had.",
    "schema": {"type": "integer", "minimum": 0, "maximum": _MAX_SEQ},
}
"""The parameter every authenticated read declares in the OpenAPI document."""

_SEQ = {"type": "integer", "minimum": 0}
READ_HEADERS: dict[str, Any] = {
    READ_SEQ_HEADER: {
        "description": "With `after_seq`: the event-stream sequence the read model had applied.",
        "schema": _SEQ,
    },
    CAUGHT_UP_HEADER: {
        "description": "With `after_seq`: `true` when the read model had applied it, `false` when the "
        f"wait ({AFTER_SEQ_WAIT:g} s at most) ended first and the answer may not show the write yet.",
        "schema": {"type": "string", "enum": ["true", "false"]},
    },
}
AS_OF = "as_of"
AS_OF_SEQ_HEADER = "Noema-As-Of-Seq"
AS_OF_TIME_HEADER = "Noema-As-Of-Time"
AS_OF_PARAMETER: dict[str, Any] = {
    "name": AS_OF,
    "in": "query",
    "required": False,
    "description": "Answer as of this past point: an event-stream sequence (e.g. `1200`) or an ISO-8601 "
    "time with its zone (e.g. `2026-03-02T10:32:00Z`; a time means the last event the stream had "
    "stored by then). The state then, read with that moment as now, by the same code as the present "
    "over the read model's history, with nothing to build first. `Noema-As-Of-Seq` and "
    "`Noema-As-Of-Time` say which point the answer reflects. A point before the first event, beyond "
    "the stream's end or in the future names no state: 404; a point before the read model's history "
    "begins (a read model upgraded from a release that kept none) is a 409 saying how to ask.",
    # Sequences from 1 (the server reads a few more forms; see audit_views.POINT_PATTERN).
    "schema": {"type": "string", "pattern": "^([1-9][0-9]{0,17}|" + POINT_PATTERN.split("|", 1)[1]},
}
"""The parameter every read of memory and knowledge declares in the OpenAPI document."""
AS_OF_HEADERS: dict[str, Any] = {
    AS_OF_SEQ_HEADER: {
        "description": "With `as_of`: the event-stream sequence whose state the answer reflects.",
        "schema": _SEQ,
    },
    AS_OF_TIME_HEADER: {
        "description": "With `as_of`: the time the answer was read as of (the time asked, or the time "
        "the stream stored that event), ISO 8601.",
        "schema": {"type": "string", "format": "date-time"},
    },
}

WRITE_HEADERS: dict[str, Any] = {
    SEQ_HEADER: {
        "description": "The highest event-stream sequence this write stored (absent when it stored "
        "nothing); read with `after_seq` set to it to see the write.",
        "schema": _SEQ,
    }
}


def parse_after_seq(values: Mapping[str, list[str]]) -> int | None:
    """The ``after_seq`` query parameter (None when absent); anything but one whole number ≥ 0 is a 400."""
    given = values.get(AFTER_SEQ)
    if given is None:
        return None
    if len(given) != 1 or not given[0].isascii() or not given[0].isdigit() or int(given[0]) > _MAX_SEQ:
        raise ApiError(
            Kind.MALFORMED, f"invalid query parameter: {AFTER_SEQ} must be one whole number from 0"
        )
    return int(given[0])


async def caught_up(pool: Pool, after_seq: int) -> dict[str, str]:
    """Wait for the read model to apply ``after_seq``; the headers that tell the client how it went."""
    position = await wait_for_projection(pool, after_seq, AFTER_SEQ_WAIT)
    return {READ_SEQ_HEADER: str(position), CAUGHT_UP_HEADER: "true" if position >= after_seq else "false"}
