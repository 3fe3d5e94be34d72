"""The projector's part of an erasure on the observation stream (docs/privacy.md).

An erasure recorded by a process whose NATS identity may not delete observations (the API's,
noema.runtime.identities) leaves their deletion to the projector: once ``content.erased`` is
applied, the projector deletes each message at the erasure's ``observation_seqs`` that is one of
the erased observations — its id among ``observation_ids``, or its bytes naming the erasure's
target, as the erasure's own scan found it (noema.adapters.erasure_streams) — in the erasure's
workspace. Anything else at those sequences is left alone, so a forged erasure deletes nothing it
does not name. Deleting again is a no-op (a replay, or the operator's erasure deleted them first).
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from noema.topology import Topology
from noema_events import ContentErased
from noema_events.bounded import Undecodable, decode_json

__all__ = ["JetStreamErasedObservations", "delete_erased_observations"]

log = structlog.get_logger("noema.erasure")


def _observation_id(data: bytes) -> str:
    try:
        body = decode_json(data)  # any agent's bytes: bounded before the parser (noema_events.bounded)
    except Undecodable:
        return ""
    found = body.get("id") if isinstance(body, dict) else None
    return found if isinstance(found, str) else ""


async def delete_erased_observations(
    js: JetStreamContext, topology: Topology, erasures: Sequence[ContentErased]
) -> int:
    """Delete the erased observations ``erasures`` name and still hold; returns how many. A failure
    (NATS gone, the identity without the right) is logged, never raised: the erasure is recorded and
    applied, and running it again (``noemactl erase``) finishes it."""
    stream = topology.observation_stream
    deleted = 0
    for erasure in erasures:
        p = erasure.payload
        ids = set(p.observation_ids)
        for seq in p.observation_seqs:
            try:
                msg = await js.get_msg(stream, seq)
            except NotFoundError:
                continue  # deleted already
            except Exception as exc:
                log.warning(
                    "erased observations not deleted; run the erasure again (`noemactl erase`)",
                    erasure_id=p.erasure_id,
                    error=repr(exc),
                )
                return deleted
            data = msg.data or b""
            subject = topology.published_subject(msg.subject or "")
            ours = topology.workspace_of_subject(subject) == erasure.workspace
            # As the erasure's scan found it: its id, or (bytes that do not decode) a needle in them.
            needles = [n.encode() for n in (*ids, p.target) if n]
            named = _observation_id(data) in ids or any(n in data for n in needles)
            if not (ours and named):
                log.warning(
                    "not deleted: not an observation the erasure names",
                    erasure_id=p.erasure_id,
                    seq=seq,
                    subject=msg.subject,
                )
                continue
            try:
                deleted += bool(await js.delete_msg(stream, seq))
            except NotFoundError:
                continue
            except Exception as exc:
                log.warning(
                    "erased observations not deleted; run the erasure again (`noemactl erase`)",
                    erasure_id=p.erasure_id,
                    error=repr(exc),
                )
                return deleted
    if deleted:
        log.info("erased observations deleted", observations=deleted)
    return deleted


class JetStreamErasedObservations:
    """The observation stream as the projector's decision deletes erased observations from it
    (:class:`noema.application.projector.ErasedObservations`)."""

    def __init__(self, js: JetStreamContext, topology: Topology) -> None:
        self._js = js
        self._topology = topology

    async def delete(self, erasures: Sequence[ContentErased]) -> int:
        """:func:`delete_erased_observations`."""
        return await delete_erased_observations(self._js, self._topology, erasures)
