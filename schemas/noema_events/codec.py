"""Encoding and decoding of events, with upcasting of old versions on read."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from .catalog import EVENT_TYPES, AnyEvent
from .envelope import Event

__all__ = ["UPCASTERS", "EventDecodeError", "decode_event", "encode_event", "upcast"]

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]

UPCASTERS: dict[str, Upcaster] = {}
"""Old tag → pure function turning that version's dict into the next version's dict (with its tag).

Chains are followed until a current tag is reached. Old events on the stream are never rewritten.
"""

_decoder = msgspec.json.Decoder(AnyEvent)
_encoder = msgspec.json.Encoder()


class EventDecodeError(ValueError):
    """The bytes are not a valid event of any known version; the message says why."""


def encode_event(event: Event) -> bytes:
    """Encode an event as JSON bytes (its tag in ``type``)."""
    return _encoder.encode(event)


def upcast(raw: dict[str, Any]) -> dict[str, Any]:
    """Upcast a decoded event dict to the current version of its type (pure)."""
    seen: set[str] = set()
    while (tag := raw.get("type")) not in EVENT_TYPES:
        if not isinstance(tag, str) or tag not in UPCASTERS or tag in seen:
            raise EventDecodeError(f"unknown event type {tag!r}")
        seen.add(tag)
        raw = UPCASTERS[tag](raw)
    return raw


NUL_ESCAPE = b"\\u0000"
"""How JSON spells a NUL character."""


def decode_event(data: bytes | str) -> Event:
    """Decode an event of any known version, upcasting old ones.

    Raises :class:`EventDecodeError` with a readable reason for anything else — including text with
    a NUL character, which PostgreSQL cannot store (such an event would stall the projector).
    """
    if NUL_ESCAPE in (data.encode() if isinstance(data, str) else data):
        raise EventDecodeError("text must not contain NUL characters (\\u0000)")
    try:
        return _decoder.decode(data)
    except msgspec.ValidationError as exc:
        first_error: Exception = exc
    except msgspec.DecodeError as exc:
        raise EventDecodeError(f"not valid JSON: {exc}") from exc
    raw = msgspec.json.decode(data)
    if not isinstance(raw, dict):
        raise EventDecodeError("an event must be a JSON object")
    if raw.get("type") in EVENT_TYPES:
        raise EventDecodeError(str(first_error)) from first_error
    try:
        return msgspec.convert(upcast(raw), AnyEvent)  # type: ignore[no-any-return]
    except msgspec.ValidationError as exc:
        raise EventDecodeError(str(exc)) from exc
