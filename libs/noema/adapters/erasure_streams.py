"""What an erasure removes from JetStream (docs/privacy.md): the erased observations and dead letters,
deleted one by one (JetStream overwrites a deleted message on disk unless told not to), and the
vector cache, emptied whole (it is keyed by a hash of the text, so the erased texts' entries cannot
be told apart, and it is only a cache).

The event stream is never touched: its content is sealed, and destroying the keys is what erases it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import dataclass

import msgspec
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from noema.adapters.jetstream import EPHEMERAL_IDLE_S
from noema.adapters.pull import Puller
from noema.topology import Topology
from noema_events.bounded import Undecodable, decode_json

__all__ = [
    "Found",
    "delete_messages",
    "find_dead_letters",
    "find_observations",
    "purge_vector_cache",
    "scan",
]


@dataclass(frozen=True, slots=True)
class Found:
    """A message an erasure covers: its stream sequence and, for an observation, its id."""

    seq: int
    observation_id: str = ""


class _Envelope(msgspec.Struct, forbid_unknown_fields=False):
    id: str = ""
    payload: dict[str, object] = msgspec.field(default_factory=dict)


def _about(data: bytes, subject: str | None, ids: Collection[str]) -> tuple[bool, str]:
    """Whether a message's bytes are about ``subject`` or one of ``ids``, and the observation id it
    names. A message that does not decode (a dead letter may be any bytes; an agent may publish JSON
    nested thousands of levels deep, refused by the bounded decoding before it is parsed) is about
    them when their text appears in its bytes: subject keys and ids are opaque tokens, so that match
    is precise. No message stops the scan."""
    try:
        env = decode_json(data, _Envelope, max_bytes=None)
    except Undecodable:
        needles = [*ids, *([subject] if subject else [])]
        return any(n.encode() in data for n in needles), ""
    subjects = env.payload.get("subjects")
    tagged = subject is not None and isinstance(subjects, list) and subject in subjects
    return tagged or env.id in ids, env.id


async def scan(nc: NATS, stream: str, subjects: str | list[str]) -> AsyncIterator[Msg]:
    """Every message of ``stream`` on ``subjects`` stored now, in order, whatever was deleted before
    (an ephemeral consumer without acks, read until it has nothing pending)."""
    js = nc.jetstream()
    info = await js.add_consumer(
        stream,
        ConsumerConfig(
            deliver_policy=DeliverPolicy.ALL,
            ack_policy=AckPolicy.NONE,
            filter_subject=subjects if isinstance(subjects, str) else None,
            filter_subjects=None if isinstance(subjects, str) else subjects,
            inactive_threshold=EPHEMERAL_IDLE_S,
        ),
    )
    assert info.name is not None
    # Not deleted after: the server removes it once idle (noema.adapters.jetstream.read_stream).
    if not info.num_pending:
        return
    puller = await Puller(nc, stream, info.name, 500).start()
    try:
        while True:
            msgs = await puller.fetch(timeout=10.0)
            if not msgs:
                raise RuntimeError(f"stream {stream} stopped delivering before its end")
            for msg in msgs:
                yield msg
            if msgs[-1].metadata.num_pending == 0:
                return
    finally:
        await puller.stop()


async def _scan(
    nc: NATS, stream: str, subjects: str | list[str], keep: Callable[[Msg], Found | None]
) -> list[Found]:
    return [f async for m in scan(nc, stream, subjects) if (f := keep(m)) is not None]


async def find_observations(
    nc: NATS, topology: Topology, workspace: str, subject: str | None, ids: Collection[str]
) -> list[Found]:
    """The observations of ``workspace`` tagged with ``subject`` or with an id in ``ids``."""

    def keep(msg: Msg) -> Found | None:
        about, obs_id = _about(msg.data, subject, ids)
        return Found(msg.metadata.sequence.stream, obs_id) if about else None

    # Observations only, also where stored by partition (recall candidates have one token more)
    return await _scan(nc, topology.observation_stream, topology.workspace_observations(workspace), keep)


async def find_dead_letters(
    nc: NATS, topology: Topology, workspace: str, subject: str | None, ids: Collection[str]
) -> list[Found]:
    """The dead letters of messages of ``workspace`` that are about ``subject`` or ``ids``."""

    def keep(msg: Msg) -> Found | None:
        original = (msg.headers or {}).get("Noema-Original-Subject", "")
        if topology.workspace_of_subject(original) != workspace:  # stored by partition too
            return None
        about, obs_id = _about(msg.data, subject, ids)
        return Found(msg.metadata.sequence.stream, obs_id) if about else None

    return await _scan(nc, topology.dead_letter_stream, topology.dead_letter_subjects, keep)


async def delete_messages(nc: NATS, stream: str, seqs: Collection[int]) -> int:
    """Delete (and overwrite) the messages; returns how many were there to delete."""
    js = nc.jetstream()
    deleted = 0
    for seq in sorted(seqs):
        try:
            deleted += bool(await js.delete_msg(stream, seq))
        except NotFoundError:
            continue  # deleted before (a rerun), or aged out of the dead-letter stream
    return deleted


async def purge_vector_cache(nc: NATS, topology: Topology) -> None:
    """Empty the vector cache (a miss only costs an embedding)."""
    with contextlib.suppress(NotFoundError):
        await nc.jetstream().purge_stream(topology.vector_stream)
