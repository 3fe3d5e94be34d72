"""How much the dead-letter stream keeps: its age and size limits, and how a big original is stored.

A dead letter exists so that an operator can see why a message was refused and re-drive it after a
fix; it is not the source of truth (the observation or event stream is). So unlike the other
streams it has limits: dead letters older than ``max_age_s`` or beyond ``max_bytes`` (oldest first)
are discarded by JetStream, and an original bigger than ``DEFAULT_KEEP_BYTES`` is stored truncated,
with its real size and SHA-256 in headers (one 5 MB poison message must not cost 5 MB for a month).
"""

from __future__ import annotations

import hashlib

from noema.records import dataclass

__all__ = [
    "DEFAULT_KEEP_BYTES",
    "DEFAULT_MAX_AGE_S",
    "DEFAULT_MAX_BYTES",
    "ORIGINAL_SHA256",
    "ORIGINAL_SIZE",
    "TRUNCATED",
    "DeadLetterPolicy",
    "kept_original",
]

DEFAULT_MAX_AGE_S = 30 * 86400.0
"""Dead letters are kept 30 days by default."""
DEFAULT_MAX_BYTES = 1 << 30
"""At most 1 GiB of dead letters by default (the oldest go first)."""
DEFAULT_KEEP_BYTES = 1 << 20
"""Originals above 1 MiB are stored truncated to their first 1 MiB (``dead_letter(keep_bytes=...)``)."""

TRUNCATED = "Noema-Truncated"
"""Header set (to ``true``) on a dead letter whose stored data is only the start of the original."""
ORIGINAL_SIZE = "Noema-Original-Size"
"""Header: the original's size in bytes (on truncated dead letters)."""
ORIGINAL_SHA256 = "Noema-Original-Sha256"
"""Header: the hex SHA-256 of the whole original (on truncated dead letters)."""


@dataclass(frozen=True, slots=True)
class DeadLetterPolicy:
    """Limits of the dead-letter stream (0: no limit)."""

    max_age_s: float = DEFAULT_MAX_AGE_S
    max_bytes: int = DEFAULT_MAX_BYTES

    @property
    def stream_max_bytes(self) -> int:
        """``max_bytes`` as JetStream wants it (-1: unlimited)."""
        return self.max_bytes if self.max_bytes > 0 else -1


def kept_original(data: bytes, keep_bytes: int = DEFAULT_KEEP_BYTES) -> tuple[bytes, dict[str, str]]:
    """What the dead-letter stream stores of ``data``: all of it when it is at most ``keep_bytes``,
    else its first ``keep_bytes`` and the headers that say so (size and SHA-256 of the whole)."""
    if len(data) <= keep_bytes:
        return data, {}
    return data[:keep_bytes], {
        TRUNCATED: "true",
        ORIGINAL_SIZE: str(len(data)),
        ORIGINAL_SHA256: hashlib.sha256(data).hexdigest(),
    }
