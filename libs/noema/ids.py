"""Identifiers. Derived ids are deterministic so a redelivered input yields the same events,
which JetStream then deduplicates by ``Nats-Msg-Id``."""

from __future__ import annotations

import hashlib
import re
import uuid

__all__ = ["ID_PREFIX_MIN", "derive_id", "id_prefix", "new_id", "short_prefix_hint"]

ID_PREFIX_MIN = 6
"""The fewest leading characters of an id that may name a record (listings print eight)."""
_HEX = re.compile(r"[0-9a-f-]+")

_NAMESPACE = uuid.UUID("5b0e3c53-8f0e-4d8a-9a57-1f6a2f8f0a11")
_NAMESPACE_BYTES = _NAMESPACE.bytes


def new_id() -> str:
    """A fresh random id."""
    return str(uuid.uuid4())


def derive_id(*parts: str) -> str:
    """A stable id from its parts (same parts → same id): ``uuid5(NAMESPACE, "\\x1f".join(parts))``.

    Computed without building UUID objects: it runs several times per observation on the hot path.
    """
    digest = bytearray(hashlib.sha1(_NAMESPACE_BYTES + "\x1f".join(parts).encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50
    digest[8] = (digest[8] & 0x3F) | 0x80
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def id_prefix(given: str) -> str | None:
    """A ``LIKE`` pattern for the ids that start with ``given``, or None when ``given`` is not a usable
    prefix (too short, or not made of an id's characters)."""
    text = given.strip().lower()
    return f"{text}%" if len(text) >= ID_PREFIX_MIN and _HEX.fullmatch(text) else None


def short_prefix_hint(given: str) -> str:
    """What to add to "not found" when ``given`` looks like an id prefix too short to be used."""
    text = given.strip().lower()
    if text and len(text) < ID_PREFIX_MIN and _HEX.fullmatch(text):
        return f" (give at least {ID_PREFIX_MIN} characters of an id)"
    return ""
