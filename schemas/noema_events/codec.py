"""Encoding and decoding of events, with upcasting of old versions on read."""

from __future__ import annotations

import functools
import re
from typing import Any, NamedTuple

import msgspec

from .bounded import MAX_BYTES, MAX_DEPTH, OutOfBounds, Undecodable, check_bounds
from .catalog import EVENT_TYPES, AnyEvent
from .envelope import Event
from .upcasting import EARLIER_TYPES, UPCASTERS

__all__ = [
    "KNOWN_TAGS",
    "MAX_DEPTH",
    "MAX_EVENT_BYTES",
    "UPCASTERS",
    "EventDecodeError",
    "Recorded",
    "decode_event",
    "decode_recorded",
    "encode_event",
    "upcast",
]


KNOWN_TAGS: frozenset[str] = frozenset({*EVENT_TYPES, *EARLIER_TYPES})
"""Every tag a stream may hold and the audit copy keeps: the current versions and the earlier ones
still read."""


class Recorded(NamedTuple):
    """An event as the stream holds it, when that is an earlier version than the one it is read as:
    its tag and its payload as JSON, encoded as the code of that version encoded it (what the audit
    copy keeps, so that it stays a copy of what was recorded)."""

    type: str
    payload: str


_encoder = msgspec.json.Encoder()


@functools.cache
def _decoder() -> msgspec.json.Decoder[AnyEvent]:
    """The decoder of every current event, made by the first decode: making it evaluates every
    event's annotations (a few ms), which a process that never decodes an event (``noemactl memory
    search``, issue 32: its start-up) does not pay."""
    return msgspec.json.Decoder(AnyEvent)


class EventDecodeError(Undecodable):
    """The bytes are not a valid event of any known version; the message says why."""


def encode_event(event: Event) -> bytes:
    """Encode an event as JSON bytes (its tag in ``type``)."""
    return _encoder.encode(event)


def upcast(raw: dict[str, Any]) -> dict[str, Any]:
    """Upcast a decoded event dict to the current version of its type (pure)."""
    seen: set[str] = set()
    while (tag := raw.get("type")) not in EVENT_TYPES:
        if tag is None:
            fields = ", ".join(sorted(map(str, raw))) or "none"
            raise EventDecodeError(
                "not an event: no `type` field (an event's type, e.g. memory.created.v1); "
                f"its fields: {fields}"
            )
        if not isinstance(tag, str):
            raise EventDecodeError(f"`type` must be an event type (text), not {type(tag).__name__}")
        if tag not in UPCASTERS or tag in seen:
            raise EventDecodeError(f"unknown event type {tag!r}")
        seen.add(tag)
        raw = UPCASTERS[tag](raw)
    return raw


NUL_ESCAPE = b"\\u0000"
"""How JSON spells a NUL character."""
_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")
"""A NUL in JSON text: ``\\u0000`` not itself escaped (``\\\\u0000`` is the six characters of that
spelling, which are fine). A raw NUL byte is not JSON at all: the parser says so."""

MAX_EVENT_BYTES = MAX_BYTES
"""The largest message decoded (1 MiB): :data:`noema_events.bounded.MAX_BYTES`."""


def _check_bounds(data: bytes) -> None:
    try:
        check_bounds(data, max_bytes=MAX_EVENT_BYTES, max_depth=MAX_DEPTH, what="the message")
    except OutOfBounds as exc:
        raise EventDecodeError(str(exc)) from None
    if NUL_ESCAPE in data and _NUL.search(data):
        raise EventDecodeError("text must not contain NUL characters (U+0000)")


def decode_event(data: bytes | str) -> Event:
    """Decode an event of any known version, upcasting old ones.

    Raises :class:`EventDecodeError` with a readable reason for anything else, and never anything
    else: too large (:data:`MAX_EVENT_BYTES`), nested too deep (:data:`MAX_DEPTH`), not JSON, not
    UTF-8, numbers out of range, wrong types, and text with a NUL character, which PostgreSQL cannot
    store (such an event would stall the projector).
    """
    return decode_recorded(data)[0]


def decode_recorded(data: bytes | str) -> tuple[Event, Recorded | None]:
    """Like :func:`decode_event`, and the event as recorded when it was upcast (None when the bytes
    are of the current version)."""
    raw_bytes = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    _check_bounds(raw_bytes)
    try:
        return _decode(raw_bytes)
    except EventDecodeError:
        raise
    except RecursionError as exc:  # unreachable after the depth check; kept as the last line of defence
        raise EventDecodeError("JSON nests too deeply") from exc
    except (msgspec.MsgspecError, ValueError, TypeError, OverflowError) as exc:
        raise EventDecodeError(str(exc) or type(exc).__name__) from exc


def _decode(data: bytes) -> tuple[Event, Recorded | None]:
    try:
        return _decoder().decode(data), None
    except msgspec.ValidationError as exc:
        first_error: Exception = exc
    except msgspec.DecodeError as exc:
        raise EventDecodeError(f"not valid JSON: {exc}") from exc
    raw = msgspec.json.decode(data)
    if not isinstance(raw, dict):
        raise EventDecodeError("an event must be a JSON object")
    tag = raw.get("type")
    if tag in EVENT_TYPES:
        raise EventDecodeError(str(first_error)) from first_error
    try:
        earlier = EARLIER_TYPES.get(tag) if isinstance(tag, str) else None
        if earlier is not None:
            # Decoded as its own version first: refused exactly when its own code refused it, and
            # its payload re-encoded exactly as that code encoded it.
            old: Any = msgspec.json.decode(data, type=earlier)
            recorded = Recorded(str(tag), _encoder.encode(old.payload).decode())
            raw = msgspec.to_builtins(old)
        else:
            recorded = Recorded(str(tag), _encoder.encode(raw.get("payload")).decode())
        return msgspec.convert(upcast(raw), AnyEvent), recorded
    except msgspec.ValidationError as exc:
        raise EventDecodeError(str(exc)) from exc
