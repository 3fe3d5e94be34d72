"""Which exceptions mean "a server is not there right now" (or "try again") rather than "this input is
wrong".

Workers retry them with backoff (see :class:`noema.runtime.worker.PullWorker`) instead of dead-lettering the
message; the NATS service answers them with 503 (retry later) instead of 500.
"""

from __future__ import annotations

import asyncpg
import nats.errors

from noema.ports import ConcurrentWrite

__all__ = ["BACKEND_UNAVAILABLE", "TRANSIENT", "broken_connection"]

BACKEND_UNAVAILABLE: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    nats.errors.Error,
    asyncpg.InterfaceError,
    asyncpg.PostgresConnectionError,
    # The server shut down, restarts, cancelled the statement, or is out of connections or resources.
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.exceptions.InsufficientResourcesError,
)

TRANSIENT: tuple[type[BaseException], ...] = (
    *BACKEND_UNAVAILABLE,
    # The same statements succeed when run again: a lost race, not a property of the message.
    asyncpg.exceptions.SerializationError,
    asyncpg.exceptions.DeadlockDetectedError,
    asyncpg.exceptions.LockNotAvailableError,
    # Another instance published on a fenced subject first (attend's decisions after a takeover).
    ConcurrentWrite,
)
"""Failures a worker retries with backoff, never holding them against the message."""


def broken_connection(exc: BaseException) -> bool:
    """Whether ``exc`` is a pooled connection left in a state the driver's protocol refuses
    ("cannot switch to state 15; another operation (2) is in progress"): seen after a PostgreSQL
    restart, on a connection the server dropped mid-operation. The connection's fault, never the
    message's: the pool terminates it when its reset fails, so a retry gets another. Only that
    message: asyncpg's other client-side errors (codecs, a stale schema cache) are bugs to see."""
    return isinstance(exc, asyncpg.InternalClientError) and str(exc).startswith("cannot switch to state")
