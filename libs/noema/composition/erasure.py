"""Erasure of personal data (docs/privacy.md): ``noemactl erase`` and ``Noema.erase``.

An erasure finds everything held about a subject, a memory, an observation or an agent's notes,
records that it erases it (``content.erased``: who, when, why, which items — never the content), then

1. has the projector apply it: in one transaction it destroys the items' data keys, so the sealed
   content in the event stream and the ``events`` table can never be opened again, and blanks the
   read model's copies (memories' text, vectors, working-memory gists). The erasure waits for that
   (``keys_destroyed`` says whether it saw it; if the projector is down, it happens when it is back);
2. deletes the erased observations and dead letters from their streams (overwritten on disk); a
   process whose NATS identity may not delete observations (the API's) names where they are stored
   in the event instead, and the projector deletes them when it applies it (each message checked
   to be one of them);
3. empties the vector cache (the read model's history is blanked by the projection, with the rows).

Every step is idempotent, so an erasure that stopped half-way is finished by running it again.
What is found: the observations tagged with the subject (or of that id), the memories, facts and
recall records sealed under their keys, and — through the keyring's source links — everything
derived from them (a memory consolidated from an erased one, a fact citing an erased observation).
An agent's notes (never subject-tagged: a scratchpad) are erased whole, every version of them.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import msgspec
import structlog
from nats.aio.client import Client as NATS

from noema.adapters.erasure_streams import (
    delete_messages,
    find_dead_letters,
    find_observations,
    purge_vector_cache,
)
from noema.adapters.postgres.keyring import PostgresKeyring
from noema.domain.attention import memory_id_for
from noema.domain.sealed_events import notes_source
from noema.errors import Kind, NoemaError
from noema.ids import new_id
from noema.ports import ExpectingSink
from noema.topology import Topology
from noema_events import NAME_PATTERN, ContentErased, ContentErasedPayload, NotesUpdated, NotesUpdatedPayload

__all__ = ["ErasureReport", "ErasureRequest", "NotAnAgent", "NothingToErase", "Scope", "erase"]

Scope = Literal["subject", "memory", "observation", "notes"]

log = structlog.get_logger("noema.erasure")


class NotAnAgent(NoemaError):
    """``--notes`` names something that cannot be an agent."""

    kind = Kind.INVALID


class NothingToErase(NoemaError):
    """Nothing in the workspace matches the erasure's target."""

    kind = Kind.NOT_FOUND


@dataclass(frozen=True, slots=True)
class ErasureRequest:
    workspace: str
    scope: Scope
    target: str
    reason: str
    actor: str


class ErasureReport(msgspec.Struct, frozen=True, kw_only=True):
    """What an erasure did (``noemactl erase --json`` and ``POST /v1/erasures`` answer it)."""

    erasure_id: str
    seq: int
    """The stream sequence of the ``content.erased`` event (its audit record)."""
    key_ids: list[str]
    """The data keys destroyed (item ids)."""
    memory_ids: list[str]
    """The memories and facts whose content is erased."""
    observation_ids: list[str]
    dead_letters: list[str]
    observations_deleted: int = 0
    dead_letters_deleted: int = 0
    keys_destroyed: bool = False
    """Whether the projector applied the erasure (keys destroyed, read model blanked) in time; if
    not, it does when it next runs."""
    copies_blanked: list[str] = msgspec.field(default_factory=list)
    """Frozen copies of the read model blanked too (kept replays, resting projection versions)."""


@dataclass(frozen=True, slots=True)
class _Found:
    key_ids: list[str]
    memory_ids: list[str]
    observation_ids: list[str]
    observation_seqs: list[int]
    dead_letter_seqs: list[int]
    erased_before: int = 0
    """Items it covers that an earlier erasure erased already (not erased, nor counted, again)."""


async def _find(keyring: PostgresKeyring, nc: NATS, topology: Topology, request: ErasureRequest) -> _Found:
    ws, target = request.workspace, request.target
    if request.scope == "notes":  # every version of the agent's notes; nothing derives from notes
        versions = await keyring.linked(ws, "source", [notes_source(target)])
        return _Found(sorted(await keyring.existing(ws, versions, live=True)), [], [], [], [])
    subject = target if request.scope == "subject" else None
    seeds: set[str] = set()
    obs_ids: set[str] = set()
    if request.scope == "subject":
        seeds |= await keyring.linked(ws, "subject", [target])
    elif request.scope == "observation":
        obs_ids.add(target)
        seeds.add(memory_id_for(target))
    else:
        seeds.add(target)
        obs_ids |= set(await keyring.sources_of(ws, [target]))
    observations = await find_observations(nc, topology, ws, subject, obs_ids)
    obs_ids |= {o.observation_id for o in observations if o.observation_id}
    seeds |= {memory_id_for(o) for o in obs_ids}
    # Whatever was derived from what is erased goes with it (sources are observations or memories).
    keys, frontier = set(seeds), set(seeds) | obs_ids
    while frontier:
        derived = await keyring.linked(ws, "source", frontier) - keys
        keys |= derived
        frontier = derived
    # What an earlier erasure erased is neither erased nor counted again (its keys are destroyed,
    # its memories marked erased); an erasure cut short before the projector applied it is redone.
    stored = await keyring.existing(ws, keys, live=True)
    memories = await keyring.memories(ws, keys, erased=False)
    erased_before = len(await keyring.existing(ws, keys) - stored)
    dead = await find_dead_letters(nc, topology, ws, subject, obs_ids | {target})
    return _Found(
        key_ids=sorted(stored | set(memories)),
        memory_ids=sorted(memories),
        observation_ids=sorted(obs_ids & {o.observation_id for o in observations}),
        observation_seqs=[o.seq for o in observations],
        dead_letter_seqs=[d.seq for d in dead],
        erased_before=erased_before,
    )


async def _empty_notes(
    publisher: ExpectingSink, request: ErasureRequest, erasure_id: str, now: datetime
) -> None:
    """Before the versions are looked for: a new, empty version of the agent's notes. An append
    that read an older version (to add a line to it) then finds its subject moved on and reads
    again — the empty one — instead of publishing the erased text anew under a key this erasure
    would not know of. NothingToErase when the agent never wrote notes."""
    empty = NotesUpdated(
        id=new_id(),
        workspace=request.workspace,
        mind=request.target,
        occurred_at=now,
        correlation_id=erasure_id,
        actor=request.actor,
        payload=NotesUpdatedPayload(agent=request.target, notes=""),
    )
    if await publisher.last_on_subject(empty) is None:
        raise NothingToErase(f"{request.target!r} never wrote notes in workspace {request.workspace!r}")
    await publisher.publish([empty])


async def erase(
    keyring: PostgresKeyring,
    nc: NATS,
    topology: Topology,
    publisher: ExpectingSink,
    request: ErasureRequest,
    now: datetime,
    projected: Callable[[int], Awaitable[bool]],
    *,
    delete_observations: bool = True,
) -> ErasureReport:
    """Erase what ``request`` covers; raises :class:`NothingToErase` when nothing matches.

    ``delete_observations`` False: leave deleting the erased observations to the projector, which
    does when it applies the erasure (a process whose NATS identity may not delete them: the API's)."""
    if request.scope == "notes" and not re.fullmatch(NAME_PATTERN, request.target):
        raise NotAnAgent(f"{request.target!r} is not an agent name (1-64 letters, digits, _ and -)")
    erasure_id = new_id()
    if request.scope == "notes":
        await _empty_notes(publisher, request, erasure_id, now)
    found = await _find(keyring, nc, topology, request)
    if not (found.key_ids or found.observation_seqs or found.dead_letter_seqs or request.scope == "notes"):
        if found.erased_before:
            raise NothingToErase(
                f"everything in workspace {request.workspace!r} about {request.scope} {request.target!r} "
                f"was erased before ({found.erased_before} items): nothing is left to erase"
            )
        raise NothingToErase(
            f"nothing in workspace {request.workspace!r} is about {request.scope} {request.target!r}"
        )
    dead_letters = [f"{topology.dead_letter_stream}:{s}" for s in found.dead_letter_seqs]
    event = ContentErased(
        id=erasure_id,
        workspace=request.workspace,
        mind="",
        occurred_at=now,
        correlation_id=erasure_id,
        actor=request.actor,
        payload=ContentErasedPayload(
            erasure_id=erasure_id,
            scope=request.scope,
            target=request.target,
            reason=request.reason,
            key_ids=found.key_ids,
            memory_ids=found.memory_ids,
            observation_ids=found.observation_ids,
            dead_letters=dead_letters,
            # Only when the projector is to delete them: else this process does, and counts them.
            observation_seqs=[] if delete_observations else found.observation_seqs,
        ),
    )
    seq = await publisher.publish([event])
    observations = (
        await delete_messages(nc, topology.observation_stream, found.observation_seqs)
        if delete_observations
        else 0
    )
    letters = await delete_messages(nc, topology.dead_letter_stream, found.dead_letter_seqs)
    await purge_vector_cache(nc, topology)
    return ErasureReport(
        erasure_id=erasure_id,
        seq=seq,
        key_ids=found.key_ids,
        memory_ids=found.memory_ids,
        observation_ids=found.observation_ids,
        dead_letters=dead_letters,
        observations_deleted=observations,
        dead_letters_deleted=letters,
        keys_destroyed=await projected(seq),
    )
