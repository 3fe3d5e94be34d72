"""The embedder a process starts with, checked before it consumes anything.

With ``NOEMA_EMBEDDER=openai:<base URL>`` the server must answer for the model, and its vectors must
have the dimension count of those already stored under the model's name: a wrong URL, a wrong model
or a mismatch is an :class:`~noema.adapters.embedders.EmbedderConfigError` saying what to fix, on
which every process exits 2 (:func:`noema.runtime.worker.serve`) before a worker takes a message.
"""

from __future__ import annotations

import asyncio

import asyncpg

from noema.adapters.embedders import EmbedderConfigError, OpenAIEmbedder, create_embedder
from noema.adapters.postgres import create_pool
from noema.adapters.postgres.queries import stored_dimensions
from noema.ports import Embedder
from noema.runtime.settings import Located, Settings
from noema.threads import in_daemon_thread

__all__ = ["START_WAIT_S", "check_configured", "check_embedder", "start_embedder"]

START_WAIT_S = 15.0
"""How long a starting process waits for an embedding server that refuses connections (it may be
starting beside it) before it gives up with exit 2."""


async def check_embedder(embedder: Embedder, pool: asyncpg.Pool | None, wait_s: float = START_WAIT_S) -> None:
    """The start check of a remote ``embedder`` (nothing to check in process): it answers for its
    model, and its dimensions match the vectors ``pool``'s read model stores for that model."""
    if not isinstance(embedder, OpenAIEmbedder):
        return
    dims = await in_daemon_thread(lambda: embedder.verify(wait_s))
    if pool is None:
        return
    stored = await stored_dimensions(pool, embedder.name)
    if stored is not None and stored != dims:
        raise EmbedderConfigError(
            f"model {embedder.name!r} at {embedder.base} gives {dims}-dimensional vectors, but the "
            f"vectors stored under that name have {stored}: point NOEMA_EMBEDDER at the server that made "
            "them, or give this model another name in NOEMA_EMBEDDER_MODEL (and run `noemactl memory "
            "embed-missing` to embed every memory with it)"
        )


async def start_embedder(settings: Settings, pool: asyncpg.Pool | None) -> Embedder | None:
    """The embedder ``settings`` name, loaded off the event loop and checked (:func:`check_embedder`)."""
    embedder = await asyncio.to_thread(create_embedder, settings.embedder, settings.remote_embedder)
    if embedder is not None:
        await check_embedder(embedder, pool)
    return embedder


async def check_configured(located: Located) -> None:
    """:func:`check_embedder` for ``noemactl up`` before it starts any worker (nothing to do unless
    the embedder is remote)."""
    if located.remote_embedder is None:
        return
    embedder = create_embedder(located.embedder, located.remote_embedder)
    assert embedder is not None
    pool = await create_pool(located.database_url, located.db_schema, app="noema-up", min_size=1, max_size=1)
    try:
        await check_embedder(embedder, pool)
    finally:
        await pool.close()
