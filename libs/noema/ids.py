"""Identifiers. Derived ids are deterministic so a redelivered input yields the same events,
which JetStream then deduplicates by ``Nats-Msg-Id``."""

from __future__ import annotations

import uuid

__all__ = ["derive_id", "new_id"]

_NAMESPACE = uuid.UUID("5b0e3c53-8f0e-4d8a-9a57-1f6a2f8f0a11")


def new_id() -> str:
    """A fresh random id."""
    return str(uuid.uuid4())


def derive_id(*parts: str) -> str:
    """A stable id from its parts (same parts → same id)."""
    return str(uuid.uuid5(_NAMESPACE, "\x1f".join(parts)))
