"""Publisher client: validate an observation up front, publish it once, get its stream sequence.

Depends only on nats-py and the event catalog, so agents can use it without the server's stack. The
validation itself (:func:`build_observation`) is :mod:`noema.observations`'s, where the application
takes it from too.
"""

from __future__ import annotations

from typing import Any

from nats.aio.client import Client as NATS
from nats.js import JetStreamContext

from noema.observations import InvalidObservation, Stored, build_observation
from noema.topology import Topology
from noema_events import ObservationRecorded, encode_event
from noema_sdk.tracing import trace_headers

__all__ = [
    "InvalidObservation",
    "JetStreamObservations",
    "Stored",
    "build_observation",
    "publish_observation",
    "send_observation",
]


async def publish_observation(
    js: JetStreamContext,
    content: str,
    *,
    workspace: str,
    mind: str,
    topology: Topology | None = None,
    timeout: float = 5.0,
    **fields: Any,
) -> int:
    """Validate and publish an observation; returns its stream sequence.

    ``Nats-Msg-Id`` is the observation id, so retrying with the same ``observation_id`` stores it
    once and returns the original sequence. Other keyword arguments are those of
    :func:`build_observation`.
    """
    obs = build_observation(content, workspace=workspace, mind=mind, **fields)
    return (await send_observation(js, obs, topology=topology, timeout=timeout)).seq


async def send_observation(
    js: JetStreamContext, obs: ObservationRecorded, *, topology: Topology | None = None, timeout: float = 5.0
) -> Stored:
    """Publish a built observation with ``Nats-Msg-Id`` = its id: the one publication of an
    observation, for every surface (``noemactl observe``, :meth:`noema.application.facade.Noema.observe`
    behind the NATS service's ``observe``, :func:`publish_observation`)."""
    topology = topology or Topology()
    ack = await js.publish(
        topology.observation_subject(obs.workspace, obs.mind),
        encode_event(obs),
        timeout=timeout,
        headers={"Nats-Msg-Id": obs.id, **trace_headers()},
    )
    return Stored(int(ack.seq), bool(ack.duplicate))


class JetStreamObservations:
    """:class:`noema.ports.ObservationSink` on a NATS connection."""

    def __init__(self, nc: NATS, topology: Topology) -> None:
        self._nc = nc
        self._topology = topology

    async def send(self, obs: ObservationRecorded) -> Stored:
        return await send_observation(self._nc.jetstream(), obs, topology=self._topology)
