"""Which fields of which events are sealed, under which item's key (docs/privacy.md).

Every content-bearing field is sealed under the data key of the item its text belongs to:

- ``memory.created`` and ``fact.proposed``: content (and a memory's participants, steps,
  preconditions and outcomes) under the memory's key, linked to the subjects the content was tagged
  with and to its sources (observations or memories it came from);
- ``memory.embedded``: the vector, under the memory's key;
- ``memory.retrieved``: the query, under the key of the memory it recalled (a query that found an
  erased memory is erased with it);
- ``recall.proposed``: the recalled memory's text under that memory's key, and the asking
  observation's text under the key of the memory that observation becomes (linked to its subjects);
- ``working_memory.updated``: each item's gist under its memory's key.

Ids, labels, scores, times and metadata stay readable: they are what the audit trail and replay
need, and they are not content (docs/privacy.md says what to keep out of them). Writers seal with a
:class:`Sealer` before publishing; readers open with the keys they hold (the projector through its
connection, attend when it resumes a mind).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import msgspec

from noema.domain.attention import memory_id_for
from noema.domain.sealing import (
    ERASED,
    KeyBytes,
    is_sealed,
    open_text,
    open_vector,
    seal_text,
    seal_vector,
    sealed_key_id,
)
from noema_events import (
    Event,
    FactProposed,
    MemoryCreated,
    MemoryEmbedded,
    MemoryRetrieved,
    RecallProposed,
    WorkingMemoryUpdated,
)

__all__ = [
    "ERASED",
    "KeyRequest",
    "Keyring",
    "Sealer",
    "is_sealed_event",
    "key_ids_to_open",
    "key_requests",
    "opened",
    "sealed",
]

E = TypeVar("E", bound=Event)


@dataclass(frozen=True, slots=True)
class KeyRequest:
    """The key an item's content is sealed under, with what it answers for."""

    key_id: str
    workspace: str
    subjects: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()

    def joined(self, other: KeyRequest) -> KeyRequest:
        """Both requests' links (for the same key)."""
        return KeyRequest(
            self.key_id,
            self.workspace,
            tuple(dict.fromkeys(self.subjects + other.subjects)),
            tuple(dict.fromkeys(self.sources + other.sources)),
        )


class Keyring(Protocol):
    async def ensure(self, requests: Sequence[KeyRequest]) -> dict[str, KeyBytes]:
        """The key of each request (None when destroyed), created with its links when new."""
        ...

    async def lookup(self, key_ids: Collection[str]) -> dict[str, KeyBytes]:
        """The keys of ``key_ids`` that exist (None when destroyed)."""
        ...


Keys = Mapping[str, KeyBytes]


def key_requests(event: Event) -> list[KeyRequest]:
    """The keys ``event``'s content is sealed under (none for an event without content)."""
    ws = event.workspace
    match event:
        case MemoryCreated(payload=p):
            return [KeyRequest(p.memory_id, ws, tuple(p.subjects), tuple(p.source_observation_ids))]
        case FactProposed(payload=p):
            return [KeyRequest(p.memory_id, ws, tuple(p.subjects), tuple(p.source_observation_ids))]
        case MemoryEmbedded(payload=p) | MemoryRetrieved(payload=p):
            return [KeyRequest(p.memory_id, ws)]
        case RecallProposed(payload=p):
            asking = memory_id_for(p.observation_id)
            return [
                KeyRequest(p.memory_id, ws),
                KeyRequest(asking, ws, tuple(p.subjects), (p.observation_id,)),
            ]
        case WorkingMemoryUpdated(payload=p):
            return [KeyRequest(i.memory_id, ws) for i in p.items if i.gist]
    return []


def _texts(values: Sequence[str], key_id: str, key: KeyBytes) -> list[str]:
    return [v for v in (seal_text(x, key_id, key) for x in values) if v]


def sealed(event: E, keys: Keys) -> E:
    """``event`` with its content sealed under ``keys`` (from :func:`key_requests`); content whose
    key is destroyed is left out (written as erased)."""
    replace = msgspec.structs.replace
    out: Event = event
    match event:
        case MemoryCreated(payload=p):
            k, key = p.memory_id, keys.get(p.memory_id)
            out = replace(
                event,
                payload=replace(
                    p,
                    content=seal_text(p.content, k, key) or _ERASED_CONTENT,
                    participants=_texts(p.participants, k, key),
                    steps=_texts(p.steps, k, key),
                    preconditions=_texts(p.preconditions, k, key),
                    outcomes=_texts(p.outcomes, k, key),
                ),
            )
        case FactProposed(payload=p):
            text = seal_text(p.content, p.memory_id, keys.get(p.memory_id)) or _ERASED_CONTENT
            out = replace(event, payload=replace(p, content=text))
        case MemoryEmbedded(payload=p) if p.vector:
            vector = seal_vector(p.vector, p.memory_id, keys.get(p.memory_id))
            out = replace(event, payload=replace(p, vector=[], sealed_vector=vector or None))
        case MemoryRetrieved(payload=p) if p.query:
            out = replace(
                event, payload=replace(p, query=seal_text(p.query, p.memory_id, keys.get(p.memory_id)))
            )
        case RecallProposed(payload=p):
            asking = memory_id_for(p.observation_id)
            out = replace(
                event,
                payload=replace(
                    p,
                    content=seal_text(p.content, p.memory_id, keys.get(p.memory_id)),
                    query=seal_text(p.query, asking, keys.get(asking)),
                ),
            )
        case WorkingMemoryUpdated(payload=p):
            items = [replace(i, gist=seal_text(i.gist, i.memory_id, keys.get(i.memory_id))) for i in p.items]
            out = replace(event, payload=replace(p, items=items))
    return out  # type: ignore[return-value]


_ERASED_CONTENT = "nsl1:erased:"
"""What a content field that must not be empty holds when its key was destroyed before it was written:
a seal naming no key, which opens as erased."""


def _sealed_texts(event: Event) -> list[str]:
    match event:
        case MemoryCreated(payload=p):
            return [p.content, *p.participants, *p.steps, *p.preconditions, *p.outcomes]
        case FactProposed(payload=p):
            return [p.content]
        case MemoryEmbedded(payload=p):
            return [p.sealed_vector or ""]
        case MemoryRetrieved(payload=p):
            return [p.query]
        case RecallProposed(payload=p):
            return [p.content, p.query]
        case WorkingMemoryUpdated(payload=p):
            return [i.gist for i in p.items]
    return []


def key_ids_to_open(events: Sequence[Event]) -> set[str]:
    """The keys the sealed fields of ``events`` name."""
    return {k for ev in events for text in _sealed_texts(ev) if (k := sealed_key_id(text)) is not None}


def is_sealed_event(event: Event) -> bool:
    return any(is_sealed(t) for t in _sealed_texts(event))


def opened(event: E, keys: Keys) -> E:
    """``event`` with its sealed fields opened (erased ones empty); plaintext fields as they are."""
    if not is_sealed_event(event):
        return event
    replace = msgspec.structs.replace

    def text(value: str) -> str:
        return open_text(value, keys)

    def texts(values: Sequence[str]) -> list[str]:
        return [v for v in map(text, values) if v]

    out: Event = event
    match event:
        case MemoryCreated(payload=p):
            payload = replace(
                p,
                content=text(p.content),
                participants=texts(p.participants),
                steps=texts(p.steps),
                preconditions=texts(p.preconditions),
                outcomes=texts(p.outcomes),
            )
            out = replace(event, payload=payload)
        case FactProposed(payload=p):
            out = replace(event, payload=replace(p, content=text(p.content)))
        case MemoryEmbedded(payload=p) if p.sealed_vector:
            out = replace(
                event, payload=replace(p, vector=open_vector(p.sealed_vector, keys), sealed_vector=None)
            )
        case MemoryRetrieved(payload=p):
            out = replace(event, payload=replace(p, query=text(p.query)))
        case RecallProposed(payload=p):
            out = replace(event, payload=replace(p, content=text(p.content), query=text(p.query)))
        case WorkingMemoryUpdated(payload=p):
            out = replace(event, payload=replace(p, items=[replace(i, gist=text(i.gist)) for i in p.items]))
    return out  # type: ignore[return-value]


class Sealer:
    """Seals events before they are published and opens events read back, with one keyring."""

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
