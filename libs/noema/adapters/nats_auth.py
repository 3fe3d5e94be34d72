"""How a process authenticates to NATS (:class:`NatsAuth`): read from the environment by
:mod:`noema.runtime.settings`, used by :func:`noema.adapters.jetstream.connect`. Apart from the
stream adapter so that reading settings does not import the NATS client."""

from __future__ import annotations

from dataclasses import field
from pathlib import Path

from noema.records import dataclass

__all__ = ["NatsAuth"]


@dataclass(frozen=True, kw_only=True)
class NatsAuth:
    """How a process authenticates to NATS and verifies it (besides credentials in the URL)."""

    user: str | None = None
    password: str | None = field(default=None, repr=False)
    creds: Path | None = None
    """A NATS ``.creds`` file (JWT + nkey seed), e.g. a Kubernetes secret mounted as a file."""
    tls_ca: Path | None = None
    """CA bundle that signed the server's certificate (``tls://`` URLs); system CAs when unset."""
    tls_cert: Path | None = None
    tls_key: Path | None = None
    """Client certificate and key, for a server that verifies clients (mutual TLS)."""
