"""Sealed text: content fields of events encrypted under a per-item data key, so that destroying the
key erases the content from the append-only stream without rewriting it (crypto-shredding).

A sealed field is a string ``nsl1:<key id>:<base64url(nonce ‖ AES-256-GCM ciphertext ‖ tag)>``; the
key id is bound to the ciphertext as associated data, so a sealed value cannot be moved under another
key. A field that does not start with the prefix is plaintext (events written before sealing, or by
a writer without a keyring) and reads as it is.

Opening a sealed field whose key was destroyed gives :data:`ERASED` (the empty string): the item
reads as erased, never as a crash. This module is pure; where keys live is the keyring's business
(:mod:`noema.adapters.postgres.keyring`).
"""

from __future__ import annotations

import base64
import binascii
import os
import struct
from collections.abc import Mapping, Sequence

__all__ = [
    "ERASED",
    "PREFIX",
    "KeyBytes",
    "is_sealed",
    "new_key",
    "open_text",
    "open_vector",
    "seal_text",
    "seal_vector",
    "sealed_key_id",
]

PREFIX = "nsl1:"
"""What every sealed field starts with (version 1 of the format)."""

ERASED = ""
"""What a sealed field whose key is gone reads as."""

KEY_BYTES = 32
NONCE_BYTES = 12

KeyBytes = bytes | None
"""A data key, or None once destroyed (erased)."""


def new_key() -> bytes:
    """A fresh random AES-256 data key."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return AESGCM.generate_key(bit_length=KEY_BYTES * 8)


def is_sealed(value: str) -> bool:
    return value.startswith(PREFIX)


def sealed_key_id(value: str) -> str | None:
    """The key id a sealed field names (None for plaintext or a malformed seal)."""
    if not is_sealed(value):
        return None
    key_id, sep, _ = value[len(PREFIX) :].partition(":")
    return key_id if sep and key_id else None


def seal_text(text: str, key_id: str, key: KeyBytes) -> str:
    """``text`` sealed under ``key`` (:data:`ERASED` when the key is destroyed: nothing new is
    written under an erased item). Empty text stays empty."""
    if key is None or not text:
        return ERASED
    return _seal(text.encode(), key_id, key)


def open_text(value: str, keys: Mapping[str, KeyBytes]) -> str:
    """The plaintext of a field: itself when not sealed, :data:`ERASED` when its key is destroyed,
    unknown, or the seal does not verify."""
    data = _open(value, keys)
    if data is None:
        return value if not is_sealed(value) else ERASED
    return data.decode(errors="replace")


def seal_vector(vector: Sequence[float], key_id: str, key: KeyBytes) -> str:
    """A vector sealed as little-endian float64 values (exact round trip)."""
    if key is None:
        return ERASED
    return _seal(struct.pack(f"<{len(vector)}d", *vector), key_id, key)


def open_vector(value: str, keys: Mapping[str, KeyBytes]) -> list[float]:
    """The vector of a sealed field; empty when erased or unreadable."""
    data = _open(value, keys)
    if data is None or len(data) % 8:
        return []
    return list(struct.unpack(f"<{len(data) // 8}d", data))


# cryptography is loaded by the first seal or open, not by every process that imports this module
# (a search of plaintext memories never needs it).


def _seal(data: bytes, key_id: str, key: bytes) -> str:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = os.urandom(NONCE_BYTES)
    sealed = AESGCM(key).encrypt(nonce, data, key_id.encode())
    return f"{PREFIX}{key_id}:{base64.urlsafe_b64encode(nonce + sealed).decode()}"


def _open(value: str, keys: Mapping[str, KeyBytes]) -> bytes | None:
    key_id = sealed_key_id(value)
    if key_id is None:
        return None
    key = keys.get(key_id)
    if key is None:
        return None
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    try:
        raw = base64.urlsafe_b64decode(value[len(PREFIX) + len(key_id) + 1 :])
        return AESGCM(key).decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], key_id.encode())
    except (binascii.Error, ValueError, InvalidTag):
        return None
