"""How to reach and use an OpenAI-compatible embedding server (``NOEMA_EMBEDDER_*``), apart from
the client itself (:mod:`noema.adapters.openai_embedder`): the settings read them in every process,
and a process that embeds nothing (``noemactl --help``, a keyword search) loads no HTTP client."""

from __future__ import annotations

from pathlib import Path

from noema.records import dataclass

__all__ = ["ROLES", "RemoteOptions"]

ROLES = ("input_type", "prefix", "none")
"""How query and passage are told apart (``NOEMA_EMBEDDER_ROLES``)."""


@dataclass(frozen=True, kw_only=True)
class RemoteOptions:
    """How to reach and use an OpenAI-compatible embedding server (from ``NOEMA_EMBEDDER_*``)."""

    base_url: str
    """Up to and without ``/embeddings``, e.g. ``http://127.0.0.1:8000/v1``."""
    model: str
    api_key_file: Path | None = None
    roles: str = "none"
    query_prefix: str = "query: "
    passage_prefix: str = "passage: "
    batch: int = 64
    """Texts per request."""
    concurrency: int = 4
    """Requests in flight at once within one call."""
    timeout_s: float = 300.0
    """A passage request's timeout. Generous: a server that runs one inference at a time queues the
    requests in flight, and a request that times out is computed all the same, then sent again."""
    query_timeout_s: float = 3.0
    """A search's query embedding gives up after this: the search then answers without vectors."""
    dimensions: int | None = None
    """The dimension count expected (``NOEMA_EMBEDDER_DIMENSIONS``); None: whatever the server gives."""
    attempts: int = 3
    cooldown_s: float = 5.0
    """How long the circuit stays open after a request failed all its attempts."""
