"""Sealing with a keyring: content is sealed under its item's key before it is published and opened
when read back (the rules of which fields, under which key: :mod:`noema.domain.sealed_events`; the
keys: a :class:`noema.ports.Keyring`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from noema.domain.sealed_events import key_ids_to_open, key_requests, opened, sealed
from noema.ports import Keyring
from noema_events import Event

__all__ = ["KeyringSealer"]

E = TypeVar("E", bound=Event)


class KeyringSealer:
    """Seals events before they are published and opens events read back, with one keyring (a
    :class:`noema.ports.Sealer`)."""

    def __init__(self, keyring: Keyring) -> None:
        self._keyring = keyring

    async def seal(self, events: Sequence[E]) -> list[E]:
        requests = [r for ev in events for r in key_requests(ev)]
        if not requests:
            return list(events)
        keys = await self._keyring.ensure(requests)
        return [sealed(ev, keys) for ev in events]

    async def open(self, events: Sequence[E]) -> list[E]:
        needed = key_ids_to_open(events)
        keys = await self._keyring.lookup(needed) if needed else {}
        return [opened(ev, keys) for ev in events]
