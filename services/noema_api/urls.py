"""Strict reading of a request's path and query string.

The ASGI server and Starlette decode percent-escapes leniently: an escape that is not UTF-8 becomes
U+FFFD and a malformed one (``%zz``) is kept as typed, so a client's encoding bug would silently look
up something else. Here both are refused (400) with what to fix.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_to_bytes

from noema.errors import Kind

from .errors import ApiError

__all__ = ["check_path", "query_params"]

_BAD_ESCAPE = re.compile(rb"%(?![0-9A-Fa-f]{2})")


def _decode(raw: bytes, what: str) -> str:
    bad = _BAD_ESCAPE.search(raw)
    if bad:
        near = raw[bad.start() : bad.start() + 3].decode("latin-1")
        raise ApiError(Kind.MALFORMED, f"malformed percent-encoding in {what} ({near!r}): write '%' as %25")
    try:
        return unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(
            Kind.MALFORMED, f"{what} is not valid UTF-8 once percent-decoded: encode text as UTF-8"
        ) from None


def query_params(raw: bytes) -> dict[str, list[str]]:
    """The parameters of a raw query string (``+`` is a space), each with every value given."""
    params: dict[str, list[str]] = {}
    for part in raw.split(b"&"):
        if not part:
            continue
        name, _, value = part.replace(b"+", b" ").partition(b"=")
        key = _decode(name, "the query string")
        params.setdefault(key, []).append(_decode(value, f"query parameter {key!r}"))
    return params


def check_path(raw: bytes) -> None:
    """Refuse a path with a malformed escape or one that does not decode as UTF-8."""
    _decode(raw.partition(b"?")[0], "the path")
