"""Prompt shutdown for workers whose batches take long (recall, embedding).

:class:`~noema.runtime.worker.PullWorker` finishes the batch in hand before it stops; a batch of recalls or
embeddings can take many seconds on a busy machine, longer than ``noemactl up`` waits. Such a
handler checks a :class:`StopFlag` between units of work, acks what it finished and naks the rest
(redelivered at once to the next instance, not after the ack wait), and :class:`StopsHandler`
raises the flag when the service is asked to shut down.
"""

from __future__ import annotations

from collections.abc import Sequence

from nats.aio.msg import Msg

from noema.runtime.worker import Service

__all__ = ["StopFlag", "StopsHandler", "release"]


class StopFlag:
    """Raised once, when the process is asked to stop; read between units of work."""

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        """Ask the work to stop (signal-safe: a plain assignment)."""
        self._set = True

    @property
    def is_set(self) -> bool:
        """Whether a stop was asked for."""
        return self._set


class StopsHandler:
    """A service whose :meth:`shutdown` also raises ``flag``, so its handler stops mid-batch."""

    def __init__(self, service: Service, flag: StopFlag) -> None:
        self.service = service
        self.flag = flag

    @property
    def name(self) -> str:
        """The wrapped service's name."""
        return str(getattr(self.service, "name", type(self.service).__name__))

    async def run(self) -> None:
        """Run the wrapped service until it stops."""
        await self.service.run()

    def shutdown(self) -> None:
        """Raise the flag, then shut the wrapped service down."""
        self.flag.set()
        self.service.shutdown()


async def release(msgs: Sequence[Msg]) -> None:
    """Nak messages left unprocessed by a stop, so they are redelivered now, not after the ack wait."""
    for msg in msgs:
        await msg.nak()
