"""The one decoding of structured input, for every surface: the HTTP API's query strings and JSON
bodies, ``noemactl``'s options, the agent tools (MCP and NATS) and the NATS service's ``observe``.

Fields holding a date or time are read by :func:`~noema.instants.parse_instant` (an RFC 3339
timestamp, an ISO timestamp without a zone, taken as UTC, or a plain date), the rest is checked by
msgspec, and a refusal is one sentence (:func:`~noema_events.messages.humanize`), raised as
:class:`InvalidInput`. So a date means the same thing, and is refused for the same reason, everywhere.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec
import msgspec.inspect

from noema.errors import Kind, NoemaError
from noema.instants import InvalidInstant, parse_instant
from noema_events.messages import humanize

__all__ = ["InvalidInput", "anchored_fields", "convert", "instant_fields", "text_dates"]

T = TypeVar("T")


class InvalidInput(NoemaError, ValueError):
    """The input does not fit its type; the message names the field and what is accepted."""

    kind = Kind.INVALID


@functools.cache
def instant_fields(struct: type[msgspec.Struct]) -> frozenset[str]:
    """The (encoded) names of ``struct``'s fields holding a date or time."""
    info = msgspec.inspect.type_info(struct)
    assert isinstance(info, msgspec.inspect.StructType)
    names = []
    for f in info.fields:
        t = _bare(f.type)  # Annotated[Instant | None, Meta(description=...)]: metadata around a union
        types = tuple(map(_bare, t.types if isinstance(t, msgspec.inspect.UnionType) else (t,)))
        if any(isinstance(t, msgspec.inspect.DateTimeType) for t in types):
            names.append(f.encode_name)
    return frozenset(names)


@functools.cache
def anchored_fields(struct: type[msgspec.Struct]) -> frozenset[str]:
    """The (encoded) names of ``struct``'s text fields constrained by a pattern ending in ``$``.

    msgspec checks a pattern with Python's ``re.search``, where ``$`` also matches before a final
    line break: ``acme\\n`` passes ``^[A-Za-z0-9_-]{1,64}$`` (and then breaks a NATS subject).
    :func:`convert` refuses that line break in these fields, as JSON Schema's ``$`` does.
    """
    info = msgspec.inspect.type_info(struct)
    assert isinstance(info, msgspec.inspect.StructType)
    names = []
    for f in info.fields:
        t = _bare(f.type)
        for member in map(_bare, t.types if isinstance(t, msgspec.inspect.UnionType) else (t,)):
            if isinstance(member, msgspec.inspect.StrType) and (member.pattern or "").endswith("$"):
                names.append(f.encode_name)
    return frozenset(names)


def _bare(t: msgspec.inspect.Type) -> msgspec.inspect.Type:
    while isinstance(t, msgspec.inspect.Metadata):
        t = t.type
    return t


def convert(struct: type[T], data: Any, *, strict: bool = True, whole: str = "the input") -> T:
    """``data`` (decoded JSON, or typed values) as ``struct``: its date/time fields read by
    :func:`parse_instant` (``null`` stays ``null``), then every constraint checked.

    ``strict=False`` also reads numbers and booleans from text (query strings). ``whole`` names the
    input in messages (e.g. ``the body``). Raises :class:`InvalidInput`.
    """
    if isinstance(data, Mapping) and isinstance(struct, type) and issubclass(struct, msgspec.Struct):
        data = dict(data)
        for name in sorted(instant_fields(struct) & data.keys()):
            if data[name] is not None:
                try:
                    data[name] = parse_instant(data[name], name)
                except InvalidInstant as exc:
                    raise InvalidInput(str(exc)) from None
    try:
        converted = msgspec.convert(data, struct, strict=strict)
    except msgspec.ValidationError as exc:
        raise InvalidInput(humanize(exc, data, struct=struct, whole=whole)) from None
    if isinstance(converted, msgspec.Struct):
        for name in sorted(anchored_fields(type(converted))):
            value = getattr(converted, _attr(type(converted), name))
            if isinstance(value, str) and value.endswith("\n"):
                raise InvalidInput(f"{name} {value!r} must not end with a line break")
    return converted


def _attr(struct: type[msgspec.Struct], encoded: str) -> str:
    """The attribute name of an encoded field name (they differ only when a field is renamed)."""
    names = dict(zip(struct.__struct_encode_fields__, struct.__struct_fields__, strict=True))
    return names[encoded]


def text_dates(schema: Any) -> Any:
    """An input's JSON Schema with ``format: date-time`` dropped: :func:`convert` takes more than
    RFC 3339 (the fields' descriptions say what), so a client validating the format must not refuse
    a plain date."""
    if isinstance(schema, dict):
        return {k: text_dates(v) for k, v in schema.items() if not (k == "format" and v == "date-time")}
    if isinstance(schema, list):
        return [text_dates(v) for v in schema]
    return schema
