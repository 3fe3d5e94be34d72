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
- ``working_memory.updated``: each item's gist under its memory's key;
- ``notes.updated``: the notes under a key of that version's own (its event id), linked to the
  agent's notes (:func:`notes_source`), so erasing them removes every version.

Ids, labels, scores, times and metadata stay readable: they are what the audit trail and replay
need, and they are not content (docs/privacy.md says what to keep out of them). Writers seal with a
:class:`noema.ports.Sealer` before publishing; readers open with the keys they hold (the projector
through its connection, attend when it resumes a mind). The rules are pure; where keys live is the
:class:`noema.ports.Keyring`'s business.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

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
    MemoryEmbeddedPayload,
    MemoryRetrieved,
    NotesUpdated,
    RecallProposed,
    WorkingMemoryUpdated,
)

_SEALABLE = (
    MemoryCreated,
    FactProposed,
    MemoryEmbedded,
    MemoryRetrieved,
    RecallProposed,
    WorkingMemoryUpdated,
    NotesUpdated,
)

__all__ = [
    "ERASED",
    "KeyRequest",
    "Keys",
    "is_sealed_event",
    "key_ids_to_open",
    "key_requests",
    "notes_source",
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
        case NotesUpdated(payload=p) if p.notes:
            return [KeyRequest(event.id, ws, sources=(notes_source(p.agent),))]
    return []


def notes_source(agent: str) -> str:
    """What every version of an agent's notes is linked to in the keyring (each version has a key of
    its own, its event id): ``noemactl erase --notes AGENT`` finds them all by it. Not an id nor a
    subject key (it has a space), so nothing else is ever linked to it."""
    return f"notes of {agent}"


_ERASED_CONTENT = "nsl1:erased:"
"""What a content field that must not be empty holds when its key was destroyed before it was written:
a seal naming no key, which opens as erased."""


@dataclass(slots=True)
class _Rewrite:
    """What one pass does to each sealed field (seal it, open it, or just look at it)."""

    text: Callable[[str, str], str]
    """(value, id of the key the field belongs under) → the field's new value."""
    vector: Callable[[MemoryEmbeddedPayload], MemoryEmbeddedPayload]
    required: Callable[[str, str], str] | None = None
    """For a content field that must not be empty (``text`` when None)."""
    replace: Callable[..., Any] = msgspec.structs.replace
    """How a struct takes the new values (a pass that only looks keeps it as it is)."""

    def content(self, value: str, key_id: str) -> str:
        return (self.required or self.text)(value, key_id)

    def texts(self, values: Sequence[str], key_id: str) -> list[str]:
        if not values:  # most lists are empty: the cheap way
            return []
        text = self.text
        return [v for v in [text(x, key_id) for x in values] if v]


def _rewritten(event: E, rw: _Rewrite) -> E:
    """``event`` with every sealed field (the one list of them: module docstring) passed through ``rw``."""
    replace = rw.replace
    out: Event = event
    match event:
        case MemoryCreated(payload=p):
            k = p.memory_id
            payload = replace(
                p,
                content=rw.content(p.content, k),
                participants=rw.texts(p.participants, k),
                steps=rw.texts(p.steps, k),
                preconditions=rw.texts(p.preconditions, k),
                outcomes=rw.texts(p.outcomes, k),
            )
            out = replace(event, payload=payload)
        case FactProposed(payload=p):
            out = replace(event, payload=replace(p, content=rw.content(p.content, p.memory_id)))
        case MemoryEmbedded(payload=p):
            out = replace(event, payload=rw.vector(p))
        case MemoryRetrieved(payload=p):
            out = replace(event, payload=replace(p, query=rw.text(p.query, p.memory_id)))
        case RecallProposed(payload=p):
            content = rw.text(p.content, p.memory_id)
            out = replace(
                event,
                payload=replace(p, content=content, query=rw.text(p.query, memory_id_for(p.observation_id))),
            )
        case WorkingMemoryUpdated(payload=p):
            items = [replace(i, gist=rw.text(i.gist, i.memory_id)) for i in p.items]
            out = replace(event, payload=replace(p, items=items))
        case NotesUpdated(payload=p):
            out = replace(event, payload=replace(p, notes=rw.text(p.notes, event.id)))
    return out  # type: ignore[return-value]


def sealed(event: E, keys: Keys) -> E:
    """``event`` with its content sealed under ``keys`` (from :func:`key_requests`); content whose
    key is destroyed is left out (written as erased)."""

    def text(value: str, key_id: str) -> str:
        return seal_text(value, key_id, keys.get(key_id))

    def vector(p: MemoryEmbeddedPayload) -> MemoryEmbeddedPayload:
        if not p.vector:
            return p
        sealed_vector = seal_vector(p.vector, p.memory_id, keys.get(p.memory_id))
        return msgspec.structs.replace(p, vector=[], sealed_vector=sealed_vector or None)

    return _rewritten(event, _Rewrite(text, vector, lambda v, k: text(v, k) or _ERASED_CONTENT))


def _sealed_texts(event: Event) -> list[str]:
    found: list[str] = []

    def text(value: str, _: str) -> str:
        found.append(value)
        return value

    def vector(p: MemoryEmbeddedPayload) -> MemoryEmbeddedPayload:
        found.append(p.sealed_vector or "")
        return p

    if isinstance(event, _SEALABLE):
        _rewritten(event, _Rewrite(text, vector, replace=_kept))
    return found


def _kept(struct: Any, **_: Any) -> Any:
    return struct


def key_ids_to_open(events: Sequence[Event]) -> set[str]:
    """The keys the sealed fields of ``events`` name."""
    return {k for ev in events for text in _sealed_texts(ev) if (k := sealed_key_id(text)) is not None}


def is_sealed_event(event: Event) -> bool:
    return any(is_sealed(t) for t in _sealed_texts(event))


def opened(event: E, keys: Keys) -> E:
    """``event`` with its sealed fields opened (erased ones empty); plaintext fields as they are."""
    if not is_sealed_event(event):
        return event

    def text(value: str, _: str) -> str:
        return open_text(value, keys)

    def vector(p: MemoryEmbeddedPayload) -> MemoryEmbeddedPayload:
        if not p.sealed_vector:
            return p
        return msgspec.structs.replace(p, vector=open_vector(p.sealed_vector, keys), sealed_vector=None)

    return _rewritten(event, _Rewrite(text, vector))
