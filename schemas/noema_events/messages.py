"""msgspec's validation messages in words a user reads: the one translation, for every surface (CLI,
HTTP API, MCP and NATS tools, the publisher client).

msgspec says ``Expected `str` matching regex '\\\\S' - at `$.content```; a user should read
``content must not be blank``. :func:`humanize` turns a :class:`msgspec.ValidationError` (or
:class:`msgspec.DecodeError`) into such a sentence, naming the field, the value when it helps, and
what is accepted; given the Struct that was decoded, an unknown field is answered with the accepted
fields and an unknown choice with the accepted values.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from typing import Any

import msgspec
import msgspec.inspect

from .envelope import NAME_PATTERN

__all__ = ["PATTERNS", "humanize"]

_NAME = "1-64 letters, digits, '_' or '-'"
PATTERNS: dict[str, str] = {
    NAME_PATTERN: f"a valid name: {_NAME}",
    r"^[A-Za-z0-9_-]{0,64}$": "a valid name: up to 64 letters, digits, '_' or '-'",
    rf"^(\*|{NAME_PATTERN[1:-1]})$": f"'*' or a valid name: {_NAME}",
    r"^(\*|[A-Za-z0-9_-]{1,64})$": f"'*' or a valid name: {_NAME}",
    r"^[0-9a-f]{64}$": "a SHA-256 digest: 64 lowercase hexadecimal digits",
    r"^[a-z0-9][a-z0-9._-]{0,99}$": (
        "a valid slug: 1-100 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit"
    ),
    r"^[a-z_]+(\.[a-z_]+)*(\.v[0-9]+)?$": "an event type, e.g. operator.action or operator.action.v1",
}
"""What each pattern of the catalog and the API models accepts, in words (``\\S`` = not blank)."""

_TYPES = {
    "str": "text",
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
    "datetime": "a date-time",
    "date": "a date",
}
_BOUNDS = {">=": "at least", "<=": "at most", ">": "greater than", "<": "less than"}
_SHOWN = 60


def _value_at(data: Any, path: str) -> Any:
    """The value at msgspec's ``path`` (``$.a.b[0]``) in ``data``, or ``...`` when there is none."""
    value = data
    for key, index in re.findall(r"\.([^.\[]+)|\[(\d+)\]", path.removeprefix("$")):
        try:
            value = value[key] if key else value[int(index)]
        except (KeyError, IndexError, TypeError, ValueError):
            return ...
    return value


def _shown(value: Any) -> str:
    if isinstance(value, str) and len(value) > _SHOWN:
        value = value[: _SHOWN - 1] + "…"
    return repr(value)


def _field_info(struct: type[Any] | None, path: str) -> msgspec.inspect.Type | None:
    """The msgspec type of the field at ``path`` in ``struct`` (through nested Structs)."""
    if struct is None:
        return None
    info: msgspec.inspect.Type | None = msgspec.inspect.type_info(struct)
    for key, _ in re.findall(r"\.([^.\[]+)|\[(\d+)\]", path.removeprefix("$")):
        if not key:
            return None
        info = _bare(info)
        if isinstance(info, msgspec.inspect.UnionType):
            info = next(
                (t for t in map(_bare, info.types) if isinstance(t, msgspec.inspect.StructType)), None
            )
        if not isinstance(info, msgspec.inspect.StructType):
            return None
        info = next((f.type for f in info.fields if f.encode_name == key), None)
    return info


def _bare(info: msgspec.inspect.Type | None) -> msgspec.inspect.Type | None:
    return info.type if isinstance(info, msgspec.inspect.Metadata) else info


def _choices(info: msgspec.inspect.Type | None) -> list[Any]:
    info = _bare(info)
    types = info.types if isinstance(info, msgspec.inspect.UnionType) else (info,)
    found: list[Any] = []
    for t in types:
        t = _bare(t)
        if isinstance(t, msgspec.inspect.LiteralType):
            found += t.values
        elif isinstance(t, msgspec.inspect.EnumType):
            found += [m.value for m in t.cls]
    return found


def _accepted(info: msgspec.inspect.Type | None) -> list[str]:
    info = _bare(info)
    if isinstance(info, msgspec.inspect.UnionType):
        info = next((t for t in map(_bare, info.types) if isinstance(t, msgspec.inspect.StructType)), None)
    if isinstance(info, msgspec.inspect.StructType):
        return [f.encode_name for f in info.fields]
    return []


def humanize(
    exc: msgspec.ValidationError | msgspec.DecodeError | str,
    data: Any = ...,
    *,
    struct: type[Any] | None = None,
    accepted: Iterable[str] | None = None,
    whole: str = "the input",
    drop: str = "$.payload",
) -> str:
    """``exc`` as a sentence naming the field (``payload.`` dropped: it is the event's envelope).

    ``data`` (the decoded input, when there is one) lets it quote the refused value; ``struct`` (the
    type decoded into) lets it list the accepted fields and values; ``accepted`` overrides the field
    list; ``whole`` names the input itself (e.g. ``the body``, ``the query``).
    """
    text = str(exc)
    found = re.fullmatch(r"(?s)(.*?)(?: - at `(\$[^`]*)`)?", text)
    assert found is not None
    message, path = found[1], found[2] or "$"
    label = re.sub(rf"^{re.escape(drop)}(?=[.\[]|$)", "$", path) if drop else path
    label = label.removeprefix("$").removeprefix(".")
    subject = label or whole
    value = _value_at(data, path)
    info = _field_info(struct, path)

    if isinstance(exc, msgspec.DecodeError) and not isinstance(exc, msgspec.ValidationError):
        return f"{whole} is not valid JSON: {message.removeprefix('JSON is malformed: ')}"
    if m := re.fullmatch(r"Expected `str` matching regex (.+)", message):
        pattern = ast.literal_eval(m[1])
        if pattern == r"\S":
            return f"{subject} must not be blank"
        described = PATTERNS.get(pattern, f"text matching the pattern {pattern}")
        quoted = f" {_shown(value)}" if value is not ... else ""
        return f"{subject}{quoted} is not {described}"
    if m := re.fullmatch(r"Expected `(str|array|object)` of length (>=|<=) (\d+)", message):
        unit = "characters" if m[1] == "str" else "items" if m[1] == "array" else "entries"
        if m[2] == ">=" and m[3] == "1":
            return f"{subject} must not be empty"
        return f"{subject} must have {_BOUNDS[m[2]]} {m[3]} {unit}"
    if m := re.fullmatch(r"Expected `(int|float)` (>=|<=|>|<) (\S+)", message):
        quoted = f" (got {_shown(value)})" if value is not ... else ""
        return f"{subject} must be {_BOUNDS[m[2]]} {m[3]}{quoted}"
    if m := re.fullmatch(r"Expected `([^`]+)`, got `([^`]+)`", message):
        wanted = " or ".join(_TYPES.get(t, t) for t in m[1].split(" | ") if t != "null")
        return f"{subject} must be {wanted} (got {_TYPES.get(m[2], m[2])})"
    if m := re.fullmatch(r"Invalid enum value (.+)", message):
        choices = _choices(info)
        listed = f"; one of: {', '.join(map(str, choices))}" if choices else ""
        return f"{subject} {m[1]} is not accepted{listed}"
    if m := re.fullmatch(r"Object contains unknown field `([^`]+)`", message):
        names = list(accepted) if accepted is not None else _accepted(info)
        where = f" in {label}" if label else ""
        listed = f"; accepted fields: {', '.join(names)}" if names else ""
        return f"unknown field `{m[1]}`{where}{listed}"
    if m := re.fullmatch(r"Object missing required field `([^`]+)`", message):
        where = f" (in {label})" if label else ""
        return f"`{m[1]}` is required{where}"
    if message == "Invalid RFC3339 encoded datetime":
        quoted = f" {_shown(value)}" if value is not ... else ""
        return f"{subject}{quoted} is not a date-time: give an RFC 3339 timestamp, e.g. 2026-03-01T09:30:00Z"
    if message == "Expected `datetime` with a timezone component":
        return f"{subject} must carry a time zone, e.g. 2026-03-01T09:30:00Z or 2026-03-01T09:30:00+01:00"
    return f"{subject}: {message}" if label else message
