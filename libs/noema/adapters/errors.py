"""Which exceptions mean "a server is not there right now" rather than "this input is wrong".

Workers crash on them (the message is redelivered once the server is back) instead of dead-lettering
the message; the NATS service answers them with 503 (retry later) instead of 500.
"""

from __future__ import annotations

import asyncpg
import nats.errors

__all__ = ["BACKEND_UNAVAILABLE"]

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
