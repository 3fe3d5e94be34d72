"""What the NATS server refuses a connection, reported as it happens instead of as a timeout.

The server answers a publish or a subscription the connection's user may not make with an
asynchronous ``-ERR 'Permissions Violation for Publish to "<subject>"'``; nats-py hands it to the
connection's error callback and the request itself just waits for its timeout. :class:`Refusals`
is that callback for the connections :meth:`noema_sdk.NoemaClient.connect` opens: a refusal of a
request's subject (or of the inbox its replies come to) ends the request at once with
:class:`~noema_sdk.errors.PermissionDenied`, and every asynchronous error is logged once, as a
warning on the ``noema_sdk`` logger (stdlib logging, which structlog's setups route), instead of
nats-py's default error callback that prints a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Iterator

__all__ = ["Refusals"]

log = logging.getLogger("noema_sdk")

_VIOLATION = re.compile(r"permissions violation for (publish|subscription) to \"?([^\"' ]+)", re.IGNORECASE)


class Refusals:
    """The error callback of one connection, and the requests waiting to hear of a refusal."""

    def __init__(self, inbox_prefix: str | None = None) -> None:
        self._inbox = inbox_prefix
        self._waiting: dict[str, set[asyncio.Future[str]]] = {}

    async def error_cb(self, exc: Exception) -> None:
        """The connection's ``error_cb``: log, and end the requests the refusal concerns."""
        text = str(exc)
        found = _VIOLATION.search(text)
        if found is None:
            log.warning("NATS reported an error: %s", text or type(exc).__name__)
            return
        action, subject = found.group(1).lower(), found.group(2)
        log.warning("NATS refused this connection's user: %s", text.removeprefix("nats: "))
        refused = f"the NATS server refused to let this user {action} to {subject}"
        for waiting_subject, futures in self._waiting.items():
            if waiting_subject == subject or (action == "subscription" and self._is_inbox(subject)):
                for future in futures:
                    if not future.done():
                        future.set_result(refused)

    def _is_inbox(self, subject: str) -> bool:
        return self._inbox is not None and (subject == self._inbox or subject.startswith(self._inbox + "."))

    @contextlib.contextmanager
    def watching(self, subject: str) -> Iterator[asyncio.Future[str]]:
        """A future that resolves (to what was refused) when the server refuses ``subject``, or
        the inbox replies come to, while the block runs."""
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(subject, set()).add(future)
        try:
            yield future
        finally:
            futures = self._waiting.get(subject)
            if futures is not None:
                futures.discard(future)
                if not futures:
                    del self._waiting[subject]
            future.cancel()
