"""Date-times in the published JSON Schemas: what the server's decoder accepts, as a ``pattern``.

msgspec 0.23 describes a ``datetime`` field as ``{"type": "string"}`` (``format: date-time`` only for
``Meta(tz=True)``), so a schema-valid event could carry ``"occurred_at": "not-a-date"`` that the
server dead-letters. ``format`` alone would not help: in JSON Schema 2020-12 it is an annotation
unless a validator is told to assert it, and RFC 3339's ``date-time`` is not exactly what msgspec
reads. :data:`DATETIME_PATTERN` is: every string it matches, msgspec decodes, and every string
msgspec decodes, it matches (a test checks both directions on a grammar of near-misses):

- ``YYYY-MM-DD``, year 0001-9999, a real calendar day (29 February in leap years only);
- ``T``, ``t`` or a space, then ``hh:mm:ss`` (00-23, 00-59, 00-59: no leap second ``:60``);
- optionally ``.`` and one or more digits (any number; read to microseconds, rounded);
- optionally a zone: ``Z``, ``z``, or ``+hh:mm`` / ``-hh:mm`` / ``+hhmm`` (hours 00-23). **The zone
  is optional**: the catalog's datetimes are plain ``datetime`` fields, and msgspec reads a time
  without one as a naive (local) time. Publish RFC 3339 with ``Z`` or an offset.

One spelling it cannot see: a fraction that rounds ``9999-12-31T23:59:59`` past the year 9999 is
refused by the server and matched here (no regex should carry that).
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import inspect as mi

__all__ = ["DATETIME_PATTERN", "with_datetimes"]

_YEAR = "(?:000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})"
_LEAP_YEAR = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_MONTH_DAY = (
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    "|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
_DATE = f"(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"
_TIME = "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]+)?"
_ZONE = "(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):?[0-5][0-9])"

DATETIME_PATTERN = f"^{_DATE}[Tt ]{_TIME}{_ZONE}?$"
"""Exactly the date-time strings msgspec 0.23 decodes (ECMA-262 and Python ``re`` alike: no
look-around, no classes beyond ``[0-9]``)."""

_DATETIME_SCHEMA = {
    "format": "date-time",
    "pattern": DATETIME_PATTERN,
    "$comment": (
        "RFC 3339 is what to publish; the pattern is what the server reads (also a space for T, "
        "+hhmm, and no zone, taken as a naive time)"
    ),
}


def _is_datetime(t: mi.Type) -> bool:
    return isinstance(t.type if isinstance(t, mi.Metadata) else t, mi.DateTimeType)


def _patch(node: Any, t: mi.Type) -> None:
    """Add the date-time constraint wherever ``t`` (the type ``node`` describes) holds a datetime."""
    if isinstance(t, mi.Metadata):
        t = t.type
    if isinstance(t, mi.DateTimeType):
        node.update(_DATETIME_SCHEMA)
    elif isinstance(t, mi.UnionType) and any(_is_datetime(x) for x in t.types):
        # msgspec refuses unions of two string-like types, so the one plain string branch is it.
        (branch,) = (b for b in node["anyOf"] if b.get("type") == "string")
        branch.update(_DATETIME_SCHEMA)
    elif isinstance(t, mi.ListType | mi.SetType | mi.FrozenSetType | mi.VarTupleType) and "items" in node:
        _patch(node["items"], t.item_type)
    elif isinstance(t, mi.DictType) and "additionalProperties" in node:  # absent for dict[str, Any]
        _patch(node["additionalProperties"], t.value_type)


def with_datetimes(components: dict[str, Any], classes: list[Any]) -> dict[str, Any]:
    """``components`` (as :func:`msgspec.json.schema_components` returns them for ``classes``), with
    ``format: date-time`` and :data:`DATETIME_PATTERN` on every datetime field of every Struct."""
    out: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(components))  # a deep copy
    seen: set[type] = set()
    todo = list(mi.multi_type_info(classes))
    while todo:
        info = todo.pop()
        if isinstance(info, mi.Metadata):
            todo.append(info.type)
        elif isinstance(info, mi.StructType) and info.cls not in seen:
            seen.add(info.cls)
            props = out.get(info.cls.__name__, {}).get("properties", {})
            for f in info.fields:
                if f.encode_name in props:
                    _patch(props[f.encode_name], f.type)
                todo.append(f.type)
        elif isinstance(info, mi.UnionType):
            todo.extend(info.types)
        elif isinstance(info, mi.ListType | mi.SetType | mi.FrozenSetType | mi.VarTupleType):
            todo.append(info.item_type)
        elif isinstance(info, mi.DictType):
            todo.append(info.value_type)
    return out
