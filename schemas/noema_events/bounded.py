"""Bounded decoding: the one way Noema reads JSON it did not just build itself (docs/reliability.md).

Every byte string Noema reads — a NATS message on any subject, a message met in a stream scan
(erasure, replay, dead-letter tooling, as-of builds), an HTTP or MCP body, an agent-service request —
is decoded by :func:`decode_json` (or checked by :func:`check_bounds` before a decoder of its own),
which refuses it with :class:`Undecodable` before the parser sees it when it is too large or nested
too deep. A parser recursing through 5,000 levels raises ``RecursionError``, and so does code walking
the result: that would be a crash (a 500, a traceback, an erasure that never finishes), never a
refusal saying what is wrong. Decoded values handed over by a library (an MCP SDK's arguments) are
checked by :func:`check_value_depth`.

The depth check is a pre-scan of the bytes: counting brackets is one pass in C; only a document with
more brackets than the depth limit has its strings removed and its brackets kept, and its innermost
pairs removed up to ``max_depth`` times, each a pass in C, after which a document within the limit has
none left; only what is left then (too deep, or unbalanced) is measured exactly, stopping at the first
level past the limit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from itertools import accumulate
from typing import Any, TypeVar, overload

import msgspec

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "OutOfBounds",
    "Undecodable",
    "check_bounds",
    "check_value_depth",
    "decode_json",
    "json_depth",
]

T = TypeVar("T")

MAX_BYTES = 1024 * 1024
"""The largest JSON document decoded by default (1 MiB): the biggest real event (an attention cycle of
500 decisions) is a few hundred KB; the HTTP servers bound their bodies themselves (``BodyLimit``)."""

MAX_DEPTH = 32
"""The deepest nesting of arrays and objects decoded. Real events and request bodies nest at most
five or six levels; a deeper document is refused before the parser sees it, so no decoder and no
code walking its result can run out of stack on it."""


class Undecodable(ValueError):
    """The bytes are not a document of the expected shape: too large, nested too deep, not UTF-8, not
    JSON, or not of the expected type. The message says which (every surface reports it as
    ``invalid``, or ``malformed`` where it tells broken JSON apart)."""


class OutOfBounds(Undecodable):
    """The document is refused before it is parsed: larger than the size limit or nested deeper than
    the depth limit."""


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS = b"[]{}"
_NOT_BRACKETS = bytes(b for b in range(256) if b not in _BRACKETS)
_ONE_KIND = bytes.maketrans(b"{}", b"[]")


def _brackets(data: bytes) -> bytes:
    """The brackets of ``data`` outside strings, in order."""
    return _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)


def json_depth(data: bytes, limit: int | None = None) -> int:
    """The deepest nesting of ``[``/``{`` outside strings (exact for valid JSON, a bound otherwise);
    with ``limit``, counting stops at the first level deeper than it (the answer is then limit + 1)."""
    levels = accumulate(1 if b in b"[{" else -1 for b in _brackets(data))
    deepest = 0
    for level in levels:
        if level > deepest:
            deepest = level
            if limit is not None and deepest > limit:
                return deepest
    return deepest


def _too_deep(data: bytes, max_depth: int) -> bool:
    if data.count(b"[") + data.count(b"{") <= max_depth:
        return False  # cannot nest deeper than it has brackets: the common case, one pass in C
    # A bound first, in C: the brackets outside strings, as one kind; each replace removes the
    # innermost pairs, one level (it does not look again at the pairs it forms). Strings go first:
    # a bracket inside one could pair with a real one and hide a level.
    rest = _STRING.sub(b"", data).translate(_ONE_KIND, _NOT_BRACKETS)
    run = b"[" * (max_depth + 1)  # in the bound, a level past the limit: measure exactly at once
    for _ in range(max_depth):
        if not rest or run in rest:
            break
        shorter = rest.replace(b"[]", b"")
        if len(shorter) == len(rest):
            break
        rest = shorter
    if not rest:
        return False
    # Deeper than the limit, or they do not balance (broken JSON, which the parser reports unless
    # it is also too deep): the exact measure decides.
    return json_depth(data, max_depth) > max_depth


def check_bounds(
    data: bytes, *, max_bytes: int | None = MAX_BYTES, max_depth: int = MAX_DEPTH, what: str = "the message"
) -> None:
    """Raise :class:`OutOfBounds` when ``data`` is larger than ``max_bytes`` (None: the caller bounds
    the size itself) or nests deeper than ``max_depth``; ``what`` names it in the message."""
    if max_bytes is not None and len(data) > max_bytes:
        raise OutOfBounds(f"{what} is {len(data):,} bytes; the limit is {max_bytes:,} bytes")
    if _too_deep(data, max_depth):
        raise OutOfBounds(
            f"{what} nests arrays or objects more than {max_depth} levels deep; the limit is {max_depth}"
        )


@overload
def decode_json(
    data: bytes | bytearray | memoryview | str,
    *,
    max_bytes: int | None = ...,
    max_depth: int = ...,
    what: str = ...,
) -> Any: ...
@overload
def decode_json(
    data: bytes | bytearray | memoryview | str,
    type: type[T],
    *,
    max_bytes: int | None = ...,
    max_depth: int = ...,
    what: str = ...,
) -> T: ...
def decode_json(
    data: bytes | bytearray | memoryview | str,
    type: Any = Any,
    *,
    max_bytes: int | None = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    what: str = "the message",
) -> Any:
    """``data`` decoded as JSON (as ``type`` when given), within the bounds of :func:`check_bounds`.

    Raises :class:`Undecodable` (:class:`OutOfBounds` for the bounds) with a readable reason, and
    never anything else: not JSON, not UTF-8, numbers out of range, not of ``type``.
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    check_bounds(raw, max_bytes=max_bytes, max_depth=max_depth, what=what)
    try:
        return msgspec.json.decode(raw) if type is Any else msgspec.json.decode(raw, type=type)
    except msgspec.ValidationError as exc:
        raise Undecodable(f"{what} is not as expected: {exc}") from None
    except msgspec.DecodeError as exc:
        raise Undecodable(f"{what} is not JSON in UTF-8: {exc}") from None
    except RecursionError:  # unreachable after the depth check; the last line of defence
        raise OutOfBounds(f"{what} nests arrays or objects too deeply") from None


def check_value_depth(value: Any, max_depth: int = MAX_DEPTH, what: str = "the input") -> None:
    """Raise :class:`OutOfBounds` when a decoded value (dicts and lists) nests deeper than
    ``max_depth``; walked without recursion, so any depth is measured safely."""
    level: list[tuple[Any, int]] = [(value, 1)]
    while level:
        item, depth = level.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > max_depth:
            raise OutOfBounds(
                f"{what} nests arrays or objects more than {max_depth} levels deep; the limit is {max_depth}"
            )
        level.extend((child, depth + 1) for child in children if isinstance(child, dict | list | tuple))
